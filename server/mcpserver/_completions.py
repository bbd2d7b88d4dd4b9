"""Completions for prompt arguments and resource-template variables (completion/complete).

An author gives, per argument, either a static list of values (matched by case-insensitive prefix)
or a function `(value, arguments) -> list of str`, where `arguments` are the values the client has
already resolved (context.arguments). At most MAX_VALUES go back, with the total and hasMore.
"""

from __future__ import annotations

from .errors import ConfigError, InvalidParams

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Union
    Completer = Union[list[str], tuple[str, ...], Callable[[str, dict[str, str]], Any]]

__all__ = ["MAX_VALUES", "Completer", "check_completions", "complete"]

MAX_VALUES = 100  # the schema's maxItems for completion.values


def check_completions(completions: Any, known: set[str], where: str) -> dict[str, Completer]:
    """Refuse at start-up a completion for an argument that does not exist, or one of the wrong kind."""
    if completions is None:
        return {}
    if not isinstance(completions, dict):
        raise ConfigError(f"{where}: completions must map argument names to a list of values or a function")
    for name, completer in completions.items():
        if name not in known:
            raise ConfigError(f"{where}: completions name {name!r}, which is not one of its arguments "
                              f"({', '.join(sorted(known)) or 'none'})")
        if not callable(completer) and not (isinstance(completer, (list, tuple))
                                            and all(isinstance(v, str) for v in completer)):
            raise ConfigError(f"{where}: the completion of {name!r} must be a list of strings or a function")
    return dict(completions)


def complete(completers: dict[str, Completer], params: dict[str, Any]) -> dict[str, Any]:
    """The CompleteResult (without resultType) for a request's argument and context."""
    argument = params.get("argument")
    if not isinstance(argument, dict) or not isinstance(argument.get("name"), str) \
            or not isinstance(argument.get("value"), str):
        raise InvalidParams('Invalid params: "argument" must be {"name": string, "value": string}')
    context = params.get("context") or {}
    resolved = context.get("arguments") if isinstance(context, dict) else None
    if resolved is not None and not (isinstance(resolved, dict) and all(isinstance(v, str) for v in resolved.values())):
        raise InvalidParams("Invalid params: context.arguments must be an object of strings")
    completer = completers.get(argument["name"])
    value = argument["value"]
    if completer is None:
        values: list[str] = []
    elif callable(completer):
        found = completer(value, dict(resolved or {}))
        values = [str(v) for v in found] if found is not None else []
    else:
        values = [v for v in completer if v.lower().startswith(value.lower())]
    completion: dict[str, Any] = {"values": values[:MAX_VALUES], "total": len(values),
                                  "hasMore": len(values) > MAX_VALUES}
    return {"completion": completion}
