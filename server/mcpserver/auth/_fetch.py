"""Fetching from the authorization server: JSON over urllib with a deadline for the whole request, a size cap, no
redirects, and https required except on loopback; and discovering its metadata (RFC 8414, OpenID Connect)."""


from __future__ import annotations

import functools
import http.client
import ipaddress
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Callable, Mapping, Optional

from ._jose import JoseError, json_object
from ._principal import DEFAULT_TIMEOUT, MAX_DOCUMENT_BYTES, AuthUnavailable, _shown

# --- fetching from the authorization server --------------------------------------------------------------------


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # a redirect could lead from https to http, or to another host: answer with the 3xx instead


class _Deadline:
    """One request's deadline, for all of it: connect, TLS handshake, request, headers and body. urllib's
    timeout is per socket operation, so a server sending a byte a second would never reach it. At the
    deadline the connection's socket is shut down, which ends whatever read or write is blocked on it.
    (Name resolution comes before any socket; the system resolver's own timeouts bound it.)"""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.expired = False
        self._ends = time.monotonic() + seconds
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def connect(self, address: tuple[str, int], timeout: Any = None, source_address: Any = None) -> socket.socket:
        """socket.create_connection, watched, with what is left of the deadline instead of `timeout`."""
        sock = socket.create_connection(address, max(self._ends - time.monotonic(), 0.001), source_address)
        with self._lock:
            # A duplicate, so that what the deadline shuts down is never a descriptor the connection has
            # closed meanwhile and the system has given to something else.
            self._sockets.append(sock.dup())
        if self.expired:
            sock.shutdown(socket.SHUT_RDWR)
        return sock

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:  # already closed by the other side
                    pass

    def close(self) -> None:
        self._timer.cancel()
        with self._lock:
            for sock in self._sockets:
                sock.close()
            self._sockets.clear()


class _Watched(http.client.HTTPConnection):
    """A connection whose socket comes from its request's deadline (HTTPSConnection wraps that same socket,
    so its TLS handshake is watched too)."""

    def __init__(self, *args: Any, deadline: _Deadline, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._create_connection = deadline.connect


class _HttpHandler(urllib.request.HTTPHandler):
    def __init__(self, deadline: _Deadline):
        super().__init__()
        self.deadline = deadline

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(functools.partial(_Watched, deadline=self.deadline), req)


_HANDLERS: list[Callable[[_Deadline], urllib.request.BaseHandler]] = [_HttpHandler]
if hasattr(http.client, "HTTPSConnection"):  # not in a Python built without _ssl

    class _WatchedTls(_Watched, http.client.HTTPSConnection):
        pass

    class _HttpsHandler(urllib.request.HTTPSHandler):
        def __init__(self, deadline: _Deadline):
            super().__init__()
            self.deadline = deadline

        def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
            return self.do_open(functools.partial(_WatchedTls, deadline=self.deadline), req)

    _HANDLERS.append(_HttpsHandler)


def _check_url(url: str, what: str) -> str:
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if parts.scheme == "https" and host:
        return url
    if parts.scheme == "http" and _is_loopback(host):
        return url
    raise ValueError(f"the {what} must be an https URL (http only on loopback): {url!r}")


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def fetch_json(url: str, *, timeout: float = DEFAULT_TIMEOUT, data: Optional[bytes] = None,
               headers: Optional[Mapping[str, str]] = None) -> dict[str, Any]:
    """GET (or POST `data`) a JSON object, the whole exchange within `timeout` seconds; AuthUnavailable
    for anything but a 200 JSON object."""
    request = urllib.request.Request(url, data=data, headers={"Accept": "application/json", **(headers or {})})
    deadline = _Deadline(timeout)
    try:
        body = _read(request, deadline)
    except (OSError, ValueError, http.client.HTTPException) as error:  # unreachable, refused, broken HTTP
        reason = f"no answer within {timeout:g} s" if deadline.expired else str(error) or type(error).__name__
        raise AuthUnavailable(f"the authorization server could not be reached at {url}: {reason}") from None
    finally:
        deadline.close()
    try:
        return json_object(body, f"document at {url}")
    except JoseError as error:
        raise AuthUnavailable(str(error)) from None


def _read(request: urllib.request.Request, deadline: _Deadline) -> bytes:
    """The body of a 200 answer to `request`: AuthUnavailable for another status or a body too large."""
    handlers = [make(deadline) for make in _HANDLERS]
    try:
        with urllib.request.build_opener(_NoRedirect, *handlers).open(request, timeout=deadline.seconds) as response:
            body: bytes = response.read(MAX_DOCUMENT_BYTES + 1)
            if len(body) > MAX_DOCUMENT_BYTES:
                raise AuthUnavailable(f"the document at {request.full_url} is larger than {MAX_DOCUMENT_BYTES} bytes")
            if response.length:  # Content-Length promised more than arrived
                raise http.client.IncompleteRead(body, response.length)
    except urllib.error.HTTPError as error:
        error.close()
        refused = AuthUnavailable(f"the authorization server answered {error.code} at {request.full_url}")
        refused.upstream_status = error.code
        raise refused from None
    if deadline.expired:  # a body without Content-Length, cut short by the deadline
        raise TimeoutError
    return body


Fetch = Callable[..., dict[str, Any]]


def metadata_urls(issuer: str) -> tuple[str, str]:
    """Where an issuer's metadata lives: RFC 8414 §3.1 inserts the well-known path before the issuer's
    path; OpenID Connect Discovery §4 appends it."""
    parts = urllib.parse.urlsplit(issuer)
    path = parts.path.rstrip("/")
    oauth = urllib.parse.urlunsplit((parts.scheme, parts.netloc, "/.well-known/oauth-authorization-server" + path,
                                     "", ""))
    return oauth, f"{issuer.rstrip('/')}/.well-known/openid-configuration"


def discover_authorization_server(issuer: str, *, timeout: float = DEFAULT_TIMEOUT,
                                  fetch: Fetch = fetch_json) -> dict[str, Any]:
    """The authorization server's metadata (RFC 8414, else OpenID Connect Discovery). Its `issuer` must be
    exactly the one asked for (RFC 8414 §3.3), or a token signed by another tenant's keys could pass."""
    _check_url(issuer, "issuer")
    failures = []
    for url in metadata_urls(issuer):
        try:
            document = fetch(url, timeout=timeout)
        except AuthUnavailable as error:
            failures.append(error.description)
            continue
        if document.get("issuer") != issuer:
            raise AuthUnavailable(f"the metadata at {url} is for issuer {_shown(document.get('issuer'))}, "
                                  f"not {issuer!r}")
        return document
    raise AuthUnavailable("no authorization server metadata found: " + "; ".join(failures))


