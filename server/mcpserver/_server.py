"""The server: a registry of tools, resources and prompts, the single source of truth.

What a client is told exists and what runs are registered together, and everything that could
disagree is checked when it is registered: a bad name, schema or command raises ConfigError at
start-up, never at call time.
"""

from __future__ import annotations

import base64
import inspect
import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, TypeVar, Union

from . import _json
from ._schema import parse_docstring
from ._tools import Tool, function_tool
from ._version import __version__
from .errors import ConfigError

__all__ = ["Prompt", "Resource", "ResourceNotFound", "ResourceTemplate", "Server"]

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_TTL_MS = 300_000  # list results are static for a process's life; a restart may change them
DEFAULT_PAGE_SIZE = 100

ResourceContent = Union[str, bytes, list[dict[str, Any]], None]


class ResourceNotFound(LookupError):
    """Raise from a resource reader when the URI names nothing (answered -32602)."""


@dataclass(frozen=True)
class Resource:
    uri: str
    name: str
    reader: Callable[[], ResourceContent]
    title: Optional[str] = None
    description: Optional[str] = None
    mime_type: Optional[str] = None
    annotations: Optional[dict[str, Any]] = None
    definition: dict[str, Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "definition", _definition(
            uri=self.uri, name=self.name, title=self.title, description=self.description,
            mimeType=self.mime_type, annotations=self.annotations))


_TEMPLATE_VARIABLE = re.compile(r"\{([+#]?)([A-Za-z0-9_]+)\}")


@dataclass(frozen=True)
class ResourceTemplate:
    """An RFC 6570 template (level 1 `{var}` and level 2 `{+var}`) and the reader it routes to."""

    uri_template: str
    name: str
    reader: Callable[..., ResourceContent]
    title: Optional[str] = None
    description: Optional[str] = None
    mime_type: Optional[str] = None
    definition: dict[str, Any] = field(init=False, repr=False, compare=False)
    pattern: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        parts, position = [], 0
        for match in _TEMPLATE_VARIABLE.finditer(self.uri_template):
            parts.append(re.escape(self.uri_template[position:match.start()]))
            operator, variable = match.groups()
            parts.append(f"(?P<{variable}>{'.+' if operator else '[^/?#]+'})")
            position = match.end()
        parts.append(re.escape(self.uri_template[position:]))
        object.__setattr__(self, "pattern", re.compile("".join(parts)))
        object.__setattr__(self, "definition", _definition(
            uriTemplate=self.uri_template, name=self.name, title=self.title, description=self.description,
            mimeType=self.mime_type))


@dataclass(frozen=True)
class Prompt:
    name: str
    renderer: Callable[..., Any]
    arguments: tuple[dict[str, Any], ...]
    title: Optional[str] = None
    description: Optional[str] = None
    definition: dict[str, Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "definition", _definition(
            name=self.name, title=self.title, description=self.description,
            arguments=list(self.arguments) or None))


def _definition(**fields: Any) -> dict[str, Any]:
    return {key: value for key, value in fields.items() if value is not None}


class Server:
    """An MCP server's contents and identity. Transports serve it; `protocol.handle` answers for it.

    >>> server = Server("demo", "1.0.0")
    >>> @server.tool()
    ... def echo(text: str) -> str:
    ...     '''Return the text unchanged.'''
    ...     return text
    """

    def __init__(self, name: str, version: str = "0.0.0", *, title: Optional[str] = None,
                 instructions: Optional[str] = None, ttl_ms: int = DEFAULT_TTL_MS, cache_scope: str = "public",
                 page_size: int = DEFAULT_PAGE_SIZE, server_info_in_results: bool = True):
        if not isinstance(name, str) or not name:
            raise ConfigError("a server needs a non-empty name")
        if not isinstance(ttl_ms, int) or isinstance(ttl_ms, bool) or ttl_ms < 0:
            raise ConfigError(f"ttl_ms must be an integer >= 0, not {ttl_ms!r}")
        if cache_scope not in ("public", "private"):
            raise ConfigError(f"cache_scope must be \"public\" or \"private\", not {cache_scope!r}")
        if not isinstance(page_size, int) or page_size < 1:
            raise ConfigError(f"page_size must be a positive integer, not {page_size!r}")
        self.name = name
        self.version = version
        self.title = title
        self.instructions = instructions
        self.ttl_ms = ttl_ms
        self.cache_scope = cache_scope
        self.page_size = page_size
        self.server_info_in_results = server_info_in_results
        self.tools: dict[str, Tool] = {}
        self.resources: dict[str, Resource] = {}
        self.resource_templates: list[ResourceTemplate] = []
        self.prompts: dict[str, Prompt] = {}

    def __repr__(self) -> str:
        return f"Server({self.name!r}, {self.version!r}, tools={list(self.tools)})"

    @property
    def info(self) -> dict[str, Any]:
        """The Implementation object clients see as serverInfo."""
        return _definition(name=self.name, version=self.version, title=self.title)

    def capabilities(self) -> dict[str, Any]:
        capabilities: dict[str, Any] = {}
        if self.tools:
            capabilities["tools"] = {}
        if self.resources or self.resource_templates:
            capabilities["resources"] = {}
        if self.prompts:
            capabilities["prompts"] = {}
        return capabilities

    # -- tools ----------------------------------------------------------------------------------

    def add_tool(self, tool: Tool) -> Tool:
        if tool.name in self.tools:
            raise ConfigError(f"duplicate tool name {tool.name!r}")
        self.tools[tool.name] = tool
        return tool

    def tool(self, fn: Optional[F] = None, *, name: Optional[str] = None, title: Optional[str] = None,
             description: Optional[str] = None, input_schema: Optional[dict[str, Any]] = None,
             output_schema: Optional[dict[str, Any]] = None, annotations: Optional[dict[str, Any]] = None,
             icons: Optional[list[dict[str, Any]]] = None, meta: Optional[dict[str, Any]] = None,
             requires_client_capabilities: Optional[dict[str, Any]] = None) -> Any:
        """Register a function as a tool: `@server.tool` or `@server.tool(name=..., ...)`.

        Its inputSchema comes from the signature (str, int, float, bool, list, dict, Optional,
        Literal, Enum, defaults) unless `input_schema` is given; its description from the docstring.
        A client that lacks a capability in `requires_client_capabilities` gets -32021, not a call.
        """

        def register(function: F) -> F:
            self.add_tool(function_tool(function, name=name, title=title, description=description,
                                        input_schema=input_schema, output_schema=output_schema,
                                        annotations=annotations, icons=icons, meta=meta,
                                        requires_client_capabilities=requires_client_capabilities))
            return function

        return register(fn) if fn is not None else register

    def command(self, name: str, command: Union[list[Any], str], *, input_schema: Optional[dict[str, Any]] = None,
                description: Optional[str] = None, title: Optional[str] = None,
                output_schema: Optional[dict[str, Any]] = None, annotations: Optional[dict[str, Any]] = None,
                stdin: Union[str, dict[str, str]] = "json", timeout: Optional[float] = None,
                max_output_bytes: Optional[int] = None, cwd: Optional[str] = None,
                env: Optional[dict[str, str]] = None, shell: bool = False, output: str = "text",
                base_dir: Optional[str] = None) -> Tool:
        """Register a program as a tool. Its arguments arrive as JSON on stdin; stdout is the result.

        `timeout` (seconds, default 30) kills the program's process group; `max_output_bytes`
        (default 16 MiB) caps stdout. See mcpserver._command for the rules on argv placeholders.
        """
        from ._command import command_tool  # subprocess and selectors load only for servers that run programs

        return self.add_tool(command_tool(
            name, command, input_schema=input_schema, description=description, title=title,
            output_schema=output_schema, annotations=annotations, stdin=stdin, timeout=timeout,
            max_output_bytes=max_output_bytes, cwd=cwd, env=env, shell=shell, output=output, base_dir=base_dir))

    # -- resources ------------------------------------------------------------------------------

    def resource(self, uri: str, *, name: Optional[str] = None, title: Optional[str] = None,
                 description: Optional[str] = None, mime_type: Optional[str] = None,
                 annotations: Optional[dict[str, Any]] = None) -> Callable[[F], F]:
        """Register a reader for one URI. It returns str (text), bytes (blob) or raises ResourceNotFound."""

        def register(function: F) -> F:
            if uri in self.resources:
                raise ConfigError(f"duplicate resource URI {uri!r}")
            if not isinstance(uri, str) or ":" not in uri:
                raise ConfigError(f"resource URI {uri!r} needs a scheme (e.g. file:///..., docs://...)")
            doc, _ = parse_docstring(inspect.getdoc(function))
            self.resources[uri] = Resource(uri, name or function.__name__, function, title, description or doc,
                                           mime_type, annotations)
            return function

        return register

    def resource_template(self, uri_template: str, *, name: Optional[str] = None, title: Optional[str] = None,
                          description: Optional[str] = None, mime_type: Optional[str] = None) -> Callable[[F], F]:
        """Register a reader for every URI matching an RFC 6570 template; variables become arguments."""

        def register(function: F) -> F:
            variables = [m.group(2) for m in _TEMPLATE_VARIABLE.finditer(uri_template)]
            parameters = inspect.signature(function).parameters
            missing = [v for v in variables if v not in parameters]
            if not variables or missing:
                raise ConfigError(f"resource template {uri_template!r}: every {{variable}} must be a parameter of "
                                  f"{function.__name__}() (missing: {', '.join(missing) or 'no variables'})")
            doc, _ = parse_docstring(inspect.getdoc(function))
            self.resource_templates.append(ResourceTemplate(uri_template, name or function.__name__, function,
                                                            title, description or doc, mime_type))
            return function

        return register

    def read_resource(self, uri: str) -> list[dict[str, Any]]:
        """Contents for `uri`; ResourceNotFound when nothing serves it."""
        resource = self.resources.get(uri)
        if resource is not None:
            return _contents(uri, resource.reader(), resource.mime_type)
        for template in self.resource_templates:
            match = template.pattern.fullmatch(uri)
            if match:
                return _contents(uri, template.reader(**match.groupdict()), template.mime_type)
        raise ResourceNotFound(uri)

    # -- prompts --------------------------------------------------------------------------------

    def prompt(self, fn: Optional[F] = None, *, name: Optional[str] = None, title: Optional[str] = None,
               description: Optional[str] = None) -> Any:
        """Register a prompt. Its parameters are its (string) arguments; it returns a str or messages."""

        def register(function: F) -> F:
            prompt_name = name or function.__name__
            if prompt_name in self.prompts:
                raise ConfigError(f"duplicate prompt name {prompt_name!r}")
            doc, param_docs = parse_docstring(inspect.getdoc(function))
            arguments = []
            for parameter in inspect.signature(function).parameters.values():
                if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
                    raise ConfigError(f"prompt {prompt_name!r}: name every argument (no *args or **kwargs)")
                argument: dict[str, Any] = {"name": parameter.name}
                if parameter.name in param_docs:
                    argument["description"] = param_docs[parameter.name]
                argument["required"] = parameter.default is parameter.empty
                arguments.append(argument)
            self.prompts[prompt_name] = Prompt(prompt_name, function, tuple(arguments), title, description or doc)
            return function

        return register(fn) if fn is not None else register

    # -- running --------------------------------------------------------------------------------

    def run(self, transport: str = "stdio", **options: Any) -> int:
        """Serve until EOF or a signal: `transport` is "stdio" or "http" (options go to http.serve)."""
        if transport == "stdio":
            from .stdio import serve_stdio

            return serve_stdio(self)
        if transport == "http":
            from .http import serve

            return serve(self, **options)
        raise ValueError(f"unknown transport {transport!r}; use \"stdio\" or \"http\"")

    # -- manifests ------------------------------------------------------------------------------

    @classmethod
    def from_manifest(cls, path: str) -> Server:
        """A server of command tools described by a JSON manifest (see docs/manifest.md)."""
        try:
            with open(path, encoding="utf-8") as file:
                manifest = _json.loads(file.read())
        except OSError as exc:
            raise ConfigError(f"cannot read manifest {path}: {exc.strerror}") from None
        except ValueError as exc:
            raise ConfigError(f"manifest {path} is not valid JSON: {exc}") from None
        where = f"manifest {path}"
        _only_keys(manifest, _MANIFEST_KEYS, where)
        if not isinstance(manifest.get("tools"), list):
            raise ConfigError(f"{where}: \"tools\" must be an array of command tools")
        server = cls(manifest.get("name") or os.path.splitext(os.path.basename(path))[0],
                     str(manifest.get("version", __version__)), title=manifest.get("title"),
                     instructions=manifest.get("instructions"),
                     ttl_ms=manifest.get("ttlMs", DEFAULT_TTL_MS), cache_scope=manifest.get("cacheScope", "public"))
        base_dir = os.path.dirname(os.path.abspath(path))
        for index, entry in enumerate(manifest["tools"]):
            _only_keys(entry, _TOOL_KEYS, f"{where}, tools[{index}]")
            if "name" not in entry or "command" not in entry:
                raise ConfigError(f"{where}, tools[{index}]: every tool needs \"name\" and \"command\"")
            cwd = entry.get("cwd")
            server.command(
                entry["name"], entry["command"], input_schema=entry.get("inputSchema"),
                description=entry.get("description"), title=entry.get("title"),
                output_schema=entry.get("outputSchema"), annotations=entry.get("annotations"),
                stdin=entry.get("stdin", "json"), timeout=entry.get("timeout"),
                max_output_bytes=entry.get("maxOutputBytes"),
                cwd=os.path.join(base_dir, cwd) if isinstance(cwd, str) else None, env=entry.get("env"),
                shell=entry.get("shell", False), output=entry.get("output", "text"), base_dir=base_dir)
        return server


_MANIFEST_KEYS = {"$schema", "name", "version", "title", "instructions", "ttlMs", "cacheScope", "tools"}
_TOOL_KEYS = {"name", "title", "description", "command", "inputSchema", "outputSchema", "annotations", "stdin",
              "timeout", "maxOutputBytes", "cwd", "env", "shell", "output"}


def _only_keys(entry: Any, allowed: set[str], where: str) -> None:
    if not isinstance(entry, dict):
        raise ConfigError(f"{where} must be a JSON object")
    unknown = sorted(set(entry) - allowed)
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(sorted(allowed))})")


def _contents(uri: str, value: ResourceContent, mime_type: Optional[str]) -> list[dict[str, Any]]:
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
        item["blob"] = base64.b64encode(value).decode("ascii")
    else:
        raise TypeError(f"a resource reader returned {type(value).__name__}; return str, bytes or a contents list")
    return [item]
