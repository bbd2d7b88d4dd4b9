"""Scopes of one tool, resource or prompt: the OAuth scopes a token needs to call it, read it or get it, beyond the
scopes every request needs (docs/guides/auth.md, "Scopes per tool").

Rules of this module:
- A scope is an RFC 6749 §3.3 scope-token: printable ASCII but space, '"' and '\\'. Anything else is refused when
  the entry is registered (ConfigError), so every challenge quotes it as it is (RFC 6750 §3 allows no escapes).
- `scopes` is a list of tokens, or one string of them separated by spaces (as OAuth writes its scope parameter). A
  list item with a space in it reads as one scope but is two: refused, as is an empty string.
- Only a token carries scopes, so they apply to OAuth over HTTP alone. Over stdio, with a static token or with no
  authentication there is no token to hold them, and every entry is served as one without scopes.
- An entry stays listed whatever the token; only a call, a read, a get or a subscription of it is refused (HTTP
  403 insufficient_scope, mcpserver.http), naming every scope the request needs: the server's and the entry's.
- A resource URI is resolved as resources/read resolves it: the resource of that URI, else the first template
  that matches it.
"""

from __future__ import annotations

from .errors import ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Iterable, Mapping, Optional, Protocol, Sequence, Union

    class Server(Protocol):
        """What of an mcpserver.Server the scopes are read from: its entries, each with `scopes`."""

        @property
        def tools(self) -> Mapping[str, Any]: ...
        @property
        def resources(self) -> Mapping[str, Any]: ...
        @property
        def resource_templates(self) -> Sequence[Any]: ...
        @property
        def prompts(self) -> Mapping[str, Any]: ...

__all__ = ["MAX_SCOPES", "MAX_SCOPE_CHARS", "NO_SCOPES", "every_scope", "needed", "scope_set"]

NO_SCOPES: frozenset[str] = frozenset()
# A challenge names every scope a request needs in one header line: a few scopes is what an entry needs, and a
# line of kilobytes is what proxies refuse. Past either bound, ConfigError.
MAX_SCOPES = 32
MAX_SCOPE_CHARS = 256


def _is_scope_token(text: str) -> bool:
    return 0 < len(text) <= MAX_SCOPE_CHARS and text.isascii() and text.isprintable() and not any(
        c in text for c in ' "\\')


def scope_set(scopes: Union[str, Iterable[str], None], where: str) -> frozenset[str]:
    """The scopes an entry needs, checked (ConfigError saying which one and why)."""
    if scopes is None:
        return NO_SCOPES
    if isinstance(scopes, str):
        if not scopes.strip():
            raise ConfigError(f"{where}: scopes is an empty string; leave it out for none")
        items: list[Any] = scopes.split()
    elif isinstance(scopes, (bytes, dict)) or not hasattr(scopes, "__iter__"):
        raise ConfigError(f"{where}: scopes must be a list of scope names, not {type(scopes).__name__}")
    else:
        items = list(scopes)
        for item in items:
            if isinstance(item, str) and item.strip() and len(item.split()) > 1:
                raise ConfigError(f"{where}: the scope {item[:80]!r} holds a space, so it is several scopes: "
                                  f"give them as a list, {item.split()!r}")
    for item in items:
        if not isinstance(item, str) or not _is_scope_token(item):
            raise ConfigError(f"{where}: {str(item)[:80]!r} is not a scope: a scope is 1 to {MAX_SCOPE_CHARS} "
                              "printable ASCII characters without spaces, quotes or backslashes (RFC 6749 §3.3)")
    if len(set(items)) > MAX_SCOPES:
        raise ConfigError(f"{where}: at most {MAX_SCOPES} scopes, not {len(set(items))}")
    return frozenset(items)


def needed(server: Server, method: str, params: dict[str, Any]) -> frozenset[str]:
    """The scopes of the entry a request calls, reads, gets or subscribes to; none for anything else (a list, an
    unknown name: the method answers as it would)."""
    name = params.get("name")
    if method == "tools/call":
        return getattr(server.tools.get(name), "scopes", NO_SCOPES) if isinstance(name, str) else NO_SCOPES
    if method == "prompts/get":
        return getattr(server.prompts.get(name), "scopes", NO_SCOPES) if isinstance(name, str) else NO_SCOPES
    if method in ("resources/read", "resources/subscribe"):
        return _resource_scopes(server, params.get("uri"))
    if method == "subscriptions/listen":
        wanted = params.get("notifications")
        uris = wanted.get("resourceSubscriptions") if isinstance(wanted, dict) else None
        if isinstance(uris, list):
            return frozenset().union(*(_resource_scopes(server, uri) for uri in uris))
    return NO_SCOPES


def _resource_scopes(server: Server, uri: Optional[Any]) -> frozenset[str]:
    if not isinstance(uri, str):
        return NO_SCOPES
    resource = server.resources.get(uri)
    if resource is not None:
        return resource.scopes  # type: ignore[no-any-return]
    for template in server.resource_templates:
        if template.match(uri) is not None:
            return template.scopes  # type: ignore[no-any-return]
    return NO_SCOPES


def every_scope(server: Server) -> frozenset[str]:
    """Every scope an entry of the server needs (what its protected-resource metadata lists as scopes_supported)."""
    entries = (*server.tools.values(), *server.resources.values(), *server.resource_templates,
               *server.prompts.values())
    return frozenset().union(*(entry.scopes for entry in entries))
