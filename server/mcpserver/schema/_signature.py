"""What a function takes and says about itself, read from its code object.

`inspect` would do, but importing it (with ast, dis, tokenize and enum's friends) costs a stdio
server more than the rest of its start-up, and a plain function carries everything needed:
`__code__`, `__defaults__`, `__kwdefaults__`, `__annotations__` and `__doc__`. Anything that is not
a plain function (functools.partial, a callable object, a builtin) falls back to `inspect`.
A decorated function (functools.wraps) is described by what it wraps, as `inspect.signature` does.
"""

from __future__ import annotations

import types

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Optional

__all__ = ["EMPTY", "Parameter", "cleandoc", "docstring", "is_coroutine_function", "parameters", "parse_docstring",
           "unwrap"]

POSITIONAL_ONLY, POSITIONAL_OR_KEYWORD, VAR_POSITIONAL, KEYWORD_ONLY, VAR_KEYWORD = (
    "positional-only", "positional-or-keyword", "var-positional", "keyword-only", "var-keyword")
_CO_VARARGS, _CO_VARKEYWORDS, _CO_COROUTINE = 0x04, 0x08, 0x80


class _Empty:
    def __repr__(self) -> str:
        return "EMPTY"


EMPTY: Any = _Empty()  # no default, or no annotation


class Parameter:
    """One parameter of a function, as inspect.Parameter tells it."""

    __slots__ = ("annotation", "default", "kind", "name")

    def __init__(self, name: str, kind: str, default: Any = EMPTY, annotation: Any = EMPTY):
        self.name = name
        self.kind = kind
        self.default = default
        self.annotation = annotation  # as written: an object, or a string under `from __future__ import annotations`


def unwrap(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Follow functools.wraps' __wrapped__ chain to the function that says what is accepted."""
    seen = {id(fn)}
    while hasattr(fn, "__wrapped__") and not isinstance(fn, types.MethodType):
        fn = fn.__wrapped__
        if id(fn) in seen:
            break
        seen.add(id(fn))
    return fn


def _plain(fn: Callable[..., Any]) -> tuple[Optional[types.FunctionType], int]:
    """The plain function behind `fn` and how many leading parameters binding removed, or (None, 0)."""
    fn = unwrap(fn)
    if isinstance(fn, types.MethodType) and isinstance(fn.__func__, types.FunctionType):
        return fn.__func__, 1
    if isinstance(fn, types.FunctionType):
        return fn, 0
    return None, 0


def parameters(fn: Callable[..., Any]) -> list[Parameter]:
    """The parameters of `fn` in order, as inspect.signature(fn) would list them."""
    function, bound = _plain(fn)
    if function is None:
        return _from_inspect(fn)
    code = function.__code__
    positional = code.co_argcount
    names = code.co_varnames
    keyword_only = code.co_kwonlyargcount
    defaults = function.__defaults__ or ()
    kwdefaults = function.__kwdefaults__ or {}
    annotations = function.__annotations__
    found = []
    first_default = positional - len(defaults)
    for index in range(positional):
        kind = POSITIONAL_ONLY if index < code.co_posonlyargcount else POSITIONAL_OR_KEYWORD
        default = defaults[index - first_default] if index >= first_default else EMPTY
        found.append(Parameter(names[index], kind, default, annotations.get(names[index], EMPTY)))
    index = positional + keyword_only  # co_varnames: positional, keyword-only, *args, **kwargs, locals
    if code.co_flags & _CO_VARARGS:
        found.append(Parameter(names[index], VAR_POSITIONAL, EMPTY, annotations.get(names[index], EMPTY)))
        index += 1
    for name in names[positional:positional + keyword_only]:
        found.append(Parameter(name, KEYWORD_ONLY, kwdefaults.get(name, EMPTY), annotations.get(name, EMPTY)))
    if code.co_flags & _CO_VARKEYWORDS:
        found.append(Parameter(names[index], VAR_KEYWORD, EMPTY, annotations.get(names[index], EMPTY)))
    return found[bound:]


def _from_inspect(fn: Callable[..., Any]) -> list[Parameter]:
    import inspect

    kinds = {inspect.Parameter.POSITIONAL_ONLY: POSITIONAL_ONLY,
             inspect.Parameter.POSITIONAL_OR_KEYWORD: POSITIONAL_OR_KEYWORD,
             inspect.Parameter.VAR_POSITIONAL: VAR_POSITIONAL, inspect.Parameter.KEYWORD_ONLY: KEYWORD_ONLY,
             inspect.Parameter.VAR_KEYWORD: VAR_KEYWORD}
    empty = inspect.Parameter.empty
    return [Parameter(p.name, kinds[p.kind], EMPTY if p.default is empty else p.default,
                      EMPTY if p.annotation is empty else p.annotation)
            for p in inspect.signature(fn).parameters.values()]


def is_coroutine_function(fn: Callable[..., Any]) -> bool:
    function, _ = _plain(fn)
    if function is not None:
        return bool(function.__code__.co_flags & _CO_COROUTINE)
    import inspect

    return inspect.iscoroutinefunction(fn)


def annotation_globals(fn: Callable[..., Any]) -> dict[str, Any]:
    """The namespace `fn`'s string annotations are evaluated in."""
    return getattr(unwrap(fn), "__globals__", {})


def docstring(fn: Callable[..., Any]) -> Optional[str]:
    """`fn`'s docstring with its indentation removed, as inspect.getdoc gives it for a function."""
    function, _ = _plain(fn)
    if function is None:
        import inspect

        return inspect.getdoc(fn)
    doc = function.__doc__
    return cleandoc(doc) if isinstance(doc, str) else None


def cleandoc(doc: str) -> str:
    """Remove the indentation docstrings carry, as inspect.cleandoc does."""
    lines = doc.expandtabs().split("\n")
    indents = [len(line) - len(line.lstrip()) for line in lines[1:] if line.lstrip()]
    margin = min(indents) if indents else 0
    lines = [lines[0].lstrip()] + [line[margin:] for line in lines[1:]]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    return "\n".join(lines)


# A docstring is read by hand, not by regular expression: compiling the two patterns it needs costs a stdio
# start-up about 1.8 million instructions (2% of its whole start), and every server reads docstrings.
_SECTIONS = frozenset({"Args", "Arguments", "Parameters", "Params", "Returns", "Return", "Raises", "Yields", "Example",
                       "Examples", "Note", "Notes"})
_ARGUMENT_SECTIONS = ("Args", "Arguments", "Parameters", "Params")


def _section(stripped: str) -> Optional[str]:
    """The section a heading line opens (`Args:`, spaces after the colon allowed), or None."""
    name = stripped[:-1]
    return name if stripped.endswith(":") and name in _SECTIONS else None


def _argument(line: str) -> Optional[tuple[str, str]]:
    """`name: text`, `*args: text` or `name (type): text` as (name with its stars, text), or None."""
    text = line.lstrip()
    start = len(text) - len(text.lstrip("*"))
    end = start
    while end < len(text) and (text[end].isalnum() or text[end] == "_"):  # the characters of re's \w
        end += 1
    if start > 2 or end == start:
        return None
    rest = text[end:].lstrip()
    if rest.startswith("("):
        close = rest.find(")")
        if close < 0:
            return None
        rest = rest[close + 1:].lstrip()
    return (text[:end], rest[1:]) if rest.startswith(":") else None


def parse_docstring(doc: Optional[str]) -> tuple[Optional[str], dict[str, str]]:
    """Split a Google-style docstring into (description, {parameter: description})."""
    if not doc:
        return None, {}
    lines = cleandoc(doc).splitlines()
    description: list[str] = []
    params: dict[str, str] = {}
    section, current = None, None
    for line in lines:
        heading = _section(line.strip())
        if heading and not line.startswith(" "):
            section, current = heading, None
            continue
        if section is None:
            description.append(line)
        elif section in _ARGUMENT_SECTIONS:
            argument = _argument(line)
            if argument and len(line) - len(line.lstrip()) <= 4:
                current = argument[0].lstrip("*")
                params[current] = argument[1].strip()
            elif current and line.strip():
                params[current] = f"{params[current]} {line.strip()}".strip()
    text = "\n".join(description).strip()
    return (text or None), params
