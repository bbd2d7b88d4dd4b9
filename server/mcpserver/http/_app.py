"""The Streamable HTTP binding: a WSGI application for one Server (WIRE.md §16, in the order of §17).

Serve it with `python -m mcpserver --http` (the built-in server) or any WSGI server (gunicorn,
uWSGI, waitress): `create_app(TARGET)`.

Rules of this module:
- It maps HTTP to JSON-RPC and back, nothing more: every protocol rule, the header checks
  included, lives in protocol.dispatch, which also says which status each error gets.
- Safe by default. Only the endpoint path answers (else 404); when bound to loopback, a Host that
  is neither a loopback name or address nor an allowed name is refused (DNS rebinding); an
  Origin that is present and not allowed gets 403; only POST (else 405 with Allow); a bearer
  token, when configured, is compared in constant time (else 401); without a token, a peer that
  is not on loopback is refused (403) unless insecure_no_auth says something in front
  authenticates. The body must be application/json (else 415) and at most max_body_bytes (else
  413); an Accept that excludes JSON gets 406.
- On a Unix socket (unix_socket, or gunicorn bound to one) every peer is on this host, admitted by the socket
  file's mode: it is served as a loopback peer is (no token needed unless one is set; OAuth over plain HTTP), and
  Host and Origin are checked as on loopback, for a proxy that forwards a browser's requests to the socket.
- Every one of those checks needs only the request head, and a refusal is one exception
  (Refused, carrying its Response). A server that knows `screen(environ)` (the built-in one)
  calls it before it waits for a body, so a refused request never holds a slot while its body
  trickles in; what screening learned (the principal) reaches __call__ through environ, so
  nothing is checked twice. Under any other WSGI server, __call__ checks everything itself.
- OAuth (`oauth`, an mcpserver.auth.ResourceServer): its RFC 9728 metadata is served, public, at
  its well-known paths; every request's token goes through it (401/403/503 with its
  WWW-Authenticate), over HTTPS only unless the peer is on loopback; the authenticated principal
  reaches the tools through the request's Flight, the token never does. `behind_proxy`: a
  TLS-terminating proxy is in front, so every request must say X-Forwarded-Proto: https (the
  header is read only then).
- subscriptions/listen streams are bounded per peer (REMOTE_ADDR, or the nearest proxy's
  X-Forwarded-For entry behind a proxy) and per principal (an OAuth subject; a static token is
  one principal for everyone who holds it), below the server's own bound for all of them, so
  one client cannot take them all (-32603, HTTP 503, saying which bound).
- CORS (mcpserver.http._cors): only origins named in allowed_origins get CORS headers; their preflight is
  answered after the Host and Origin checks and before authentication, which a preflight cannot pass.
- rate_limit: a token bucket per principal, or per peer when anonymous (mcpserver._ratelimit), checked on
  the head once authentication says who it is: 429 with Retry-After and a JSON-RPC error, no body read.
- Streams (progress, subscriptions/listen) are pushed when the server says it can drive them
  (environ["mcpserver.push"], the built-in server): then they hold no thread while they wait.
  Under any other WSGI server they are iterated, blocking, as WSGI expects.
- Stateless: no session id is issued, Mcp-Session-Id and Last-Event-ID are ignored, so any number
  of processes (gunicorn workers, replicas behind a load balancer) can serve the same clients.
- Header names reach the core as they were sent when the server says so (the built-in server's
  environ["mcpserver.headers"]); from CGI-style HTTP_* keys, where "-" and "_" are one character,
  an Mcp-Param name with "_" is still found. The access log escapes what clients control.
"""

from __future__ import annotations

import os
import threading
import time

from .. import _environment, _log, _pypy, protocol
from .._context import Flight
from .._forks import renew_at_fork
from .._options import replace
from .._server import Server
from .._wire import status_line
from ..errors import ConfigError, InternalError
from ..legacy import opens_legacy
from ._cors import Cors
from ._host import HostWatch, mend_master
from ._options import HttpOptions, given
from ._response import Admitted, Refused, Response, json_parts, printable, refused
from ._sessions import Sessions, modern
from ._stream import STREAMED, Stream

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Iterable, Mapping, Optional, Union

    from ..auth import AuthError
    from ._response import StartResponse

__all__ = ["McpApp", "create_app", "is_loopback", "read_token_file", "resolve_token"]

log = _log.get("mcpserver.http")
access_log = _log.get("mcpserver.http.access")

TOKEN_ENVIRONMENT = _environment.TOKEN
TOKEN_FILE_ENVIRONMENT = _environment.TOKEN_FILE
_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]", "::1")
_SCREENED = "mcpserver.http.screened"  # environ key: what screen() learned, for __call__
_STATIC_TOKEN = "static token"  # the principal key every holder of the one static token shares
METRICS_PATH = "/metrics"  # where Prometheus looks by default


def is_loopback(host: str) -> bool:
    """Whether `host` (a name or an address, IPv6 with or without brackets) is this machine's loopback:
    localhost, 127.0.0.0/8, ::1, or ::ffff:127.x.x.x (ipaddress would say the same, at a start-up cost)."""
    if host == "127.0.0.1":  # the common case, asked per request: no string work
        return True
    host = host.strip("[]").lower()
    if host in ("localhost", "::1", "0:0:0:0:0:0:0:1"):
        return True
    if host.startswith("::ffff:"):
        host = host[7:]
    octets = host.split(".")
    return (len(octets) == 4 and octets[0] == "127"
            and all(o.isascii() and o.isdigit() and len(o) <= 3 and int(o) <= 255 for o in octets))


def _host_name(host_header: str) -> str:
    """The name in a Host header, without the port ("[::1]:3000" -> "[::1]")."""
    if host_header.startswith("["):
        return host_header.split("]")[0] + "]"
    return host_header.rsplit(":", 1)[0] if host_header.count(":") == 1 else host_header


def _media_type(value: str) -> str:
    return value.split(";", 1)[0].strip().lower()


_JSON_ANSWERABLE = frozenset({"application/json", "*/*", "application/*", ""})
_ACCEPTED: dict[str, frozenset[str]] = {}  # Accept header -> its media types: a client sends the same one each time
_ACCEPTED_KEPT = 64  # distinct Accept values remembered; past that the memory starts over, so no client can grow it


def _accepted(header: str) -> frozenset[str]:
    """The media types an Accept header names (parameters and case dropped)."""
    found = _ACCEPTED.get(header)
    if found is None:
        found = frozenset(_media_type(part) for part in header.split(","))
        if len(_ACCEPTED) >= _ACCEPTED_KEPT:
            _ACCEPTED.clear()
        _ACCEPTED[header] = found
    return found




def read_token_file(path: str) -> str:
    """The bearer token in `path` (its first line); ConfigError when it cannot be read or is empty."""
    try:
        with open(path, encoding="utf-8") as file:
            token = file.readline().strip()
    except OSError as exc:
        raise ConfigError(f"cannot read the token file {path}: {exc.strerror}") from None
    if not token:
        raise ConfigError(f"the token file {path} is empty")
    return token


def resolve_token(token: Optional[str] = None, token_file: Optional[str] = None,
                  environ: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """The static bearer token, the one way every surface reads it: `token`, else the first line of
    `token_file`, else of $MCPSERVER_TOKEN_FILE, else $MCPSERVER_TOKEN; None when there is none.
    `environ` stands for os.environ (the command line passes what it took out of it)."""
    if token:
        return token
    environ = os.environ if environ is None else environ
    token_file = token_file or environ.get(TOKEN_FILE_ENVIRONMENT)
    if token_file:
        return read_token_file(token_file)
    return environ.get(TOKEN_ENVIRONMENT) or None








class _ListenSlots:
    """Open subscriptions/listen streams counted per peer and per principal, each with its bound."""

    def __init__(self, per_peer: int, per_principal: int):
        self.per_peer = per_peer
        self.per_principal = per_principal
        self._lock = threading.Lock()
        renew_at_fork(self, "_lock")
        self._counts: dict[tuple[str, str], int] = {}

    def take(self, peer: str, principal: Optional[str]) -> Callable[[], None]:
        """A slot for one more stream, and the callable that gives it back; InternalError (503) past a bound."""
        keys = [("peer", peer, self.per_peer)]
        if principal is not None:
            keys.append(("principal", principal, self.per_principal))
        with self._lock:
            for kind, name, limit in keys:
                if self._counts.get((kind, name), 0) >= limit:
                    raise InternalError(f"Too many subscriptions: at most {limit} subscriptions/listen streams "
                                        f"are open at once per {kind}, and this {kind} has them all",
                                        data={"limit": limit, "per": kind}, http_status=503)
            for kind, name, _ in keys:
                self._counts[(kind, name)] = self._counts.get((kind, name), 0) + 1
        given_back = False

        def release() -> None:
            nonlocal given_back
            with self._lock:
                if given_back:
                    return
                given_back = True
                for kind, name, _ in keys:
                    left = self._counts.pop((kind, name)) - 1
                    if left:
                        self._counts[(kind, name)] = left

        return release


class McpApp:
    """The WSGI application for one Server. Serve it with `python -m mcpserver --http`, or any WSGI server."""

    def __init__(self, server: Server, options: Optional[HttpOptions] = None, **keywords: Any):
        """`options` (or the same names as keywords: HttpOptions(**keywords)) say how it serves; of the server's
        options the app reads max_body_bytes, and host when loopback is not given."""
        self.options = options = given(options, keywords)
        _pypy.warn_if_oversized("a WSGI server")
        mend_master()  # gunicorn --preload: the master loads the app, and its signal queue can hang on PyPy
        self.server = server
        self.path = options.path
        token = options.token or (read_token_file(options.token_file) if options.token_file else None)
        self._token = token.encode() if token else None
        self.oauth = oauth = options.oauth
        self._metadata = protocol.encode(oauth.metadata) if oauth is not None else b""
        if oauth is not None:  # imported here, not per request: only servers that use OAuth pay for it
            from .. import auth

            self._auth_error: type[AuthError] = auth.AuthError
        self.behind_proxy = options.behind_proxy
        self.insecure_no_auth = options.insecure_no_auth
        self.allowed_origins = {origin.rstrip("/") for origin in options.allowed_origins}
        self._cors: Optional[Cors] = Cors(self.allowed_origins, self.path) if self.allowed_origins else None
        self.unix_socket = options.unix_socket is not None  # every peer is on this host, admitted by the file's mode
        self.loopback = loopback = (self.unix_socket or is_loopback(options.host) if options.loopback is None
                                    else options.loopback)
        hosts = options.allowed_hosts  # none named: the loopback names when bound to loopback, else any
        self.allowed_hosts: Optional[set[str]] = (
            {h.lower() for h in hosts} | ({*_LOOPBACK_NAMES} if loopback else set()) if hosts or loopback else None)
        self.max_body_bytes = options.max_body_bytes
        self._listens = _ListenSlots(options.max_listeners_per_peer, options.max_listeners_per_principal)
        self._host = HostWatch(self.shutdown)
        self._rates: Any = None  # mcpserver._ratelimit.Buckets, imported only by a server that limits rates
        if options.rate_limit is not None:
            from .._ratelimit import Buckets, Rate

            self._rates = Buckets(Rate(options.rate_limit, options.burst))
        self.sessions = Sessions(server, read_body=self.read_body, serve_request=self.serve_request,
                                 listen_slot=self.listen_slot, opened=self._session_opened,
                                 lacking_scope=self.lacking_scope)  # LEGACY.md §4
        server.middleware.trace_if_configured("unix" if self.unix_socket else "tcp")
        self.public_metrics = options.public_metrics
        self._serve_probes_and_figures(options)

    def _serve_probes_and_figures(self, options: HttpOptions) -> None:
        """/healthz and /readyz (mcpserver.http._health), /metrics (mcpserver.http._metrics), the Server Card and
        the AI Catalog (mcpserver.http._card), when asked for."""
        self.card = None
        if options.server_card:
            from ._card import ServerCard

            self.card = ServerCard(self.server, self.path, resource=options.oauth.resource if options.oauth else None,
                                   unix_socket=self.unix_socket, static_token=self._token is not None,
                                   behind_proxy=self.behind_proxy, catalog=options.ai_catalog)
        self.health = None
        if options.health:  # the built-in server's loop answers `immediate` paths itself, without a worker
            from ._health import Health

            self.health = Health(self.server, options.oauth, options.log_health)
            self.immediate = self.health.immediate()
        self.metrics = None
        if options.metrics or options.metrics_dir:
            from ._metrics import measure

            self.metrics = measure(self.server, lambda: len(self.sessions.table), options.metrics_dir,
                                   "unix" if self.unix_socket else "tcp")

    def _session_opened(self) -> None:
        if self.metrics is not None:
            self.metrics.session_opened()

    def _origin_allowed(self, origin: str) -> bool:
        if origin.rstrip("/") in self.allowed_origins:
            return True
        if not self.loopback:
            return False
        from urllib.parse import urlsplit  # only when a browser sent an Origin

        parts = urlsplit(origin)
        return parts.scheme in ("http", "https") and is_loopback(parts.hostname or "")

    def _host_allowed(self, host: str) -> bool:
        return self.allowed_hosts is None or host in self.allowed_hosts or (self.loopback and is_loopback(host))

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        started = time.perf_counter()
        if self._cors is not None:  # a browser client's answer says which page may read it
            start_response = self._cors.wrap(environ, start_response)
        try:
            answer: Union[Response, Stream] = self._answer(environ)
        except Refused as refused:
            answer = refused.response
        return answer.send(start_response, lambda status: self._log(environ, status, started))

    def screen(self, environ: dict[str, Any]) -> Optional[tuple[str, list[tuple[str, str]], bytes]]:
        """Every check that needs only the request head, for a server that calls this before it waits for
        the body: None to go on (and read the body), else the (status, headers, body) to answer with."""
        started = time.perf_counter()
        try:
            environ[_SCREENED] = self._admit(environ)
        except Refused as refused:
            self._log(environ, status_line(refused.response.status), started)
            status, headers, body = refused.response.wsgi()
            return status, headers + self._cors.headers(environ) if self._cors is not None else headers, body
        return None

    def shutdown(self) -> None:
        """The server is stopping: open subscriptions/listen streams end with their graceful result."""
        self.server.shutdown()

    def _log(self, environ: dict[str, Any], status: str, started: float) -> None:
        if self.health is not None and environ.get("PATH_INFO") in self.immediate:
            return  # a probe, not a client: Health logs its answers itself, when asked to
        if self.metrics is not None and status[0] in "45":
            self.metrics.refused(status[:3])
        if not access_log.enabled(20):  # --log-level warning: the line's fields are not even gathered
            return
        access_log.info('%s "%s %s" %s %s %.1fms', environ.get("REMOTE_ADDR") or "-",  # "" on a Unix socket
                        printable(environ.get("REQUEST_METHOD")),
                        printable(environ.get("RAW_URI") or environ.get("REQUEST_URI") or environ.get("PATH_INFO")),
                        status[:3], printable(environ.get("HTTP_MCP_METHOD", "-")),
                        (time.perf_counter() - started) * 1000)

    def _answer(self, environ: dict[str, Any]) -> Union[Response, Stream]:
        admitted: Admitted = environ.pop(_SCREENED, None) or self._admit(environ)
        session_id = environ.get("HTTP_MCP_SESSION_ID")
        if session_id is not None:
            return self.sessions.serve(session_id, environ, admitted)
        message = protocol.parse(self.read_body(environ, admitted.length), responses=False)
        if isinstance(message, protocol.Refusal):
            return Response.json(message.reply)
        if not isinstance(message, protocol.Request):
            return Response.json(None)  # a notification: accepted, never answered
        if message.method == "initialize" and opens_legacy(message.method, message.params) and not modern(message):
            return self.sessions.initialize(message, admitted)
        return self.serve_request(message, environ, admitted)





    def _admit(self, environ: dict[str, Any]) -> Admitted:
        """The checks on the head, in order; Refused for the first that fails."""
        path = environ.get("PATH_INFO", "")
        if self.health is not None and path in self.immediate:  # a probe: anyone may ask, nothing is checked
            probed = self.immediate[path](environ.get("REQUEST_METHOD", ""), environ.get("REMOTE_ADDR", "-"))
            raise Refused(Response(int(probed[0][:3]), probed[1], probed[2]))
        scrape = card = False  # a route beside the endpoint: /metrics, the Server Card or the AI Catalog
        if path != self.path:
            scrape = path == METRICS_PATH and self.metrics is not None
            card = self.card is not None and path in self.card.paths
            if not (scrape or card):
                if self.oauth is not None and path in self.oauth.metadata_paths:
                    raise Refused(self._resource_metadata(environ.get("REQUEST_METHOD")))
                raise refused(404, f"Not found: the MCP endpoint is {self.path}")
        host = _host_name(environ.get("HTTP_HOST", "")).lower()
        if not self._host_allowed(host):
            raise refused(403, f"Host {printable(host)!r} is not allowed (DNS rebinding protection)")
        if card:  # public, for any origin (mcpserver.http._card); rate-limited per peer as an anonymous client
            if self._rates is not None:
                self._limit_rate(f"peer {self._peer(environ)}")
            raise Refused(self.card.answer(environ, path))  # type: ignore[union-attr]
        origin = environ.get("HTTP_ORIGIN")
        if origin is not None and not self._origin_allowed(origin):
            raise refused(403, f"Origin {printable(origin)!r} is not allowed")
        method = environ.get("REQUEST_METHOD")
        if scrape:
            raise Refused(self._scraped(environ, method))
        if method == "OPTIONS" and self._cors is not None:  # a browser's preflight comes without credentials
            preflight = self._cors.preflight(environ)
            if preflight is not None:
                raise Refused(preflight)
        if method != "POST" and not (method in ("GET", "DELETE") and "HTTP_MCP_SESSION_ID" in environ):
            raise refused(405, "The MCP endpoint accepts POST (and, in a legacy session, GET and DELETE)",
                           ("Allow", "POST"))
        self._check_proxy(environ)
        principal, principal_key = self._authenticate(environ)
        if self._rates is not None:  # who is counted needs authentication; the body is not waited for
            self._limit_rate(principal_key or f"peer {self._peer(environ)}")
        if method != "POST":  # a session's GET or DELETE: no body
            return Admitted(_accepted(environ.get("HTTP_ACCEPT", "*/*")), 0, principal, principal_key)
        if _media_type(environ.get("CONTENT_TYPE", "")) != "application/json":
            raise refused(415, "Send the JSON-RPC message as application/json")
        accepted = _accepted(environ.get("HTTP_ACCEPT", "*/*"))
        if accepted.isdisjoint(_JSON_ANSWERABLE):
            raise refused(406, "Responses are application/json; accept it")
        return Admitted(accepted, self._declared_length(environ), principal, principal_key)

    def _check_proxy(self, environ: dict[str, Any]) -> None:
        if self.behind_proxy and _last(environ.get("HTTP_X_FORWARDED_PROTO", "")).lower() != "https":
            raise refused(403, "This server is behind a TLS-terminating proxy: requests must come through it, "
                           "with X-Forwarded-Proto: https")

    def _limit_rate(self, key: str) -> None:
        """Refused with 429, Retry-After and a JSON-RPC error saying why, when `key` has no token left."""
        wait = self._rates.take(key)
        if wait:
            from .._ratelimit import rate_limited

            limited = rate_limited(self._rates.rate, wait, "per client")
            headers, body = json_parts(protocol.Refusal(limited).reply)
            retry_after = str(limited.to_error()["data"]["retryAfterSeconds"])
            raise Refused(Response(429, [*headers, ("Retry-After", retry_after)], body))

    def serve_request(self, request: protocol.Request, environ: dict[str, Any],
                      admitted: Admitted) -> Union[Response, Stream]:
        if self.oauth is not None and self.server.scoped:
            lacking = self.lacking_scope(request, admitted)
            if lacking is not None:
                return lacking
        headers = self._mirrored(environ)
        streams = not admitted.accepted.isdisjoint(STREAMED)
        if request.work == protocol.LISTEN:
            if not streams:
                return Response.plain(406, "subscriptions/listen answers with text/event-stream; accept it")
            try:
                release = self.listen_slot(environ, admitted)
            except InternalError as full:
                return Response.json(protocol.Refusal(full, request.id).reply)
            return Stream(self.server, request, headers, environ, admitted.principal, release)
        flight = None
        if request.work == protocol.AUTHOR:
            if request.progress_token is not None and streams:
                return Stream(self.server, request, headers, environ, admitted.principal)
            flight = Flight(principal=admitted.principal)  # no stream: progress cannot be sent, but a hang-up cancels
            on_disconnect = environ.get("mcpserver.on_disconnect")
            if on_disconnect is not None:
                on_disconnect(flight.cancel)
        return Response.json(protocol.dispatch(request, self.server, headers, flight=flight))

    def lacking_scope(self, request: protocol.Request, admitted: Admitted) -> Optional[Response]:
        """403 insufficient_scope when the entry the request calls, reads or gets needs scopes the token lacks,
        its challenge naming every scope the request needs (mcpserver._scopes); None to go on."""
        if self.oauth is None or not self.server.scoped:
            return None
        from .._scopes import needed

        scopes = needed(self.server, request.method, request.params)
        if not scopes or scopes <= admitted.principal.scopes:
            return None
        from ..auth import InsufficientScope

        authenticator = self.oauth.authenticator
        missing = " ".join(sorted(scopes - admitted.principal.scopes))
        refusal = InsufficientScope(f"{request.method} needs the scope {missing}, which the token lacks",
                                    scope=" ".join(sorted(scopes | authenticator.required_scopes)))
        return Response.plain(403, f"Forbidden: {refusal.description}", ("WWW-Authenticate",
                                                                        authenticator.challenge(refusal)))

    def listen_slot(self, environ: dict[str, Any], admitted: Admitted) -> Callable[[], None]:
        """A slot for one more open stream (listen, a session's GET), counted against its peer's and its
        principal's bounds, and the callable that gives it back; InternalError (503) past a bound. Under a
        WSGI server other than the built-in one (which calls shutdown() itself), an open stream has the server
        watched for a stop (mcpserver.http._host)."""
        release = self._listens.take(self._peer(environ), admitted.principal_key)
        if environ.get("mcpserver.push"):
            return release
        closed = self._host.opened()

        def both() -> None:
            release()
            closed()

        return both

    def _peer(self, environ: dict[str, Any]) -> str:
        """Who a per-peer bound counts: the address the nearest proxy saw when behind one, else REMOTE_ADDR."""
        forwarded = _last(environ.get("HTTP_X_FORWARDED_FOR", "")) if self.behind_proxy else ""
        return forwarded or str(environ.get("REMOTE_ADDR", ""))

    def _authenticate(self, environ: dict[str, Any]) -> tuple[Any, Optional[str]]:
        """(the principal: None unless OAuth authenticated one, the key its listen streams are counted by);
        Refused when the request may not pass."""
        if self.oauth is not None:
            principal = self._authenticate_oauth(environ)
            return principal, f"subject {principal.subject}" if principal.subject else f"client {principal.client_id}"
        if self._token is None:
            if self.insecure_no_auth or self.unix_socket or _local_peer(environ):
                return None, None
            raise refused(403, "This server has no token, so it serves loopback clients only; set "
                           f"{TOKEN_ENVIRONMENT} (or insecure_no_auth=True if something in front authenticates)")
        given = environ.get("HTTP_AUTHORIZATION", "")
        scheme, _, credential = given.partition(" ")
        import hmac

        if scheme.lower() != "bearer" or not hmac.compare_digest(credential.strip().encode(), self._token):
            challenge = 'Bearer realm="mcp", error="invalid_token"' if credential.strip() else 'Bearer realm="mcp"'
            raise refused(401, "A valid bearer token is required", ("WWW-Authenticate", challenge))
        return None, _STATIC_TOKEN

    def _authenticate_oauth(self, environ: dict[str, Any]) -> Any:
        if not (self.behind_proxy or environ.get("wsgi.url_scheme") == "https" or self.unix_socket
                or _local_peer(environ)):
            raise refused(403, "OAuth bearer tokens are accepted over HTTPS only (serve with --tls-cert/--tls-key, "
                           "or say --behind-proxy when a proxy terminates TLS)")
        assert self.oauth is not None
        try:
            return self.oauth.authenticate(environ.get("HTTP_AUTHORIZATION"))
        except self._auth_error as denied:
            raise refused(denied.status, denied.description, *denied.headers()) from None

    def _scraped(self, environ: dict[str, Any], method: Any) -> Response:
        """GET /metrics: authenticated as the endpoint is (Refused if not), unless the metrics are public."""
        assert self.metrics is not None
        if method not in ("GET", "HEAD"):
            return Response.plain(405, "The metrics are read with GET", ("Allow", "GET, HEAD"))
        if not self.public_metrics:
            self._check_proxy(environ)
            self._authenticate(environ)
        from ._metrics import CONTENT_TYPE

        body = self.metrics.render()
        return Response(200, [("Content-Type", CONTENT_TYPE), ("Content-Length", str(len(body))),
                              ("Cache-Control", "no-store")], body if method == "GET" else b"")

    def _resource_metadata(self, method: Any) -> Response:
        """The RFC 9728 document: public, so any origin may read it (browser clients discover with it)."""
        cors = [("Access-Control-Allow-Origin", "*")]
        if method == "OPTIONS":
            return Response(204, [*cors, ("Access-Control-Allow-Methods", "GET"), ("Access-Control-Allow-Headers", "*"),
                                  ("Content-Length", "0")])
        if method not in ("GET", "HEAD"):
            return Response.plain(405, "The resource metadata is read with GET", ("Allow", "GET, HEAD, OPTIONS"))
        metadata = self._metadata
        if self.server.scoped:  # the scopes of every entry too: a client may ask for any of them (RFC 9728 §2)
            from .._scopes import every_scope

            assert self.oauth is not None
            supported = every_scope(self.server).union(self.oauth.metadata.get("scopes_supported", ()))
            metadata = protocol.encode({**self.oauth.metadata, "scopes_supported": sorted(supported)})
        return Response(200, [("Content-Type", "application/json"), ("Content-Length", str(len(metadata))),
                              ("Cache-Control", "public, max-age=300"), *cors], metadata)

    @staticmethod
    def _mirrored(environ: dict[str, Any]) -> dict[str, str]:
        """The request's header fields by lower-case name, for the core's header rules."""
        exact = environ.get("mcpserver.headers")
        if exact is None:
            return _FoldedHeaders({key[5:].lower().replace("_", "-"): value for key, value in environ.items()
                                   if key.startswith("HTTP_")})
        mirrored: dict[str, str] = {}
        for name, value in exact:
            key = name.lower()
            mirrored[key] = f"{mirrored[key]},{value}" if key in mirrored else value
        return mirrored

    def _declared_length(self, environ: dict[str, Any]) -> int:
        """The Content-Length, -1 when none was sent; Refused when it is not a number or too large."""
        declared = environ.get("CONTENT_LENGTH") or ""
        if declared and not (declared.isascii() and declared.isdigit()):
            raise refused(400, "Content-Length is not a number of bytes")
        length = int(declared) if declared else -1
        if length > self.max_body_bytes:
            raise self._too_large()
        return length

    def read_body(self, environ: dict[str, Any], length: int) -> bytes:
        stream = environ["wsgi.input"]
        body = stream.read(length) if length >= 0 else stream.read(self.max_body_bytes + 1)
        if len(body) > self.max_body_bytes:
            raise self._too_large()
        if length >= 0 and len(body) < length:
            raise refused(400, "The body ended before Content-Length bytes")
        return bytes(body)

    def _too_large(self) -> Refused:
        return refused(413, f"The body is larger than {self.max_body_bytes} bytes")


class _FoldedHeaders(dict):  # type: ignore[type-arg]
    """Header fields from CGI-style HTTP_* keys, where "-" and "_" are one character: a name is looked
    up folded the same way, so an Mcp-Param name with "_" is still found."""

    def get(self, key: str, default: Any = None) -> Any:
        return super().get(key.replace("_", "-"), default)






def _local_peer(environ: dict[str, Any]) -> bool:
    """Whether the peer is on this host: on loopback, or on a Unix socket of another WSGI server (gunicorn's
    --bind unix:PATH, which hands the app the connection's socket)."""
    if is_loopback(str(environ.get("REMOTE_ADDR", ""))):
        return True
    connection = environ.get("gunicorn.socket")  # the WSGI server's own key: no client can set it
    if connection is None:
        return False
    import socket

    return getattr(connection, "family", None) == getattr(socket, "AF_UNIX", None)


def _last(value: str) -> str:
    """The last element of a comma-separated header: the one the nearest proxy added."""
    return value.rsplit(",", 1)[-1].strip()




def create_app(target: Union[Server, str], options: Optional[HttpOptions] = None, *, task_store: Any = None,
               max_listen_seconds: Optional[float] = None, listen: bool = True, **keywords: Any) -> McpApp:
    """A WSGI app for a Server or a TARGET (as on the command line). `options` are HttpOptions, or give their
    names as keywords (token, token_file, path, allowed_origins, allowed_hosts, loopback, oauth, metrics, health,
    rate_limit...; the server's own ones, max_connections and the like, are a WSGI server's to set). `task_store` is
    where task tools keep their tasks (as --store: the path of an SQLite file, which every worker on the host
    shares, or a postgresql:// URL; each worker opens it when it first needs it). `metrics=True` serves GET
    /metrics; under several workers give them `metrics_dir` (or $MCPSERVER_METRICS_DIR), an empty directory they
    share, so that any of them answers for all. `max_listen_seconds` and `listen=False` are --max-listen-seconds
    and --no-listen.

    The token is `token`, else the first line of `token_file` or $MCPSERVER_TOKEN_FILE, else
    $MCPSERVER_TOKEN. Without any, only loopback peers are served unless insecure_no_auth=True.
    With `oauth=ResourceServer(...)` tokens are OAuth access tokens instead (docs/guides/auth.md).

        gunicorn -w 4 'mcpserver.http:create_app("server/examples/demo.py")'
    """
    options = given(options, keywords)
    if isinstance(target, str):
        from .._loader import load_target

        target = load_target(target)
    if task_store is not None:
        target.task_store = task_store
    if target.task_store is not None:  # refused now if it cannot serve; and this app's changes reach the bus
        from ..store import shared

        shared(target)
    if max_listen_seconds is not None:
        if not 0 < max_listen_seconds < float("inf"):
            raise ConfigError(f"max_listen_seconds must be a positive number of seconds, not {max_listen_seconds!r}")
        target.subscriptions.max_seconds = max_listen_seconds
    target.subscriptions.enabled = target.subscriptions.enabled and listen
    environ_dir = os.environ.get(_environment.METRICS_DIR) if options.metrics else None
    return McpApp(target, replace(options, token=None if options.oauth is not None else resolve_token(
        options.token, options.token_file), token_file=None, metrics_dir=options.metrics_dir or environ_dir))

