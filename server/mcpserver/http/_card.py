"""Server Cards, experimental (`--server-card`): GET <endpoint>/server-card answers the MCP Server Card of SEP-2127, a
draft, in the shape of the experimental-ext-server-card repository's schema (vendored in spec/server-card/ with its
commit); `--ai-catalog` adds the domain's AI Catalog at /.well-known/ai-catalog.json, which points to it.

Rules of this module (the draft's docs/discovery.md):
- The card is made from what server/discover says, the same function's result, with the revisions initialize
  negotiates beside its supportedVersions: serverInfo's name, version, title, description and websiteUrl are the
  card's, so the two cannot disagree. The draft's name is reverse-DNS (`com.example/weather`) and a description is
  required: a server that lacks either is refused at start-up (ConfigError saying what to name).
- remotes[0] is the endpoint: the OAuth resource when there is one (its public URL), else the scheme and Host the
  request came with (the Host checked first, as every request's is) and the endpoint path; on a Unix socket without
  a resource there is no URL to give, and no remote. A static token makes its Authorization header a required
  secret input, with no value.
- Public and read-only: no token, any origin (the CORS headers the draft requires), `Cache-Control: public,
  max-age=3600` and a strong ETag from the body. `If-None-Match` naming it (or `*`) is 304 with the same headers
  and no body; a stale one is 200 with the card and its ETag. HEAD is GET without the body; OPTIONS is a preflight;
  anything else 405.
- The catalog names the card by `urn:air:{host}:mcp:{the name after its slash}`, and gives its URL (the card
  inline, as `data`, when there is no URL).
"""

from __future__ import annotations

import hashlib

from .. import _json
from .._wire import LEGACY_VERSIONS
from ..errors import ConfigError
from ._response import Response

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional

    from .._server import Server

__all__ = ["CARD_TYPE", "CATALOG_PATH", "CATALOG_TYPE", "SCHEMA_URL", "ServerCard"]

CARD_TYPE = "application/mcp-server-card+json"
CATALOG_TYPE = "application/ai-catalog+json"
CATALOG_PATH = "/.well-known/ai-catalog.json"
SCHEMA_URL = "https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json"
CARD_SUFFIX = "/server-card"
CACHE_CONTROL = "public, max-age=3600"  # the draft's: a card changes with a deployment, not per request
CORS = [("Access-Control-Allow-Origin", "*"), ("Access-Control-Allow-Methods", "GET"),
        ("Access-Control-Allow-Headers", "Content-Type, If-None-Match"), ("Access-Control-Expose-Headers", "ETag")]
_NAME_CHARACTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-_")
_HOST_CHARACTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-:[]")


def check_identity(info: dict[str, Any]) -> None:
    """ConfigError unless serverInfo can be a card's identity (the draft's bounds on name, description, title)."""
    name, description, title = info.get("name", ""), info.get("description"), info.get("title")
    namespace, slash, short = name.partition("/")
    if not (3 <= len(name) <= 200 and slash and namespace and short and "/" not in short
            and _NAME_CHARACTERS.issuperset(name.replace("/", "")) and "_" not in namespace):
        raise ConfigError(f"--server-card: a Server Card names its server in reverse-DNS form, namespace/name "
                          f"(com.example/weather), and serverInfo must say the same: name the Server so, not {name!r}")
    if not isinstance(description, str) or not 1 <= len(description) <= 100:
        raise ConfigError("--server-card: a Server Card needs the server's description, 1 to 100 characters: "
                          "Server(..., description=...) (a manifest's \"description\")")
    if title is not None and not 1 <= len(title) <= 100:
        raise ConfigError(f"--server-card: a Server Card's title is 1 to 100 characters, not {len(title)}")


class ServerCard:
    """The card of one app's server, and the catalog that points to it."""

    def __init__(self, server: Server, path: str, *, resource: Optional[str], unix_socket: bool, static_token: bool,
                 behind_proxy: bool, catalog: bool):
        check_identity(server.info)
        self.server = server
        self.path = path.rstrip("/") + CARD_SUFFIX
        self.paths = (self.path, CATALOG_PATH) if catalog else (self.path,)
        self.endpoint_path = path
        self.resource = resource
        self.unix_socket = unix_socket
        self.static_token = static_token
        self.behind_proxy = behind_proxy  # then the public scheme is https, whatever reached this process

    def answer(self, environ: dict[str, Any], path: str) -> Response:
        """The card's (or the catalog's) answer to this request."""
        method = environ.get("REQUEST_METHOD")
        if method == "OPTIONS":  # a browser's preflight: any page may read it
            return Response(204, [*CORS, ("Access-Control-Max-Age", "86400"), ("Content-Length", "0")])
        if method not in ("GET", "HEAD"):
            return Response.plain(405, "A Server Card is read with GET", ("Allow", "GET, HEAD, OPTIONS"), *CORS)
        endpoint = self._endpoint(environ)
        card = self.card(endpoint)
        if path == CATALOG_PATH:
            document, kind = self._catalog(card, endpoint), CATALOG_TYPE
        else:
            document, kind = card, CARD_TYPE
        body = _json.dumps(document).encode()
        etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
        headers = [("ETag", etag), ("Cache-Control", CACHE_CONTROL), *CORS]
        if _matches(environ.get("HTTP_IF_NONE_MATCH"), etag):
            return Response(304, headers)
        headers += [("Content-Type", kind), ("Content-Length", str(len(body)))]
        return Response(200, headers, body if method == "GET" else b"")

    def card(self, endpoint: Optional[str]) -> dict[str, Any]:
        """The Server Card: serverInfo and server/discover's versions, and the endpoint when it has a URL."""
        from .._context import Context
        from .._methods import _discover

        discovered = _discover(self.server, {}, Context())
        info = self.server.info
        card: dict[str, Any] = {"$schema": SCHEMA_URL}
        for key in ("name", "version", "description", "title", "websiteUrl"):
            if key in info:
                card[key] = info[key]
        if endpoint is not None:
            remote: dict[str, Any] = {"type": "streamable-http", "url": endpoint, "supportedProtocolVersions": [
                *discovered["supportedVersions"], *LEGACY_VERSIONS]}
            if self.static_token:
                remote["headers"] = [{"name": "Authorization", "description": "The server's bearer token",
                                      "isRequired": True, "isSecret": True, "value": "Bearer {token}",
                                      "variables": {"token": {"isRequired": True, "isSecret": True}}}]
            card["remotes"] = [remote]
        return card

    def _endpoint(self, environ: dict[str, Any]) -> Optional[str]:
        """The endpoint's URL: the OAuth resource's, else the request's scheme and Host with the endpoint path."""
        if self.resource is not None:
            return self.resource
        host = environ.get("HTTP_HOST", "")
        if self.unix_socket or not host or not _HOST_CHARACTERS.issuperset(host):
            return None
        scheme = "https" if self.behind_proxy else environ.get("wsgi.url_scheme", "http")
        return f"{scheme}://{host}{self.endpoint_path}"

    def _catalog(self, card: dict[str, Any], endpoint: Optional[str]) -> dict[str, Any]:
        from urllib.parse import urlsplit

        publisher = urlsplit(endpoint).hostname if endpoint is not None else None
        entry: dict[str, Any] = {"identifier": f"urn:air:{publisher or 'localhost'}:mcp:{card['name'].split('/')[1]}",
                                 "type": CARD_TYPE}
        if endpoint is not None:
            entry["url"] = endpoint.rstrip("/") + CARD_SUFFIX
        else:
            entry["data"] = card
        return {"specVersion": "1.0", "entries": [entry]}


def _matches(if_none_match: Optional[str], etag: str) -> bool:
    """Whether If-None-Match names `etag` (weak comparison, RFC 9110 §13.1.2), or is `*`."""
    if not if_none_match:
        return False
    for tag in if_none_match.split(","):
        tag = tag.strip()
        if tag == "*" or (tag[2:] if tag.startswith("W/") else tag) == etag:
            return True
    return False
