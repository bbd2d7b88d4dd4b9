"""Prompts: a function whose (string) parameters are the prompt's arguments.

Rules of this module:
- Arguments are an object of strings (WIRE.md §12). An unknown argument, a missing required one or
  a value that is not a string is the client's error: InvalidParams (-32602), before the function
  runs, as Tool.call checks a tool's arguments first.
- The function returns a str (one user message) or a list of {"role", "content"} messages, where
  content is a str or one content block. Anything else is the server's bug (-32603).
"""

from __future__ import annotations

from ._completions import check_completions
from ._context import Context
from .errors import ConfigError, InvalidParams
from .schema._derive import context_parameter
from .schema._signature import EMPTY, VAR_KEYWORD, VAR_POSITIONAL, docstring, parameters, parse_docstring

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Iterable, Optional, Union

    from ._completions import Completer

__all__ = ["Prompt"]


class Prompt:
    """One prompt: its definition, and the function that renders its messages."""

    __slots__ = ("arguments", "completions", "context_parameter", "definition", "description", "name", "renderer",
                 "scopes")

    def __init__(self, renderer: Callable[..., Any], *, name: Optional[str] = None, title: Optional[str] = None,
                 description: Optional[str] = None, completions: Optional[dict[str, Completer]] = None,
                 scopes: Union[str, Iterable[str], None] = None):
        """`completions` maps an argument to its values (a list, or a function: see _completions); `scopes`, the
        OAuth scopes a prompts/get needs beyond the server's (mcpserver._scopes)."""
        self.name = name or str(getattr(renderer, "__name__", ""))
        self.scopes: frozenset[str] = frozenset()
        if scopes is not None:
            from ._scopes import scope_set  # only a server with scoped entries loads it

            self.scopes = scope_set(scopes, f"prompt {self.name!r}")
        summary, param_docs = parse_docstring(docstring(renderer))
        self.description = description or summary
        self.context_parameter = context_parameter(renderer, f"prompt {self.name!r}")
        arguments = []
        for parameter in parameters(renderer):
            if parameter.name == self.context_parameter:
                continue
            if parameter.kind in (VAR_POSITIONAL, VAR_KEYWORD):
                raise ConfigError(f"prompt {self.name!r}: name every argument (no *args or **kwargs)")
            argument: dict[str, Any] = {"name": parameter.name}
            if parameter.name in param_docs:
                argument["description"] = param_docs[parameter.name]
            argument["required"] = parameter.default is EMPTY
            arguments.append(argument)
        self.arguments = tuple(arguments)
        self.completions = check_completions(completions, {a["name"] for a in arguments}, f"prompt {self.name!r}")
        self.renderer = renderer
        self.definition: dict[str, Any] = {"name": self.name}
        for key, value in (("title", title), ("description", self.description), ("arguments", arguments or None)):
            if value is not None:
                self.definition[key] = value

    def get(self, arguments: Any, context: Optional[Context] = None) -> dict[str, Any]:
        """The GetPromptResult (without resultType) for `arguments`, checked first. A prompt that takes
        a Context may ask the client for input (InputRequired passes through)."""
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict) or not all(isinstance(v, str) for v in arguments.values()):
            raise InvalidParams("Invalid params: prompt arguments must be an object of strings")
        known = {a["name"] for a in self.arguments}
        for argument in arguments:
            if argument not in known:
                raise InvalidParams(f"Unknown argument {argument!r} for prompt {self.name}")
        for argument in self.arguments:
            if argument["required"] and argument["name"] not in arguments:
                raise InvalidParams(f"Missing required argument {argument['name']!r} for prompt {self.name}")
        if self.context_parameter is not None:
            arguments = {**arguments, self.context_parameter: context if context is not None else Context()}
        result: dict[str, Any] = {"messages": self._messages(self.renderer(**arguments))}
        if self.description:
            result["description"] = self.description
        return result

    def _messages(self, rendered: Any) -> list[dict[str, Any]]:
        if isinstance(rendered, str):
            rendered = [{"role": "user", "content": rendered}]
        messages = []
        for message in rendered:
            if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
                raise TypeError(f"prompt {self.name} returned a message that is not "
                                "{'role': 'user'|'assistant', 'content': ...}")
            content = message.get("content")
            if isinstance(content, str):
                content = {"type": "text", "text": content}
            messages.append({"role": message["role"], "content": content})
        return messages
