"""Tools: a definition and its implementation registered together, so they cannot drift.

A `Tool` validates the arguments against its inputSchema, runs its handler, and turns whatever the
handler returns into a CallToolResult. Every failure of the tool itself (invalid arguments, an
exception, a reported failure) becomes a result with isError, written for the model to act on;
the traceback goes to the log only (WIRE.md §9.4). An operator who would rather the client never see
an exception's message or a program's stderr (paths, credentials inside messages) sets
MCPSERVER_GENERIC_ERRORS=1: the client is then told only that the tool failed, with an id that the
log line holding the detail also carries.
"""

from __future__ import annotations

import os
import re
import sys

from . import _environment, _json, _log
from ._context import Cancelled, ClientRefused, Context, InputRequired
from ._wire import HEADER_TOKEN
from .errors import ConfigError, ProtocolError
from .schema._derive import context_parameter as context_parameter_of
from .schema._derive import schema_from_function
from .schema._signature import EMPTY, VAR_KEYWORD, VAR_POSITIONAL, docstring, is_coroutine_function, parameters
from .schema._validate import check_schema, quick_validator, validate

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Iterable, Optional, Union
    Handler = Callable[[dict[str, Any], Optional[Context]], Any]

__all__ = ["MAX_HEARTBEAT", "MIN_HEARTBEAT", "Tool", "ToolError", "ToolResult", "check_heartbeat", "function_tool",
           "unexpected_failure"]

log = _log.get("mcpserver.tools")

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
    "task": "task",  # in a manifest too: "never", "optional" or "required" (mcpserver.tasks)
    "heartbeat": "heartbeat",  # seconds between progress beats while the tool is silent (mcpserver._heartbeat)
    "scopes": "scopes",  # the OAuth scopes a call needs beyond the server's (mcpserver._scopes)
}
TASK_MODES = ("never", "optional", "required")
# A heartbeat more often than this floods the client rather than reassuring it; one rarer than an hour is longer
# than any client waits (the SDKs time out after about 60 s). Past either bound, ConfigError.
MIN_HEARTBEAT = 0.05
MAX_HEARTBEAT = 3600.0

TOOL_NAME_CHARACTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
_ANNOTATION_HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
_CONTENT_MODULE = __name__.rpartition(".")[0] + ".content"  # mcpserver.content, wherever the package is copied


def _is_content(value: Any) -> bool:
    """A ContentBlock (mcpserver.content). None exists before that module is imported, so a server whose tools
    return none starts without importing it (0.44M instructions of the demo's stdio start)."""
    module = sys.modules.get(_CONTENT_MODULE)
    return module is not None and isinstance(value, module.ContentBlock)


class ToolError(Exception):
    """Raise from a tool to report a failure to the model: the message becomes an isError result."""


class ToolResult:
    """Full control over a tool's result: content blocks, structured value, error flag."""

    __slots__ = ("content", "is_error", "structured")

    def __init__(self, content: Optional[list[dict[str, Any]]] = None, structured: Any = None,
                 is_error: bool = False):
        self.content = list(content or [])
        self.structured = structured
        self.is_error = is_error

    def __repr__(self) -> str:
        return f"ToolResult(content={self.content!r}, structured={self.structured!r}, is_error={self.is_error!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ToolResult) and (self.content, self.structured, self.is_error) == (
            other.content, other.structured, other.is_error)


def error_result(message: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": message}], "isError": True}


def unexpected_failure(tool: str, detail: str, *, traceback: bool = False) -> str:
    """What the client is told of a failure nobody worded for it (an exception, a program's stderr):
    `detail`, or under MCPSERVER_GENERIC_ERRORS=1 only an id, which the log line with the detail shares."""
    if os.environ.get(_environment.GENERIC_ERRORS, "") in ("", "0"):
        if traceback:
            log.error("tool %s raised", tool, exc_info=True)
        return detail
    incident = os.urandom(4).hex()
    log.error("tool %s failed (error %s): %s", tool, incident, detail, exc_info=traceback)
    return f"Tool {tool} failed (error {incident}; the details are in the server's log)"


class HeaderParam:
    """An argument the client mirrors into `Mcp-Param-{name}` (the x-mcp-header annotation)."""

    __slots__ = ("name", "path")

    def __init__(self, name: str, path: tuple[str, ...]):
        self.name = name
        self.path = path


# handler(arguments, context): context is None unless the tool takes one (takes_context).


class Tool:
    """A tool's definition and its handler, checked together when the tool is made."""

    __slots__ = ("_quick_input", "_quick_output", "annotations", "definition", "description", "handler",
                 "header_params", "heartbeat", "icons", "input_schema", "meta", "name", "output_schema",
                 "requires_client_capabilities", "scopes", "takes_context", "task", "title")

    def __init__(self, name: str, input_schema: dict[str, Any], handler: Handler, *, title: Optional[str] = None,
                 description: Optional[str] = None, output_schema: Optional[dict[str, Any]] = None,
                 annotations: Optional[dict[str, Any]] = None, icons: Optional[list[dict[str, Any]]] = None,
                 meta: Optional[dict[str, Any]] = None,
                 requires_client_capabilities: Optional[dict[str, Any]] = None, takes_context: bool = False,
                 task: str = "never", heartbeat: Union[float, bool, None] = None,
                 scopes: Union[str, Iterable[str], None] = None):
        where = f"tool {name!r}"
        if task not in TASK_MODES:
            raise ConfigError(f"{where}: task must be one of {', '.join(TASK_MODES)}, not {task!r}")
        self.heartbeat = check_heartbeat(heartbeat, where)  # None: the server's; False: none
        self.scopes: frozenset[str] = frozenset() if scopes is None else _scope_set(scopes, where)
        if not isinstance(name, str) or not 0 < len(name) <= 128 or not TOOL_NAME_CHARACTERS.issuperset(name):
            raise ConfigError(f"invalid tool name {name!r}: use 1 to 128 of A-Z a-z 0-9 _ - .")
        check_schema(input_schema, f"{where} inputSchema", root_object=True)
        if output_schema is not None:
            check_schema(output_schema, f"{where} outputSchema")
        _check_annotations(annotations, where)
        _check_icons(icons, where)
        _check_capabilities(requires_client_capabilities, where)
        self.name = name
        self.input_schema = input_schema
        self.handler = handler
        self.title = title
        self.description = description
        self.output_schema = output_schema
        self.annotations = annotations
        self.icons = icons
        self.meta = meta
        # Client capabilities the tool cannot work without (e.g. {"sampling": {}}); a client that did
        # not declare them gets -32021 instead of a call (WIRE.md §3.1).
        self.requires_client_capabilities = requires_client_capabilities
        self.takes_context = takes_context
        self.task = task  # how it runs under the Tasks extension; not on the wire (2026-07-28 Tool has no field)
        definition: dict[str, Any] = {"name": name}
        for key, value in (("title", title), ("description", description), ("inputSchema", input_schema),
                           ("outputSchema", output_schema), ("annotations", annotations), ("icons", icons),
                           ("_meta", meta)):
            if value is not None:
                definition[key] = value
        try:
            _json.dumps(definition)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{where}: its definition is not JSON: {exc}") from None
        self.definition = definition
        self.header_params = _header_params(input_schema, where)
        # Fast yes-checks for the common flat schemas (None: always use the full validator); see quick_validator.
        self._quick_input = quick_validator(input_schema)
        self._quick_output = quick_validator(output_schema)

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"

    def call(self, arguments: dict[str, Any], context: Optional[Context] = None) -> dict[str, Any]:
        """Run the tool; the CallToolResult without resultType and _meta. Cancelled passes through."""
        quick = self._quick_input
        if quick is None or not quick(arguments):
            errors = validate(arguments, self.input_schema)
            if errors:
                return error_result(f"Invalid arguments for tool {self.name}: " + "; ".join(errors))
        try:
            value = self.handler(arguments, context)
        except BaseException as exc:
            if context is not None and context.cancelled:  # whatever cancelling looked like from inside the tool
                raise exc if isinstance(exc, Cancelled) else Cancelled(str(exc)) from exc
            if isinstance(exc, (InputRequired, ProtocolError)):  # the context's: ask the client, or refuse
                raise
            if isinstance(exc, (ToolError, ClientRefused)):  # worded for the client: the client's own refusal too
                return error_result(str(exc) or f"Tool {self.name} failed")
            # KeyboardInterrupt, CancelledError, SystemExit... raised by tool code are the tool's failure:
            # the server's own signals never reach a tool as exceptions.
            return error_result(unexpected_failure(self.name, f"Tool {self.name} failed: {type(exc).__name__}: {exc}",
                                                   traceback=True))
        if value.__class__ is str and self.output_schema is None:  # the common answer: _converted's first case
            return {"content": [{"type": "text", "text": value}]}
        return self._result(value)

    def _result(self, value: Any) -> dict[str, Any]:
        try:
            return self._converted(value)
        except (TypeError, ValueError, RecursionError) as exc:  # NaN, a set, an object, nesting past the stack
            log.error("tool %s returned a value that is not JSON: %s", self.name, exc)
            return error_result(f"Tool {self.name} returned a value that cannot be sent as JSON: {exc}")

    def _converted(self, value: Any) -> dict[str, Any]:
        """The wire result for what the tool returned; TypeError, ValueError or RecursionError if JSON cannot
        carry its structured value (checked here, where it can still be the tool's isError result)."""
        structured: Any = None
        if isinstance(value, ToolResult):
            if value.is_error:
                return {"content": list(value.content), "isError": True}
            content, structured = list(value.content), value.structured
            if structured is not None:
                encoded = _json.dumps(structured)
                if not content:  # clients that read only content still see it
                    content = [{"type": "text", "text": encoded}]
        elif isinstance(value, str):
            content = [{"type": "text", "text": value}]
        elif value is None:
            content = []
        elif _is_content(value):
            content = [value]
        elif isinstance(value, (list, tuple)) and value and all(_is_content(v) for v in value):
            content = list(value)
        else:
            content = [{"type": "text", "text": _json.dumps(value)}]
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


def _scope_set(scopes: Union[str, Iterable[str]], where: str) -> frozenset[str]:
    from ._scopes import scope_set  # only a server with scoped entries loads it

    return scope_set(scopes, where)


def check_heartbeat(seconds: Any, where: str) -> Union[float, bool, None]:
    """A heartbeat as given (seconds between beats; False: none; None: the default), or ConfigError."""
    if seconds is None or seconds is False:
        return seconds
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) \
            or not MIN_HEARTBEAT <= seconds <= MAX_HEARTBEAT:  # NaN is within no bounds
        raise ConfigError(f"{where}: heartbeat must be seconds between beats, from {MIN_HEARTBEAT:g} to "
                          f"{MAX_HEARTBEAT:g}, or false for none, not {seconds!r}")
    return seconds


def _check_capabilities(needed: Optional[dict[str, Any]], where: str) -> None:
    if needed is not None and not (isinstance(needed, dict) and all(isinstance(v, dict) for v in needed.values())):
        raise ConfigError(f"{where}: requires_client_capabilities must map capability names to objects, "
                          "e.g. {\"sampling\": {}}")


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
                if not isinstance(header, str) or not re.fullmatch(HEADER_TOKEN, header):
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
                  requires_client_capabilities: Optional[dict[str, Any]] = None, task: str = "never",
                  heartbeat: Union[float, bool, None] = None, scopes: Union[str, Iterable[str], None] = None) -> Tool:
    """A Tool from a Python function; the schema comes from its signature unless given.

    A parameter annotated `Context` receives the request's context and is not part of the schema.
    `task`: "optional" or "required" runs the call as a task the client polls (mcpserver.tasks).
    """
    tool_name = name or str(getattr(fn, "__name__", ""))
    where = f"tool {tool_name!r}"
    converters: dict[str, Callable[[Any], Any]] = {}
    if input_schema is None:
        derived = schema_from_function(fn, where)
        input_schema = derived.input_schema
        description = description or derived.description
        converters = derived.converters
        context_parameter = derived.context_parameter
    else:
        context_parameter = _check_signature_accepts(fn, input_schema, where)
        description = description or docstring(fn) or None
    return Tool(tool_name, input_schema, _handler(fn, converters, context_parameter), title=title,
                description=description, output_schema=output_schema, annotations=annotations, icons=icons, meta=meta,
                requires_client_capabilities=requires_client_capabilities, takes_context=context_parameter is not None,
                task=task, heartbeat=heartbeat, scopes=scopes)


def _handler(fn: Callable[..., Any], converters: dict[str, Callable[[Any], Any]],
             context_parameter: Optional[str]) -> Handler:
    """Call `fn` with the arguments (converted where JSON loses the type) and, if it asks, the context."""
    coroutine = is_coroutine_function(fn)
    if not (converters or context_parameter is not None or coroutine):
        return lambda arguments, context: fn(**arguments)

    def handler(arguments: dict[str, Any], context: Optional[Context]) -> Any:
        if converters:
            arguments = {k: converters[k](v) if k in converters else v for k, v in arguments.items()}
        if context_parameter is not None:
            arguments = {**arguments, context_parameter: context if context is not None else Context()}
        if coroutine:
            return _run_coroutine(fn, arguments, context)
        return fn(**arguments)

    return handler


def _run_coroutine(fn: Callable[..., Any], arguments: dict[str, Any], context: Optional[Context]) -> Any:
    """Run an async tool in an event loop of its own; cancelling the request cancels its task."""
    import asyncio

    async def main() -> Any:
        task = asyncio.ensure_future(fn(**arguments))
        if context is not None:
            loop = asyncio.get_running_loop()

            def cancel() -> None:
                try:
                    loop.call_soon_threadsafe(task.cancel)
                except RuntimeError:  # the loop has already finished
                    pass

            context.on_cancel(cancel)
        return await task

    return asyncio.run(main())


def _check_signature_accepts(fn: Callable[..., Any], schema: dict[str, Any], where: str) -> Optional[str]:
    """An explicit schema must fit the function: every property a parameter, every needed one required.
    Returns the parameter annotated Context, if any."""
    params = parameters(fn)
    context_parameter = context_parameter_of(fn, where)
    params = [p for p in params if p.name != context_parameter]
    if any(p.kind == VAR_KEYWORD for p in params):
        return context_parameter
    properties = set(schema.get("properties") or {})
    unknown = sorted(properties - {p.name for p in params})
    if unknown:
        raise ConfigError(f"{where}: inputSchema property {unknown[0]!r} is not a parameter of {fn.__name__}()")
    required = set(schema.get("required") or ())
    for param in params:
        if param.default is EMPTY and param.kind != VAR_POSITIONAL and param.name not in required:
            raise ConfigError(f"{where}: parameter {param.name!r} has no default, so the inputSchema must list "
                              "it in \"required\"")
    return context_parameter
