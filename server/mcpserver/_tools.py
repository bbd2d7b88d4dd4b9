"""Tools: a definition and its implementation registered together, so they cannot drift.

A `Tool` validates the arguments against its inputSchema, runs its handler, and turns whatever the
handler returns into a CallToolResult. Every failure of the tool itself (invalid arguments, an
exception, a reported failure) becomes a result with isError, written for the model to act on;
the traceback goes to the log only (WIRE.md §9.4).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from . import _json
from ._schema import schema_from_function
from ._signature import EMPTY, VAR_KEYWORD, VAR_POSITIONAL, docstring, is_coroutine_function, parameters
from ._validate import check_schema, quick_validator, validate
from .content import ContentBlock
from .errors import ConfigError

__all__ = ["Tool", "ToolError", "ToolResult", "function_tool"]

log = logging.getLogger("mcpserver.tools")

# The one table of a tool's own fields: Python keyword -> key in a JSON manifest (None: Python only).
# function_tool and command_tool take these keywords; the manifest loader maps its keys through it.
TOOL_OPTIONS: dict[str, Optional[str]] = {
    "title": "title",
    "description": "description",
    "input_schema": "inputSchema",
    "output_schema": "outputSchema",
    "annotations": "annotations",
    "icons": "icons",
    "meta": "_meta",
    "requires_client_capabilities": None,
}

TOOL_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,128}")
_HEADER_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_ANNOTATION_HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")


class ToolError(Exception):
    """Raise from a tool to report a failure to the model: the message becomes an isError result."""


@dataclass
class ToolResult:
    """Full control over a tool's result: content blocks, structured value, error flag."""

    content: list[dict[str, Any]] = field(default_factory=list)
    structured: Any = None
    is_error: bool = False


def error_result(message: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": message}], "isError": True}


@dataclass(frozen=True)
class HeaderParam:
    """An argument the client mirrors into `Mcp-Param-{name}` (the x-mcp-header annotation)."""

    name: str
    path: tuple[str, ...]


@dataclass(frozen=True)
class Tool:
    name: str
    input_schema: dict[str, Any]
    handler: Callable[[dict[str, Any]], Any]
    title: Optional[str] = None
    description: Optional[str] = None
    output_schema: Optional[dict[str, Any]] = None
    annotations: Optional[dict[str, Any]] = None
    icons: Optional[list[dict[str, Any]]] = None
    meta: Optional[dict[str, Any]] = None
    # Client capabilities the tool cannot work without (e.g. {"sampling": {}}); a client that did
    # not declare them gets -32021 instead of a call (WIRE.md §3.1).
    requires_client_capabilities: Optional[dict[str, Any]] = None
    definition: dict[str, Any] = field(init=False, repr=False, compare=False)
    header_params: tuple[HeaderParam, ...] = field(init=False, repr=False, compare=False)
    # Fast yes-checks for the common flat schemas (None: always use the full validator); see quick_validator.
    _quick_input: Optional[Callable[[Any], bool]] = field(init=False, repr=False, compare=False)
    _quick_output: Optional[Callable[[Any], bool]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        where = f"tool {self.name!r}"
        if not isinstance(self.name, str) or not TOOL_NAME.fullmatch(self.name):
            raise ConfigError(f"invalid tool name {self.name!r}: use 1 to 128 of A-Z a-z 0-9 _ - .")
        check_schema(self.input_schema, f"{where} inputSchema", root_object=True)
        if self.output_schema is not None:
            check_schema(self.output_schema, f"{where} outputSchema")
        _check_annotations(self.annotations, where)
        _check_icons(self.icons, where)
        needed = self.requires_client_capabilities
        if needed is not None and not (isinstance(needed, dict) and all(isinstance(v, dict) for v in needed.values())):
            raise ConfigError(f"{where}: requires_client_capabilities must map capability names to objects, "
                              "e.g. {\"sampling\": {}}")
        definition: dict[str, Any] = {"name": self.name}
        for key, value in (("title", self.title), ("description", self.description),
                           ("inputSchema", self.input_schema), ("outputSchema", self.output_schema),
                           ("annotations", self.annotations), ("icons", self.icons), ("_meta", self.meta)):
            if value is not None:
                definition[key] = value
        try:
            _json.dumps(definition)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{where}: its definition is not JSON: {exc}") from None
        object.__setattr__(self, "definition", definition)
        object.__setattr__(self, "header_params", _header_params(self.input_schema, where))
        object.__setattr__(self, "_quick_input", quick_validator(self.input_schema))
        object.__setattr__(self, "_quick_output", quick_validator(self.output_schema))

    def call(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Run the tool; the CallToolResult without resultType and _meta."""
        quick = self._quick_input
        if quick is None or not quick(arguments):
            errors = validate(arguments, self.input_schema)
            if errors:
                return error_result(f"Invalid arguments for tool {self.name}: " + "; ".join(errors))
        try:
            value = self.handler(arguments)
        except ToolError as exc:
            return error_result(str(exc) or f"Tool {self.name} failed")
        except BaseException as exc:
            # KeyboardInterrupt, CancelledError, SystemExit... raised by tool code are the tool's failure:
            # the server's own signals never reach a tool as exceptions.
            log.error("tool %s raised", self.name, exc_info=True)
            return error_result(f"Tool {self.name} failed: {type(exc).__name__}: {exc}")
        return self._result(value)

    def _result(self, value: Any) -> dict[str, Any]:
        structured: Any = None
        if isinstance(value, ToolResult):
            if value.is_error:
                return {"content": list(value.content), "isError": True}
            content, structured = list(value.content), value.structured
            if not content and structured is not None:  # clients that read only content still see it
                content = [{"type": "text", "text": _json.dumps(structured)}]
        elif isinstance(value, str):
            content = [{"type": "text", "text": value}]
        elif isinstance(value, ContentBlock):
            content = [value]
        elif isinstance(value, (list, tuple)) and value and all(isinstance(v, ContentBlock) for v in value):
            content = list(value)
        elif value is None:
            content = []
        else:
            try:
                content = [{"type": "text", "text": _json.dumps(value)}]
            except (TypeError, ValueError) as exc:
                log.error("tool %s returned a value that is not JSON: %s", self.name, exc)
                return error_result(f"Tool {self.name} returned a value that cannot be sent as JSON: {exc}")
            structured = value

        if self.output_schema is not None:
            if structured is None:
                return error_result(f"Tool {self.name} declares an outputSchema but returned no structured value")
            quick = self._quick_output
            problems = [] if quick is not None and quick(structured) else validate(structured, self.output_schema,
                                                                                  path="result")
            if problems:
                log.error("tool %s broke its outputSchema: %s", self.name, "; ".join(problems))
                return error_result(f"Tool {self.name} returned a result that does not match its outputSchema: "
                                    + "; ".join(problems))
        result: dict[str, Any] = {"content": content}
        if structured is not None:
            result["structuredContent"] = structured
        return result


def _check_annotations(annotations: Optional[dict[str, Any]], where: str) -> None:
    if annotations is None:
        return
    if not isinstance(annotations, dict):
        raise ConfigError(f"{where}: annotations must be an object")
    for hint in _ANNOTATION_HINTS:
        if hint in annotations and not isinstance(annotations[hint], bool):
            raise ConfigError(f"{where}: annotations.{hint} must be true or false")
    if "title" in annotations and not isinstance(annotations["title"], str):
        raise ConfigError(f"{where}: annotations.title must be a string")


def _check_icons(icons: Optional[list[dict[str, Any]]], where: str) -> None:
    if icons is None:
        return
    if not isinstance(icons, list) or not all(isinstance(i, dict) and isinstance(i.get("src"), str) for i in icons):
        raise ConfigError(f"{where}: icons must be a list of objects, each with a string \"src\"")


def _header_params(schema: dict[str, Any], where: str) -> tuple[HeaderParam, ...]:
    """Collect and check x-mcp-header annotations (WIRE.md §9.2): clients drop tools that break them."""
    found: list[HeaderParam] = []

    def walk(node: dict[str, Any], path: tuple[str, ...]) -> None:
        for name, sub in (node.get("properties") or {}).items():
            if not isinstance(sub, dict):
                continue
            if "x-mcp-header" in sub:
                header = sub["x-mcp-header"]
                if not isinstance(header, str) or not _HEADER_TOKEN.fullmatch(header):
                    raise ConfigError(f"{where}: x-mcp-header {header!r} must be a non-empty HTTP token")
                if sub.get("type") not in ("string", "integer", "boolean"):
                    raise ConfigError(f"{where}: x-mcp-header {header!r} may only annotate a string, integer "
                                      "or boolean property")
                if any(p.name.lower() == header.lower() for p in found):
                    raise ConfigError(f"{where}: x-mcp-header {header!r} is used twice")
                found.append(HeaderParam(header, (*path, name)))
            walk(sub, (*path, name))

    walk(schema, ())
    return tuple(found)


def function_tool(fn: Callable[..., Any], *, name: Optional[str] = None, title: Optional[str] = None,
                  description: Optional[str] = None, input_schema: Optional[dict[str, Any]] = None,
                  output_schema: Optional[dict[str, Any]] = None, annotations: Optional[dict[str, Any]] = None,
                  icons: Optional[list[dict[str, Any]]] = None, meta: Optional[dict[str, Any]] = None,
                  requires_client_capabilities: Optional[dict[str, Any]] = None) -> Tool:
    """A Tool from a Python function; the schema comes from its signature unless given."""
    tool_name = name or str(getattr(fn, "__name__", ""))
    where = f"tool {tool_name!r}"
    run = _runner(fn)
    handler: Callable[[dict[str, Any]], Any]
    if input_schema is None:
        derived = schema_from_function(fn, where)
        input_schema = derived.input_schema
        description = description or derived.description
        converters = derived.converters

        def handler(arguments: dict[str, Any]) -> Any:
            return run({k: converters[k](v) if k in converters else v for k, v in arguments.items()})
    else:
        _check_signature_accepts(fn, input_schema, where)
        description = description or docstring(fn) or None
        handler = run
    return Tool(name=tool_name, input_schema=input_schema, handler=handler, title=title, description=description,
                output_schema=output_schema, annotations=annotations, icons=icons, meta=meta,
                requires_client_capabilities=requires_client_capabilities)


def _runner(fn: Callable[..., Any]) -> Callable[[dict[str, Any]], Any]:
    if is_coroutine_function(fn):
        import asyncio  # only for async tools; each call gets its own event loop

        return lambda arguments: asyncio.run(fn(**arguments))
    return lambda arguments: fn(**arguments)


def _check_signature_accepts(fn: Callable[..., Any], schema: dict[str, Any], where: str) -> None:
    """An explicit schema must fit the function: every property a parameter, every needed one required."""
    params = parameters(fn)
    if any(p.kind == VAR_KEYWORD for p in params):
        return
    properties = set(schema.get("properties") or {})
    unknown = sorted(properties - {p.name for p in params})
    if unknown:
        raise ConfigError(f"{where}: inputSchema property {unknown[0]!r} is not a parameter of {fn.__name__}()")
    required = set(schema.get("required") or ())
    for param in params:
        if param.default is EMPTY and param.kind != VAR_POSITIONAL and param.name not in required:
            raise ConfigError(f"{where}: parameter {param.name!r} has no default, so the inputSchema must list "
                              "it in \"required\"")
