"""Resources: a URI (or an RFC 6570 template of URIs) and the function that reads it.

Rules of this module:
- A reader returns str (text), bytes (a base64 blob), a list of contents as they go on the wire, or
  None / raises ResourceNotFound for a URI that names nothing: that is -32602 "Resource not found",
  never empty contents (WIRE.md §11).
- Templates support level 1 `{var}` (one path segment: no / ? #) and level 2 `{+var}` (anything but a
  line break); every variable is a parameter of the reader, checked at registration.
- Matching a URI against a template takes time linear in the URI, whatever the template: a
  regular expression with two `{+var}` backtracks quadratically on a URI that does not match (three:
  cubically), and URIs come from clients. Where a URI could split several ways, each variable takes
  as much as it can from the left, as a greedy regular expression would.
"""

from __future__ import annotations

import re

from ._completions import check_completions
from ._context import Context
from .errors import ConfigError
from .schema._derive import context_parameter
from .schema._signature import docstring, parameters, parse_docstring

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Iterable, Optional, Sequence, Union

    from ._completions import Completer
    ResourceContent = Union[str, bytes, list[dict[str, Any]], None]

__all__ = ["Resource", "ResourceNotFound", "ResourceTemplate", "read"]

# A pattern's source, not a compiled pattern: re compiles it (and keeps it) at the first template, so a server
# with none does not pay for it at every start-up (about 0.5M instructions).
TEMPLATE_VARIABLE = r"\{([+#]?)([A-Za-z0-9_]+)\}"


class ResourceNotFound(LookupError):
    """Raise from a resource reader when the URI names nothing (answered -32602)."""


def _scope_set(scopes: Union[str, Iterable[str], None], where: str) -> frozenset[str]:
    if scopes is None:
        return frozenset()
    from ._scopes import scope_set  # only a server with scoped entries loads it

    return scope_set(scopes, where)


def definition(**fields: Any) -> dict[str, Any]:
    """A wire object from keyword fields, leaving out those that are None."""
    return {key: value for key, value in fields.items() if value is not None}


class Resource:
    """One URI and its reader."""

    __slots__ = ("context_parameter", "definition", "mime_type", "reader", "scopes", "uri")

    def __init__(self, uri: str, reader: Callable[[], ResourceContent], *, name: Optional[str] = None,
                 title: Optional[str] = None, description: Optional[str] = None, mime_type: Optional[str] = None,
                 annotations: Optional[dict[str, Any]] = None, meta: Optional[dict[str, Any]] = None,
                 scopes: Union[str, Iterable[str], None] = None):
        if not isinstance(uri, str) or ":" not in uri:
            raise ConfigError(f"resource URI {uri!r} needs a scheme (e.g. file:///..., docs://...)")
        self.scopes = _scope_set(scopes, f"resource {uri!r}")
        self.uri = uri
        self.reader = reader
        self.mime_type = mime_type
        self.context_parameter = context_parameter(reader, f"resource {uri!r}")
        self.definition = definition(uri=uri, name=name or getattr(reader, "__name__", uri), title=title,
                                     description=description or _summary(reader), mimeType=mime_type,
                                     annotations=annotations, _meta=meta)

    def read(self, context: Optional[Context] = None) -> list[dict[str, Any]]:
        return contents(self.uri, _call(self.reader, {}, self.context_parameter, context), self.mime_type)


class ResourceTemplate:
    """An RFC 6570 template (level 1 `{var}` and level 2 `{+var}`) and the reader it routes to."""

    __slots__ = ("completions", "context_parameter", "definition", "mime_type", "parts", "reader", "scopes",
                 "uri_template", "variables")

    def __init__(self, uri_template: str, reader: Callable[..., ResourceContent], *, name: Optional[str] = None,
                 title: Optional[str] = None, description: Optional[str] = None, mime_type: Optional[str] = None,
                 completions: Optional[dict[str, Completer]] = None, scopes: Union[str, Iterable[str], None] = None):
        self.scopes = _scope_set(scopes, f"resource template {uri_template!r}")
        self.variables = [m.group(2) for m in re.finditer(TEMPLATE_VARIABLE, uri_template)]
        accepted = {p.name for p in parameters(reader)}
        missing = [v for v in self.variables if v not in accepted]
        if not self.variables or missing:
            raise ConfigError(f"resource template {uri_template!r}: every {{variable}} must be a parameter of "
                              f"{getattr(reader, '__name__', 'the reader')}() "
                              f"(missing: {', '.join(missing) or 'no variables'})")
        parts: list[Union[str, tuple[str, str]]] = []  # literal text, or (variable, the characters it excludes)
        position = 0
        for match in re.finditer(TEMPLATE_VARIABLE, uri_template):
            if match.start() > position:
                parts.append(uri_template[position:match.start()])
            operator, variable = match.groups()
            parts.append((variable, "\n" if operator else "/?#"))
            position = match.end()
        if position < len(uri_template):
            parts.append(uri_template[position:])
        self.uri_template = uri_template
        self.parts = parts
        self.reader = reader
        self.context_parameter = context_parameter(reader, f"resource template {uri_template!r}")
        self.completions = check_completions(completions, set(self.variables), f"resource template {uri_template!r}")
        self.mime_type = mime_type
        self.definition = definition(uriTemplate=uri_template, name=name or getattr(reader, "__name__", uri_template),
                                     title=title, description=description or _summary(reader), mimeType=mime_type)

    def match(self, uri: str) -> Optional[dict[str, str]]:
        """The variables if `uri` fits the template, else None; in time linear in len(uri)."""
        # rest[j][i] = 1 when parts[j:] match uri[i:], computed from the last part back; then a walk from
        # the left gives each variable the longest value that still lets the rest match.
        size = len(uri)
        rest = [bytearray(size + 1) for _ in range(len(self.parts) + 1)]
        rest[-1][size] = 1
        for j in range(len(self.parts) - 1, -1, -1):
            part, here, after = self.parts[j], rest[j], rest[j + 1]
            if isinstance(part, str):
                start = uri.find(part)
                while start != -1:
                    here[start] = after[start + len(part)]
                    start = uri.find(part, start + 1)
                continue
            for run_start, run_end in _runs(uri, part[1]):  # a value lies inside one run of allowed characters
                last = after.rfind(1, run_start + 1, run_end + 1)
                if last != -1:
                    here[run_start:last] = b"\x01" * (last - run_start)
        if not rest[0][0]:
            return None
        values, i = {}, 0
        for j, part in enumerate(self.parts):
            if isinstance(part, str):
                i += len(part)
                continue
            end = _run_end(uri, part[1], i)
            e = rest[j + 1].rfind(1, i + 1, end + 1)
            values[part[0]], i = uri[i:e], e
        return values


def _runs(text: str, excluded: str) -> list[tuple[int, int]]:
    """The stretches of `text` between the characters in `excluded`, as (start, end)."""
    runs, start = [], 0
    for found in re.finditer(f"[{re.escape(excluded)}]", text):
        if found.start() > start:
            runs.append((start, found.start()))
        start = found.start() + 1
    if start < len(text):
        runs.append((start, len(text)))
    return runs


def _run_end(text: str, excluded: str, start: int) -> int:
    """Where the run of allowed characters that begins at `start` ends."""
    found = re.compile(f"[{re.escape(excluded)}]").search(text, start)
    return found.start() if found else len(text)


def read(resources: dict[str, Resource], templates: Sequence[ResourceTemplate], uri: str,
         context: Optional[Context] = None) -> list[dict[str, Any]]:
    """Contents for `uri`: an exact resource first, then the first template that matches. A reader that
    takes a Context may ask the client for input (InputRequired passes through)."""
    resource = resources.get(uri)
    if resource is not None:
        return resource.read(context)
    for template in templates:
        variables = template.match(uri)
        if variables is not None:
            value = _call(template.reader, variables, template.context_parameter, context)
            return contents(uri, value, template.mime_type)
    raise ResourceNotFound(uri)


def _call(reader: Callable[..., ResourceContent], arguments: dict[str, Any], context_parameter: Optional[str],
          context: Optional[Context]) -> ResourceContent:
    if context_parameter is not None:
        arguments = {**arguments, context_parameter: context if context is not None else Context()}
    return reader(**arguments)


def contents(uri: str, value: ResourceContent, mime_type: Optional[str]) -> list[dict[str, Any]]:
    if value is None:
        raise ResourceNotFound(uri)
    if isinstance(value, list):
        return value
    item: dict[str, Any] = {"uri": uri}
    if mime_type:
        item["mimeType"] = mime_type
    if isinstance(value, str):
        item["text"] = value
    elif isinstance(value, (bytes, bytearray)):
        import base64

        item["blob"] = base64.b64encode(value).decode("ascii")
    else:
        raise TypeError(f"a resource reader returned {type(value).__name__}; return str, bytes or a contents list")
    return [item]


def _summary(reader: Callable[..., Any]) -> Optional[str]:
    return parse_docstring(docstring(reader))[0]
