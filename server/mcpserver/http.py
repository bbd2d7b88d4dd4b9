"""The Streamable HTTP binding: a WSGI application for one Server (WIRE.md §16, in the order of §17).

Serve it with `python -m mcpserver --http` (the built-in server, mcpserver._httpd) or any WSGI
server (gunicorn, uWSGI, waitress): `create_app(TARGET)`.

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
- OAuth (`oauth`, an mcpserver.auth.ResourceServer): its RFC 9728 metadata is served, public, at
  its well-known paths; every request's token goes through it (401/403/503 with its
  WWW-Authenticate), over HTTPS only unless the peer is on loopback; the authenticated principal
  reaches the tools through the request's Flight, the token never does. `behind_proxy`: a
  TLS-terminating proxy is in front, so every request must say X-Forwarded-Proto: https (the
  header is read only then).
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

from . import _environment, _log, protocol
from ._context import Flight
from ._server import Server
from ._wire import status_line
from .errors import ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: it costs a stdio server's start-up
    from typing import Any, Callable, Iterable, Iterator, Optional, Union

    from .auth import AuthError
    StartResponse = Callable[..., Any]

__all__ = ["McpApp", "create_app", "read_token_file"]

log = _log.get("mcpserver.http")
access_log = _log.get("mcpserver.http.access")

DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024  # a 5 MB payload stays under it even when JSON escaping grows it 6x
TOKEN_ENVIRONMENT = _environment.TOKEN
TOKEN_FILE_ENVIRONMENT = _environment.TOKEN_FILE
_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]", "::1")

Response = tuple[str, list[tuple[str, str]], bytes]


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


def _printable(text: Any) -> str:
    """What a client sent, safe to put in one log line: control characters and quotes escaped."""
    return repr(str(text))[1:-1]


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


class McpApp:
    """The WSGI application for one Server. Serve it with `python -m mcpserver --http`, or any WSGI server."""

    def __init__(self, server: Server, *, path: str = "/mcp", token: Optional[str] = None,
                 allowed_origins: Iterable[str] = (), allowed_hosts: Optional[Iterable[str]] = None,
                 loopback: bool = True, insecure_no_auth: bool = False, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
                 oauth: Any = None, behind_proxy: bool = False):
        """`allowed_hosts` None means: the loopback names when `loopback`, anything otherwise."""
        if not path.startswith("/"):
            raise ConfigError(f"the endpoint path must start with '/', not {path!r}")
        if oauth is not None and token:
            raise ConfigError("give a static token or OAuth, not both (a ResourceServer can take "
                              "validator=StaticTokens(...) for tokens of your own)")
        self.server = server
        self.path = path
        self._token = token.encode() if token else None
        self.oauth = oauth
        self._metadata = protocol.encode(oauth.metadata) if oauth is not None else b""
        if oauth is not None:  # imported here, not per request: only servers that use OAuth pay for it
            from . import auth

            self._auth_error: type[AuthError] = auth.AuthError
        self.behind_proxy = behind_proxy
        self.insecure_no_auth = insecure_no_auth
        self.allowed_origins = {origin.rstrip("/") for origin in allowed_origins}
        self.loopback = loopback
        hosts = list(allowed_hosts or ())
        self.allowed_hosts: Optional[set[str]] = (
            {h.lower() for h in hosts} | ({*_LOOPBACK_NAMES} if loopback else set())
            if hosts or loopback else None)
        self.max_body_bytes = max_body_bytes

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
        answer = self._respond(environ)
        if isinstance(answer, _Stream):
            return answer.run(start_response, lambda status: self._log(environ, status, started))
        status, headers, body = answer
        start_response(status, headers)
        self._log(environ, status, started)
        return [body] if body else []

    def shutdown(self) -> None:
        """The server is stopping: open subscriptions/listen streams end with their graceful result."""
        self.server.shutdown()

    def _log(self, environ: dict[str, Any], status: str, started: float) -> None:
        access_log.info('%s "%s %s" %s %s %.1fms', environ.get("REMOTE_ADDR", "-"),
                        _printable(environ.get("REQUEST_METHOD")),
                        _printable(environ.get("RAW_URI") or environ.get("REQUEST_URI") or environ.get("PATH_INFO")),
                        status[:3], _printable(environ.get("HTTP_MCP_METHOD", "-")),
                        (time.perf_counter() - started) * 1000)

    def _respond(self, environ: dict[str, Any]) -> Union[Response, _Stream]:
        path = environ.get("PATH_INFO", "")
        if path != self.path:
            if self.oauth is not None and path in self.oauth.metadata_paths:
                return self._resource_metadata(environ.get("REQUEST_METHOD"))
            return _plain("404 Not Found", f"Not found: the MCP endpoint is {self.path}")
        host = _host_name(environ.get("HTTP_HOST", "")).lower()
        if not self._host_allowed(host):
            return _plain("403 Forbidden", f"Host {_printable(host)!r} is not allowed (DNS rebinding protection)")
        origin = environ.get("HTTP_ORIGIN")
        if origin is not None and not self._origin_allowed(origin):
            return _plain("403 Forbidden", f"Origin {_printable(origin)!r} is not allowed")
        if environ.get("REQUEST_METHOD") != "POST":
            status, headers, body = _plain("405 Method Not Allowed", "The MCP endpoint accepts POST only")
            return status, [*headers, ("Allow", "POST")], body
        if self.behind_proxy and _last(environ.get("HTTP_X_FORWARDED_PROTO", "")).lower() != "https":
            return _plain("403 Forbidden", "This server is behind a TLS-terminating proxy: requests must come "
                          "through it, with X-Forwarded-Proto: https")
        refused, principal = self._authenticate(environ)
        if refused is not None:
            return refused
        if _media_type(environ.get("CONTENT_TYPE", "")) != "application/json":
            return _plain("415 Unsupported Media Type", "Send the JSON-RPC message as application/json")
        accepted = {_media_type(t) for t in environ.get("HTTP_ACCEPT", "*/*").split(",")}
        if not accepted & {"application/json", "*/*", "application/*", ""}:
            return _plain("406 Not Acceptable", "Responses are application/json; accept it")
        body_or_error = self._read_body(environ)
        if isinstance(body_or_error, tuple):
            return body_or_error
        message = protocol.parse(body_or_error, responses=False)  # the server sends no requests of its own
        if isinstance(message, protocol.Refusal):
            return _json_response(message.reply)
        if not isinstance(message, protocol.Request):
            return _json_response(None)  # a notification: accepted, never answered
        return self._request(message, environ, accepted, principal)

    def _request(self, request: protocol.Request, environ: dict[str, Any], accepted: set[str],
                 principal: Any) -> Union[Response, _Stream]:
        headers = self._mirrored(environ)
        streams = bool(accepted & {"text/event-stream", "*/*"})
        on_disconnect = environ.get("mcpserver.on_disconnect")
        if request.work == protocol.LISTEN:
            if not streams:
                return _plain("406 Not Acceptable", "subscriptions/listen answers with text/event-stream; accept it")
            return _Stream(self.server, request, headers, on_disconnect, principal)
        flight = None
        if request.work == protocol.AUTHOR:
            if request.progress_token is not None and streams:
                return _Stream(self.server, request, headers, on_disconnect, principal)
            flight = Flight(principal=principal)  # no stream: progress cannot be sent, but a hang-up cancels
            if on_disconnect is not None:
                on_disconnect(flight.cancel)
        return _json_response(protocol.dispatch(request, self.server, headers, flight=flight))

    def _authenticate(self, environ: dict[str, Any]) -> tuple[Optional[Response], Any]:
        """(a refusal, None) or (None, the principal: None unless OAuth authenticated one)."""
        if self.oauth is not None:
            return self._authenticate_oauth(environ)
        if self._token is None:
            if self.insecure_no_auth or is_loopback(str(environ.get("REMOTE_ADDR", ""))):
                return None, None
            return _plain("403 Forbidden", "This server has no token, so it serves loopback clients only; set "
                          f"{TOKEN_ENVIRONMENT} (or insecure_no_auth=True if something in front authenticates)"), None
        given = environ.get("HTTP_AUTHORIZATION", "")
        scheme, _, credential = given.partition(" ")
        import hmac

        if scheme.lower() != "bearer" or not hmac.compare_digest(credential.strip().encode(), self._token):
            status, headers, body = _plain("401 Unauthorized", "A valid bearer token is required")
            challenge = 'Bearer realm="mcp", error="invalid_token"' if credential.strip() else 'Bearer realm="mcp"'
            return (status, [*headers, ("WWW-Authenticate", challenge)], body), None
        return None, None

    def _authenticate_oauth(self, environ: dict[str, Any]) -> tuple[Optional[Response], Any]:
        if not (self.behind_proxy or environ.get("wsgi.url_scheme") == "https"
                or is_loopback(str(environ.get("REMOTE_ADDR", "")))):
            return _plain("403 Forbidden", "OAuth bearer tokens are accepted over HTTPS only (serve with "
                          "--tls-cert/--tls-key, or say --behind-proxy when a proxy terminates TLS)"), None
        try:
            return None, self.oauth.authenticate(environ.get("HTTP_AUTHORIZATION"))
        except self._auth_error as refused:
            status, headers, body = _plain(status_line(refused.status), refused.description)
            return (status, [*headers, *refused.headers()], body), None

    def _resource_metadata(self, method: Any) -> Response:
        """The RFC 9728 document: public, so any origin may read it (browser clients discover with it)."""
        cors = [("Access-Control-Allow-Origin", "*")]
        if method == "OPTIONS":
            return "204 No Content", [*cors, ("Access-Control-Allow-Methods", "GET"),
                                      ("Access-Control-Allow-Headers", "*"), ("Content-Length", "0")], b""
        if method not in ("GET", "HEAD"):
            status, headers, body = _plain("405 Method Not Allowed", "The resource metadata is read with GET")
            return status, [*headers, ("Allow", "GET, HEAD, OPTIONS")], body
        return "200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(self._metadata))),
                          ("Cache-Control", "public, max-age=300"), *cors], self._metadata

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

    def _read_body(self, environ: dict[str, Any]) -> Union[bytes, Response]:
        declared = environ.get("CONTENT_LENGTH") or ""
        if declared and not (declared.isascii() and declared.isdigit()):
            return _plain("400 Bad Request", "Content-Length is not a number of bytes")
        length = int(declared) if declared else -1
        if length > self.max_body_bytes:
            return self._too_large()
        stream = environ["wsgi.input"]
        body = stream.read(length) if length >= 0 else stream.read(self.max_body_bytes + 1)
        if len(body) > self.max_body_bytes:
            return self._too_large()
        if length >= 0 and len(body) < length:
            return _plain("400 Bad Request", "The body ended before Content-Length bytes")
        return bytes(body)

    def _too_large(self) -> Response:
        return _plain("413 Content Too Large", f"The body is larger than {self.max_body_bytes} bytes")


class _FoldedHeaders(dict):  # type: ignore[type-arg]
    """Header fields from CGI-style HTTP_* keys, where "-" and "_" are one character: a name is looked
    up folded the same way, so an Mcp-Param name with "_" is still found."""

    def get(self, key: str, default: Any = None) -> Any:
        return super().get(key.replace("_", "-"), default)


SSE_KEEPALIVE_SECONDS = 15.0  # a comment this often on a quiet stream: proxies keep it, a gone client is noticed
SSE_BACKLOG = 256  # notifications a stream may hold for a slow client before it keeps only the latest of each
_SSE_HEADERS = [("Content-Type", "text/event-stream"), ("Cache-Control", "no-store"), ("X-Accel-Buffering", "no")]


def _json_response(reply: Optional[protocol.Reply]) -> Response:
    """A reply as HTTP: its response as JSON with the status the error carries; 202 with no body for a
    notification (None), and for a request cancelled because its client went away (no one reads it)."""
    if reply is None or reply.response is None:
        return "202 Accepted", [("Content-Type", "text/plain"), ("Content-Length", "0")], b""
    data = protocol.encode(reply.response)
    return status_line(reply.http_status), [
        ("Content-Type", "application/json"), ("Content-Length", str(len(data))), ("Cache-Control", "no-store")
    ], data


def _last(value: str) -> str:
    """The last element of a comma-separated header: the one the nearest proxy added."""
    return value.rsplit(",", 1)[-1].strip()


class _Stream:
    """A request answered as an SSE stream: its notifications as they happen, then its response.

    Progress streams and subscriptions/listen use it. The request runs on a thread of its own. The
    response commits to text/event-stream with the first notification (or after
    SSE_KEEPALIVE_SECONDS of silence); a reply that comes first goes out as plain JSON with its own
    status, so 400 and 404 errors are never inside a stream (WIRE.md §16.7). Frames are
    `data: <one-line JSON>` with no event ids. Closing the stream cancels the request.
    Past SSE_BACKLOG notifications not yet written, they are coalesced (the latest progress, one
    list_changed per list, one updated per URI): a client that never reads costs bounded memory,
    and a tool that reports progress faster than the stream can be written (a tight loop can
    report 500,000 a second; measured in docs/performance.md) sends its latest state, not a queue.
    """

    def __init__(self, server: Server, request: protocol.Request, headers: dict[str, str],
                 on_disconnect: Optional[Callable[[Callable[[], None]], None]], principal: Any = None):
        self._changed = threading.Condition()
        self._pending: list[dict[str, Any]] = []
        self._compact_at = SSE_BACKLOG
        self._reply: Optional[protocol.Reply] = None
        self._over = False  # answered, or cancelled
        self.flight = Flight(self._note, principal)
        self.flight.on_cancel(self._end)
        if on_disconnect is not None:
            on_disconnect(self.flight.cancel)

        def work() -> None:
            reply = protocol.dispatch(request, server, headers, flight=self.flight)
            if reply.listening is not None:  # open until cancelled or the server stops
                reply.listening.ended.wait()
                reply = reply.listening.close()
            if not self.flight.finish(lambda: self._end(reply)):
                self._end()

        threading.Thread(target=work, name="mcpserver-stream", daemon=True).start()

    def _note(self, note: dict[str, Any]) -> None:
        with self._changed:
            self._pending.append(note)
            if len(self._pending) > self._compact_at:  # the client is not keeping up: keep the latest of each kind
                latest: dict[tuple[Any, ...], dict[str, Any]] = {}
                for pending in self._pending:
                    params = pending.get("params") or {}
                    latest[(pending.get("method"), params.get("uri"), params.get("progressToken"))] = pending
                self._pending = list(latest.values())
                self._compact_at = max(SSE_BACKLOG, 2 * len(self._pending))  # amortised: never quadratic
            self._changed.notify()

    def _end(self, reply: Optional[protocol.Reply] = None) -> None:
        with self._changed:
            self._reply, self._over = reply, True
            self._changed.notify()

    def _next(self) -> tuple[list[dict[str, Any]], Optional[protocol.Reply], bool]:
        """Wait for something to send: pending notifications, and whether the stream is over (with its reply)."""
        with self._changed:
            if not (self._pending or self._over):
                self._changed.wait(SSE_KEEPALIVE_SECONDS)
            notes, self._pending = self._pending, []
            return notes, self._reply, self._over

    def run(self, start_response: StartResponse, logged: Callable[[str], None]) -> Iterator[bytes]:
        committed = False
        try:
            while True:
                notes, reply, over = self._next()
                if not committed and over and not notes:  # answered before any notification: plain JSON
                    status, headers, body = _json_response(reply)
                    start_response(status, headers)
                    logged(status)
                    yield body
                    return
                if not committed:
                    start_response("200 OK", _SSE_HEADERS)
                    logged("200 (stream)")
                    committed = True
                frames = [b"data: " + protocol.encode(note) + b"\n\n" for note in notes]
                if over and reply is not None and reply.response is not None:
                    frames.append(b"data: " + protocol.encode(reply.response) + b"\n\n")
                yield b"".join(frames) or b": keep-alive\n\n"
                if over:
                    return
        finally:
            self.flight.cancel()  # a no-op once answered; else the client closed the stream: stop the request


def _plain(status: str, message: str) -> Response:
    data = (message + "\n").encode()
    return status, [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(data)))], data


def create_app(target: Union[Server, str], *, token_file: Optional[str] = None, **options: Any) -> McpApp:
    """A WSGI app for a Server or a TARGET (as on the command line).

    The token defaults to the first line of `token_file` or $MCPSERVER_TOKEN_FILE, else to
    $MCPSERVER_TOKEN. Without any, only loopback peers are served unless insecure_no_auth=True.
    With `oauth=ResourceServer(...)` tokens are OAuth access tokens instead (docs/auth.md).

        gunicorn -w 4 'mcpserver.http:create_app("server/examples/demo.py")'
    """
    if isinstance(target, str):
        from ._loader import load_target

        target = load_target(target)
    token_file = token_file or os.environ.get(TOKEN_FILE_ENVIRONMENT)
    if "token" not in options and options.get("oauth") is None:
        options["token"] = read_token_file(token_file) if token_file else os.environ.get(TOKEN_ENVIRONMENT) or None
    return McpApp(target, **options)
