"""The server: a registry of tools, resources and prompts, the single source of truth.

What a client is told exists and what runs are registered together, and everything that could
disagree is checked when it is registered: a bad name, schema or command raises ConfigError at
start-up, never at call time.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, TypeVar, Union

from ._prompts import Prompt
from ._resources import Resource, ResourceNotFound, ResourceTemplate, definition, read
from ._tools import Tool, function_tool
from .errors import ConfigError

__all__ = ["Prompt", "Resource", "ResourceNotFound", "ResourceTemplate", "Server"]

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_TTL_MS = 300_000  # list results are static for a process's life; a restart may change them
DEFAULT_PAGE_SIZE = 100


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
        return definition(name=self.name, version=self.version, title=self.title)

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

    def tool(self, fn: Optional[F] = None, **options: Any) -> Any:
        """Register a function as a tool: `@server.tool` or `@server.tool(name=..., ...)`.

        Its inputSchema comes from the signature (str, int, float, bool, list, dict, Optional,
        Literal, Enum, defaults) unless `input_schema` is given; its description from the docstring.
        The options are function_tool's: name, title, description, input_schema, output_schema,
        annotations, icons, meta, requires_client_capabilities (a client that lacks one gets -32021).
        """

        def register(function: F) -> F:
            self.add_tool(function_tool(function, **options))
            return function

        return register(fn) if fn is not None else register

    def command(self, name: str, command: Union[list[Any], str], **options: Any) -> Tool:
        """Register a program as a tool. Its arguments arrive as JSON on stdin; stdout is the result.

        The options are a tool's fields (title, description, input_schema, output_schema, annotations)
        and the command's (stdin, output, timeout, max_output_bytes, cwd, env, shell): see
        docs/manifest.md, and mcpserver._command for the rules on argv placeholders.
        """
        from ._command import command_tool  # subprocess and selectors load only for servers that run programs

        return self.add_tool(command_tool(name, command, **options))

    # -- resources ------------------------------------------------------------------------------

    def resource(self, uri: str, **options: Any) -> Callable[[F], F]:
        """Register a reader for one URI. It returns str (text), bytes (blob) or raises ResourceNotFound.

        Options: name, title, description (default: the docstring), mime_type, annotations.
        """

        def register(function: F) -> F:
            if uri in self.resources:
                raise ConfigError(f"duplicate resource URI {uri!r}")
            self.resources[uri] = Resource(uri, function, **options)
            return function

        return register

    def resource_template(self, uri_template: str, **options: Any) -> Callable[[F], F]:
        """Register a reader for every URI matching an RFC 6570 template; variables become arguments.

        Options: name, title, description (default: the docstring), mime_type.
        """

        def register(function: F) -> F:
            self.resource_templates.append(ResourceTemplate(uri_template, function, **options))
            return function

        return register

    def read_resource(self, uri: str) -> list[dict[str, Any]]:
        """Contents for `uri`; ResourceNotFound when nothing serves it."""
        return read(self.resources, self.resource_templates, uri)

    # -- prompts --------------------------------------------------------------------------------

    def prompt(self, fn: Optional[F] = None, **options: Any) -> Any:
        """Register a prompt. Its parameters are its (string) arguments; it returns a str or messages.

        Options: name, title, description (default: the docstring).
        """

        def register(function: F) -> F:
            prompt = Prompt(function, **options)
            if prompt.name in self.prompts:
                raise ConfigError(f"duplicate prompt name {prompt.name!r}")
            self.prompts[prompt.name] = prompt
            return function

        return register(fn) if fn is not None else register
