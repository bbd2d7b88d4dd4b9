"""The server: a registry of tools, resources and prompts, the single source of truth.

What a client is told exists and what runs are registered together, and everything that could
disagree is checked when it is registered: a bad name, schema or command raises ConfigError at
start-up, never at call time.
"""

from __future__ import annotations

import threading

from ._context import Context
from ._forks import renew_at_fork
from ._middleware import MiddlewareChain
from ._state import DEFAULT_STATE_TTL, Sealer
from ._subscriptions import DEFAULT_MAX_LISTENERS, Subscriptions
from ._tools import Tool, check_heartbeat, function_tool
from ._wire import APPS_EXTENSION, SKILLS_EXTENSION, TASKS_EXTENSION
from .errors import ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Iterable, Optional, Sequence, TypeVar, Union

    from ._prompts import Prompt
    from ._resources import Resource, ResourceTemplate
    F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["Server"]


DEFAULT_TTL_MS = 300_000  # list results are static for a process's life; a restart may change them
DEFAULT_PAGE_SIZE = 100


def _check_options(name: Any, ttl_ms: Any, cache_scope: Any, page_size: Any, offers: frozenset[str]) -> None:
    if not isinstance(name, str) or not name:
        raise ConfigError("a server needs a non-empty name")
    if not isinstance(ttl_ms, int) or isinstance(ttl_ms, bool) or ttl_ms < 0:
        raise ConfigError(f"ttl_ms must be an integer >= 0, not {ttl_ms!r}")
    if cache_scope not in ("public", "private"):
        raise ConfigError(f"cache_scope must be \"public\" or \"private\", not {cache_scope!r}")
    if not isinstance(page_size, int) or page_size < 1:
        raise ConfigError(f"page_size must be a positive integer, not {page_size!r}")
    unknown = sorted(offers - {"tools", "resources", "prompts"})
    if unknown:
        raise ConfigError(f"offers may name tools, resources and prompts, not {unknown[0]!r}")


class Server:
    """An MCP server's contents and identity. Transports serve it; `protocol.dispatch` answers for it.

    >>> server = Server("demo", "1.0.0")
    >>> @server.tool()
    ... def echo(text: str) -> str:
    ...     '''Return the text unchanged.'''
    ...     return text
    """

    def __init__(self, name: str, version: str = "0.0.0", *, title: Optional[str] = None,
                 instructions: Optional[str] = None, ttl_ms: int = DEFAULT_TTL_MS, cache_scope: str = "public",
                 page_size: int = DEFAULT_PAGE_SIZE, server_info_in_results: bool = True,
                 state_key: Union[str, Sequence[str], None] = None, state_ttl: float = DEFAULT_STATE_TTL,
                 max_listeners: int = DEFAULT_MAX_LISTENERS, offers: Iterable[str] = (), task_store: Any = None,
                 heartbeat: Optional[float] = None, description: Optional[str] = None,
                 website_url: Optional[str] = None):
        """`state_key` seals the requestState of input_required rounds and legacy session ids: a key, or keys
        with the sealing one first, the others still opening what they sealed (default $MCPSERVER_STATE_KEY,
        $MCPSERVER_STATE_KEYS or $MCPSERVER_STATE_KEYS_FILE, else a key of this process only); `state_ttl` is
        how many seconds a client may take to answer; `max_listeners` bounds the subscriptions/listen streams
        open at once; `offers` names categories ("tools", "resources", "prompts") to declare even while they
        are empty, for a server that adds them at run time; `task_store` keeps the tasks of task tools: None
        or "memory" (this process), the path of an SQLite file (every process on the host, across restarts)
        or a postgresql:// URL; `heartbeat`, the seconds between progress beats of a silent tool's call whose
        client sent a progressToken, for every tool that does not say otherwise (`@server.tool(heartbeat=)`);
        `description` and `website_url`, what serverInfo says of the server besides its name, version and title
        (2025-11-25 on; a Server Card needs a description)."""
        offers = frozenset(offers)  # once: an iterator of names would be empty the second time
        _check_options(name, ttl_ms, cache_scope, page_size, offers)
        self.name = name
        self.version = version
        self.middleware = MiddlewareChain()  # @server.middleware: around every request (mcpserver._middleware)
        self.title = title
        self.description = description
        self.website_url = website_url
        self.instructions = instructions
        self.ttl_ms = ttl_ms
        self.cache_scope = cache_scope
        self.page_size = page_size
        self.server_info_in_results = server_info_in_results
        self.heartbeat = check_heartbeat(heartbeat, "the server") or None  # tools without one of their own: this
        self.offers = offers
        self._info: tuple[Any, dict[str, Any]] = (None, {})
        self.sealer = Sealer(state_key, state_ttl)
        self.subscriptions = Subscriptions(max_listeners)
        # The registry may change while requests run: each change replaces a whole mapping (under
        # _lock), so a request that took one sees it whole, and listeners are told.
        self._lock = threading.Lock()
        self.tools: dict[str, Tool] = {}
        self.resources: dict[str, Resource] = {}
        self.resource_templates: tuple[ResourceTemplate, ...] = ()
        self.prompts: dict[str, Prompt] = {}
        self.scoped = False  # some entry needs OAuth scopes of its own (mcpserver._scopes): the HTTP app checks them
        self.task_store = task_store
        self._components: dict[str, Any] = {}
        # Reentrant: a component may need another while it is made (the task manager, the store it shares).
        self._making = threading.RLock()
        renew_at_fork(self, "_lock", "_making")

    def __repr__(self) -> str:
        return f"Server({self.name!r}, {self.version!r}, tools={list(self.tools)})"

    @property
    def info(self) -> dict[str, Any]:
        """The Implementation object clients see as serverInfo (in every result: built once per identity)."""
        identity = (self.name, self.version, self.title, self.description, self.website_url)
        if self._info[0] != identity:
            info = {"name": self.name, "version": self.version, "title": self.title, "description": self.description,
                    "websiteUrl": self.website_url}
            self._info = (identity, {key: value for key, value in info.items() if value is not None})
        return self._info[1]

    def offers_capability(self, kind: str) -> bool:
        """Whether capabilities() has `kind`, without building it (asked on every request)."""
        if kind == "tools":
            return bool(self.tools) or "tools" in self.offers
        if kind == "resources":
            return bool(self.resources or self.resource_templates) or "resources" in self.offers
        if kind == "prompts":
            return bool(self.prompts) or "prompts" in self.offers
        return kind in self.capabilities()

    def capabilities(self) -> dict[str, Any]:
        """What this server offers. A change of its lists, and resource_updated(), reach listeners that asked
        (subscriptions/listen), so listChanged and subscribe are true wherever the category exists."""
        capabilities: dict[str, Any] = {}
        live = self.subscriptions.enabled  # without listen streams (--no-listen) no change is ever told
        if self.offers_capability("tools"):
            capabilities["tools"] = {"listChanged": True} if live else {}
        if self.offers_capability("resources"):
            capabilities["resources"] = {"subscribe": True, "listChanged": True} if live else {}
        if self.offers_capability("prompts"):
            capabilities["prompts"] = {"listChanged": True} if live else {}
        if any(p.completions for p in self.prompts.values()) or any(t.completions for t in self.resource_templates):
            capabilities["completions"] = {}
        extensions: dict[str, Any] = {}
        if any(tool.task != "never" for tool in self.tools.values()):
            extensions[TASKS_EXTENSION] = {}
        if SKILLS_EXTENSION in self._components:
            extensions[SKILLS_EXTENSION] = {"directoryRead": True}
        if APPS_EXTENSION in self._components:
            extensions[APPS_EXTENSION] = {}
        if extensions:
            capabilities["extensions"] = extensions
        return capabilities

    def shutdown(self) -> None:
        """The transport is exiting: listeners end with their graceful result, and work that outlives
        requests (tasks still running here) is recorded as stopped."""
        self.subscriptions.end_all()
        with self._lock:
            components = list(self._components.values())
        for component in components:
            stop = getattr(component, "shutdown", None)
            if stop is not None:
                stop()

    def component(self, key: str, make: Callable[[], Any]) -> Any:
        """A part of this server made once, when first needed (the task manager and its store)."""
        with self._making:
            if key not in self._components:
                made = make()
                with self._lock:
                    self._components[key] = made
            return self._components[key]

    # -- tools ----------------------------------------------------------------------------------

    def add_tool(self, tool: Tool) -> Tool:
        """Add a tool; while serving, listeners that asked are told the list changed."""
        with self._lock:
            if tool.name in self.tools:
                raise ConfigError(f"duplicate tool name {tool.name!r}")
            self.tools = {**self.tools, tool.name: tool}
            self.scoped = self.scoped or bool(tool.scopes)
        self.subscriptions.list_changed("tools")
        return tool

    def remove_tool(self, name: str) -> None:
        """Remove a tool (KeyError if there is none); listeners that asked are told."""
        with self._lock:
            if name not in self.tools:
                raise KeyError(f"no tool {name!r}")
            self.tools = {key: tool for key, tool in self.tools.items() if key != name}
        self.subscriptions.list_changed("tools")

    def tool(self, fn: Optional[F] = None, *, name: Optional[str] = None, title: Optional[str] = None,
             description: Optional[str] = None, input_schema: Optional[dict[str, Any]] = None,
             output_schema: Optional[dict[str, Any]] = None, annotations: Optional[dict[str, Any]] = None,
             icons: Optional[list[dict[str, Any]]] = None, meta: Optional[dict[str, Any]] = None,
             requires_client_capabilities: Optional[dict[str, Any]] = None, task: str = "never",
             ui: Optional[str] = None, visibility: Optional[Iterable[str]] = None,
             rate_limit: Optional[str] = None, heartbeat: Union[float, bool, None] = None,
             scopes: Union[str, Iterable[str], None] = None) -> Any:
        """Register a function as a tool: `@server.tool` or `@server.tool(name=..., ...)`.

        Its inputSchema comes from the signature (str, int, float, bool, list, dict, Optional,
        Literal, Enum, defaults) unless `input_schema` is given; its description from the docstring.
        `requires_client_capabilities`: a client that lacks one gets -32021. `task`: "optional" or
        "required" runs a call as a task the client polls (the Tasks extension; docs/guides/tasks.md).
        `ui`: the app (server.app, registered first) a host shows its results in; `visibility`: who may
        call it, ["model", "app"] by default, ["app"] for a tool only its app calls (MCP Apps).
        `rate_limit`: "N/s", "N/m" or "N/h" calls per caller (mcpserver._ratelimit), then -32603 (HTTP 429).
        `heartbeat`: seconds between progress beats while a call whose client sent a progressToken is silent
        (mcpserver._heartbeat); False for none where the server has a default.
        `scopes`: the OAuth scopes a call's token needs beyond the server's, ["files:write"]; without them the call
        is refused with 403 insufficient_scope, and the tool stays listed (mcpserver._scopes; HTTP with OAuth only).
        """
        def register(function: F) -> F:
            if rate_limit is not None:  # refused before anything is registered
                from ._ratelimit import parse_rate  # only servers with a limited tool load it

                rate = parse_rate(rate_limit)
            linked = meta
            if ui is not None or visibility is not None:
                from ._apps import tool_meta  # MCP Apps load only for a server that links a tool to one

                linked = tool_meta(meta, ui, visibility, self.resources, name or function.__name__)
            tool = self.add_tool(function_tool(function, name=name, title=title, description=description,
                                               input_schema=input_schema, output_schema=output_schema,
                                               annotations=annotations, icons=icons, meta=linked,
                                               requires_client_capabilities=requires_client_capabilities, task=task,
                                               heartbeat=heartbeat, scopes=scopes))
            if rate_limit is not None:
                from ._ratelimit import tool_limits

                tool_limits(self).limit(tool.name, rate)
            return function

        return register(fn) if fn is not None else register

    def command(self, name: str, command: Union[list[Any], str], *, title: Optional[str] = None,
                description: Optional[str] = None, input_schema: Optional[dict[str, Any]] = None,
                output_schema: Optional[dict[str, Any]] = None, annotations: Optional[dict[str, Any]] = None,
                icons: Optional[list[dict[str, Any]]] = None, meta: Optional[dict[str, Any]] = None,
                task: str = "never", stdin: Union[str, dict[str, str]] = "json", output: str = "text",
                timeout: Optional[float] = None, max_output_bytes: Optional[int] = None, cwd: Optional[str] = None,
                env: Optional[dict[str, str]] = None, shell: bool = False, progress: Optional[str] = None,
                confirm: Optional[str] = None, heartbeat: Union[float, bool, None] = None,
                scopes: Union[str, Iterable[str], None] = None) -> Tool:
        """Register a program as a tool. Its arguments arrive as JSON on stdin; stdout is the result.

        `stdin` is "json" (the arguments), "none" or {"argument": NAME}; `output` "text" or "json"
        (structured content); `timeout` (default 30 s) and `max_output_bytes` (16 MiB) end a run;
        `progress` is a regex over stderr lines; `confirm` a question the user must accept first; `heartbeat` and
        `scopes` as for tool(). See docs/guides/manifest.md, and mcpserver._command for the rules on argv placeholders.
        """
        from ._command import command_tool  # subprocess and selectors load only for servers that run programs

        given: dict[str, Any] = {"title": title, "description": description, "input_schema": input_schema,
                                 "output_schema": output_schema, "annotations": annotations, "icons": icons,
                                 "meta": meta, "timeout": timeout, "max_output_bytes": max_output_bytes, "cwd": cwd,
                                 "env": env, "progress": progress, "confirm": confirm, "heartbeat": heartbeat,
                                 "scopes": scopes}
        options = {key: value for key, value in given.items() if value is not None}  # unset: the spec's defaults
        return self.add_tool(command_tool(name, command, task=task, stdin=stdin, output=output, shell=shell,
                                          **options))

    # -- resources ------------------------------------------------------------------------------

    def resource(self, uri: str, *, name: Optional[str] = None, title: Optional[str] = None,
                 description: Optional[str] = None, mime_type: Optional[str] = None,
                 annotations: Optional[dict[str, Any]] = None,
                 scopes: Union[str, Iterable[str], None] = None) -> Callable[[F], F]:
        """Register a reader for one URI. It returns str (text), bytes (blob) or raises ResourceNotFound.
        The description defaults to the docstring; `scopes` as for tool(), for a read or a subscription."""
        from . import _resources  # resources and prompts load only for a server that has them

        def register(function: F) -> F:
            self.add_resource(_resources.Resource(uri, function, name=name, title=title, description=description,
                                                  mime_type=mime_type, annotations=annotations, scopes=scopes))
            return function

        return register

    def add_resource(self, resource: Resource) -> Resource:
        with self._lock:
            if resource.uri in self.resources:
                raise ConfigError(f"duplicate resource URI {resource.uri!r}")
            self.resources = {**self.resources, resource.uri: resource}
            self.scoped = self.scoped or bool(resource.scopes)
        self.subscriptions.list_changed("resources")
        return resource

    def remove_resource(self, uri: str) -> None:
        with self._lock:
            if uri not in self.resources:
                raise KeyError(f"no resource {uri!r}")
            self.resources = {key: resource for key, resource in self.resources.items() if key != uri}
        self.subscriptions.list_changed("resources")

    def app(self, uri: str, html: Optional[str] = None, *, path: Optional[str] = None, name: Optional[str] = None,
            title: Optional[str] = None, description: Optional[str] = None, csp: Optional[dict[str, Any]] = None,
            permissions: Optional[Iterable[str]] = None, domain: Optional[str] = None,
            prefers_border: Optional[bool] = None) -> Resource:
        """Register an MCP App (io.modelcontextprotocol/ui): the HTML5 page at `uri` (ui://...), given as
        `html` or read from the file `path` at every read, that a host shows in a sandboxed iframe for the
        tools linked to it (`@server.tool(ui=uri)`). `csp` maps connectDomains, resourceDomains, frameDomains
        and baseUriDomains to origins the page may reach (none by default); `permissions` names camera,
        microphone, geolocation, clipboardWrite; `prefers_border` asks the host for a frame or none."""
        from ._apps import app_resource  # MCP Apps load only for a server that has one

        resource = self.add_resource(app_resource(uri, html, path, name=name, title=title, description=description,
                                                  csp=csp, permissions=permissions, domain=domain,
                                                  prefers_border=prefers_border))
        self.component(APPS_EXTENSION, lambda: True)
        return resource

    def resource_template(self, uri_template: str, *, name: Optional[str] = None, title: Optional[str] = None,
                          description: Optional[str] = None, mime_type: Optional[str] = None,
                          completions: Optional[dict[str, Any]] = None,
                          scopes: Union[str, Iterable[str], None] = None) -> Callable[[F], F]:
        """Register a reader for every URI matching an RFC 6570 template; variables become arguments.
        The description defaults to the docstring; `completions` maps a variable to a list of values or
        a function (value, resolved) -> values; `scopes` as for tool(), for a read or a subscription."""
        from . import _resources

        def register(function: F) -> F:
            self.add_resource_template(_resources.ResourceTemplate(
                uri_template, function, name=name, title=title, description=description, mime_type=mime_type,
                completions=completions, scopes=scopes))
            return function

        return register

    def add_resource_template(self, template: ResourceTemplate) -> ResourceTemplate:
        with self._lock:
            self.resource_templates = (*self.resource_templates, template)
            self.scoped = self.scoped or bool(template.scopes)
        self.subscriptions.list_changed("resources")
        return template

    def remove_resource_template(self, uri_template: str) -> None:
        with self._lock:
            kept = tuple(t for t in self.resource_templates if t.uri_template != uri_template)
            if len(kept) == len(self.resource_templates):
                raise KeyError(f"no resource template {uri_template!r}")
            self.resource_templates = kept
        self.subscriptions.list_changed("resources")

    def resource_updated(self, uri: str) -> None:
        """Say that `uri` changed: listeners subscribed to it get notifications/resources/updated."""
        self.subscriptions.resource_updated(uri)

    def read_resource(self, uri: str, context: Optional[Context] = None) -> list[dict[str, Any]]:
        """Contents for `uri`; ResourceNotFound when nothing serves it."""
        from ._resources import read

        return read(self.resources, self.resource_templates, uri, context)

    def serves(self, uri: str) -> bool:
        """Whether a resource or a template answers for `uri`."""
        return uri in self.resources or any(t.match(uri) is not None for t in self.resource_templates)

    def skills(self, path: Any, prefix: str = "") -> None:
        """Serve the skills under the directory `path` (the Skills extension, io.modelcontextprotocol/skills):
        every directory below it holding a SKILL.md is a skill at skill://PREFIX/<its path>, each of its files a
        resource. ConfigError names a file that cannot be served (docs/guides/skills.md)."""
        from .skills import Catalog  # the wing loads only for a server with skills

        self.offers = self.offers | {"resources"}  # the extension needs the capability, even while no skill is found
        self.component(SKILLS_EXTENSION, lambda: Catalog(self)).add(path, prefix)

    # -- prompts --------------------------------------------------------------------------------

    def prompt(self, fn: Optional[F] = None, *, name: Optional[str] = None, title: Optional[str] = None,
               description: Optional[str] = None, completions: Optional[dict[str, Any]] = None,
               scopes: Union[str, Iterable[str], None] = None) -> Any:
        """Register a prompt. Its parameters are its (string) arguments; it returns a str or messages.
        The description defaults to the docstring; `completions` maps an argument to a list of values or
        a function (value, resolved arguments) -> values; `scopes` as for tool(), for a prompts/get."""
        from . import _prompts

        def register(function: F) -> F:
            self.add_prompt(_prompts.Prompt(function, name=name, title=title, description=description,
                                            completions=completions, scopes=scopes))
            return function

        return register(fn) if fn is not None else register

    def add_prompt(self, prompt: Prompt) -> Prompt:
        with self._lock:
            if prompt.name in self.prompts:
                raise ConfigError(f"duplicate prompt name {prompt.name!r}")
            self.prompts = {**self.prompts, prompt.name: prompt}
            self.scoped = self.scoped or bool(prompt.scopes)
        self.subscriptions.list_changed("prompts")
        return prompt

    def remove_prompt(self, name: str) -> None:
        with self._lock:
            if name not in self.prompts:
                raise KeyError(f"no prompt {name!r}")
            self.prompts = {key: prompt for key, prompt in self.prompts.items() if key != name}
        self.subscriptions.list_changed("prompts")
