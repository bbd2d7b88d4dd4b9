"""Bearer-token authentication for the HTTP transport: the OAuth 2.1 resource-server side of MCP.

    from mcpserver.auth import AuthError, Authenticator, JwtValidator, resource_metadata_url

    resource = "https://mcp.example.com/mcp"
    auth = Authenticator(JwtValidator(issuer="https://auth.example.com", audience=resource),
                         resource_metadata_url=resource_metadata_url(resource), required_scopes=["mcp"])
    try:
        principal = auth.authenticate(environ.get("HTTP_AUTHORIZATION"))   # per request
    except AuthError as refused:
        status, headers, body = refused.status, refused.headers(), refused.description

Rules of this module:
- A validator is any callable `token -> Principal or None` (None: not a token it knows). It raises
  InvalidToken for a token it refuses and AuthUnavailable when it cannot decide (the authorization
  server is down). StaticTokens, JwtValidator and IntrospectionValidator are the built-in ones.
- The Authenticator caches what validators decide, by the SHA-256 of the token, until the token
  expires (at most max_cache_seconds), so a request with a known token costs one dictionary lookup.
  Refusals are cached briefly in a separate, smaller table, so a flood of bad tokens can neither
  evict good ones nor make the authorization server do the work again and again.
- Every refusal is an AuthError carrying its HTTP status and, from the Authenticator, the full
  WWW-Authenticate value (RFC 6750 §3, RFC 9728 §5.1): 401 invalid_token for a bad token, 401 with no
  error for a missing one, 403 insufficient_scope, 400 invalid_request, 503 when the server cannot tell.
- Nothing in a token says how to check it: issuer, audience, algorithms and keys come from
  configuration and the authorization server's metadata. Network I/O is urllib with a deadline for
  the whole request, a size cap, no redirects, and https required except on loopback; no token check
  waits on a fetch it does not need (see _KeyCache), and at most a few wait on introspection.
- Thread-safe: caches are read without a lock (a dict lookup is atomic) and written under one.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import http.client
import ipaddress
import math
import socket
import threading
import time
import types
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence, Union

from ._jose import JoseError, KeySet, UnknownKey, json_object, parse_compact, parse_jwks, verify_jws

__all__ = [
    "AuthError",
    "AuthUnavailable",
    "Authenticator",
    "InsufficientScope",
    "IntrospectionValidator",
    "InvalidRequest",
    "InvalidToken",
    "JwtValidator",
    "MissingToken",
    "Principal",
    "ResourceServer",
    "StaticTokens",
    "Validator",
    "bearer_token",
    "canonical_resource",
    "check_claims",
    "discover_authorization_server",
    "resource_metadata",
    "resource_metadata_paths",
    "resource_metadata_url",
    "www_authenticate",
]

DEFAULT_LEEWAY = 60.0  # seconds of clock skew allowed on exp and nbf
DEFAULT_CACHE_SIZE = 10_000  # validated tokens kept
DEFAULT_MAX_CACHE_SECONDS = 3600.0  # a token without exp, or with a far one, is checked again after this
DEFAULT_REFUSAL_CACHE_SIZE = 1_000
DEFAULT_REFUSAL_SECONDS = 10.0
DEFAULT_REFRESH_FLOOR = 60.0  # the key set is fetched again for an unknown kid at most this often
DEFAULT_JWKS_MAX_AGE = 3600.0  # and in any case after this
DEFAULT_TIMEOUT = 5.0  # seconds for one request to the authorization server, all of it
MAX_DOCUMENT_BYTES = 1024 * 1024  # metadata, key set, introspection response
MAX_AUTHORIZATION_CHARS = 16 * 1024 + 64
RETRY_AFTER_SECONDS = 5
DEFAULT_MAX_INTROSPECTIONS = 8  # tokens being introspected at once; more are 503 at once
MAX_TIME = 2**53  # exp, nbf: seconds either side of the epoch


def _is_token_text(text: str) -> bool:
    """Visible ASCII without spaces. RFC 6750 §2.1 allows only the b64token characters; any visible
    ASCII is accepted, as static tokens chosen by hand often have others, and a token is only ever
    hashed, never parsed or echoed. (str methods, not a set of characters: this runs per request.)"""
    return text.isascii() and text.isprintable() and " " not in text


# --- the principal and the refusals -----------------------------------------------------------------------


@dataclass(frozen=True)
class Principal:
    """Who a valid token speaks for. Tools see this, never the token."""

    subject: Optional[str]
    client_id: Optional[str] = None
    scopes: frozenset[str] = frozenset()
    expires_at: Optional[float] = None  # seconds since the epoch; None: the token does not expire
    claims: Mapping[str, Any] = field(default_factory=lambda: types.MappingProxyType({}), compare=False)

    def has_scopes(self, *scopes: str) -> bool:
        return self.scopes.issuperset(scopes)

    @classmethod
    def from_claims(cls, claims: Mapping[str, Any]) -> Principal:
        """From JWT access-token claims (RFC 9068 §2.2) or an introspection response (RFC 7662 §2.2)."""
        subject = claims.get("sub")
        client_id = claims.get("client_id", claims.get("azp"))
        exp = claims.get("exp")
        return cls(subject=subject if isinstance(subject, str) else None,
                   client_id=client_id if isinstance(client_id, str) else None,
                   scopes=_scopes(claims),
                   expires_at=float(exp) if exp is not None and _is_time(exp) else None,
                   claims=types.MappingProxyType(dict(claims)))


class AuthError(Exception):
    """A request that is not let through. `status` is the HTTP status; `headers()` what goes with it."""

    status = 401
    error: Optional[str] = "invalid_token"

    def __init__(self, description: str, *, scope: Optional[str] = None):
        super().__init__(description)
        self.description = description
        self.scope = scope  # the scopes that would be enough, for the challenge
        self.www_authenticate: Optional[str] = None  # set by the Authenticator that refused

    def headers(self) -> list[tuple[str, str]]:
        return [("WWW-Authenticate", self.www_authenticate)] if self.www_authenticate else []


class MissingToken(AuthError):
    """No bearer token at all: 401 whose challenge carries no error code (RFC 6750 §3.1)."""

    error = None


class InvalidRequest(AuthError):
    status = 400
    error = "invalid_request"


class InvalidToken(AuthError):
    """Malformed, expired, revoked, for another audience or issuer, or signed by an unknown key."""


class InsufficientScope(AuthError):
    status = 403
    error = "insufficient_scope"


class AuthUnavailable(AuthError):
    """The token could not be checked (authorization server unreachable or answering nonsense): 503,
    not 401, so a client keeps its token and retries instead of throwing it away."""

    status = 503
    error = None
    upstream_status: Optional[int] = None  # the authorization server's HTTP status, when it answered
    retry_after = RETRY_AFTER_SECONDS  # seconds

    def headers(self) -> list[tuple[str, str]]:
        return [("Retry-After", str(self.retry_after))]


Validator = Callable[[str], Optional[Principal]]


# --- claims --------------------------------------------------------------------------------------------------


def _is_time(value: Any) -> bool:
    """A NumericDate (RFC 7519 §2) within what a float holds exactly (285 million years either way). Checked
    before any arithmetic: a float() of 10**400 raises OverflowError; comparing it does not. NaN fails."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and -MAX_TIME <= value <= MAX_TIME


def _scopes(claims: Mapping[str, Any]) -> frozenset[str]:
    """`scope` (a space-separated string, RFC 8693 §4.2) and `scp` (a list or string, as some servers send)."""
    found: set[str] = set()
    for name in ("scope", "scp"):
        value = claims.get(name)
        if isinstance(value, str):
            found.update(value.split())
        elif isinstance(value, list):
            found.update(item for item in value if isinstance(item, str))
    return frozenset(found)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _audiences(value: Union[str, Iterable[str]]) -> frozenset[str]:
    audiences = frozenset([value] if isinstance(value, str) else value)
    if not audiences or not all(isinstance(a, str) and a for a in audiences):
        raise ValueError("audience must be a non-empty string or list of strings (this resource's URL)")
    return audiences


def check_claims(claims: Mapping[str, Any], *, now: float, leeway: float, audiences: frozenset[str],
                 issuer: Optional[str], require_exp: bool = True) -> None:
    """exp, nbf, iss and aud of a token (RFC 7519 §4.1, RFC 8707); InvalidToken naming the first that fails."""
    exp = claims.get("exp")
    if exp is None:
        if require_exp:
            raise InvalidToken("the token has no expiry (exp)")
    elif not _is_time(exp):
        raise InvalidToken("the token's expiry (exp) is not a number")
    elif now > exp + leeway:
        raise InvalidToken("the token has expired")
    nbf = claims.get("nbf")
    if nbf is not None and (not _is_time(nbf) or now + leeway < nbf):
        raise InvalidToken("the token is not valid yet (nbf)")
    if issuer is not None and claims.get("iss") != issuer:
        raise InvalidToken(f"the token was issued by {_shown(claims.get('iss'))}, not by {issuer!r}")
    aud = claims.get("aud")
    given = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
    if not audiences.intersection(a for a in given if isinstance(a, str)):
        raise InvalidToken(f"the token is for audience {_shown(aud)}, not for this resource")


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


# --- validators ----------------------------------------------------------------------------------------------


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


class StaticTokens:
    """Fixed tokens, each for a principal. Looked up by SHA-256, so no comparison touches a token's bytes."""

    def __init__(self, tokens: Union[Iterable[str], Mapping[str, Principal]], *, scopes: Iterable[str] = ()):
        if isinstance(tokens, Mapping):
            pairs = list(tokens.items())
        else:
            pairs = [(token, Principal(subject="static", scopes=frozenset(scopes))) for token in tokens]
        for token, _ in pairs:
            if not token or not _is_token_text(token):
                raise ValueError("a static token must be non-empty visible ASCII, without spaces")
        self._by_digest = {_digest(token): principal for token, principal in pairs}

    @classmethod
    def from_file(cls, path: str) -> StaticTokens:
        """One token per line, optionally followed by a subject and scopes: `TOKEN [SUBJECT [SCOPE ...]]`.
        Blank lines and lines starting with # are skipped."""
        tokens: dict[str, Principal] = {}
        with open(path, encoding="utf-8") as file:
            for number, line in enumerate(file, 1):
                words = line.split()
                if not words or words[0].startswith("#"):
                    continue
                if words[0] in tokens:
                    raise ValueError(f"{path}:{number}: this token is already listed")
                tokens[words[0]] = Principal(subject=words[1] if len(words) > 1 else "static",
                                             scopes=frozenset(words[2:]))
        if not tokens:
            raise ValueError(f"{path} lists no token")
        return cls(tokens)

    def __call__(self, token: str) -> Optional[Principal]:
        return self._by_digest.get(_digest(token))


class _KeyCache:
    """The authorization server's key set, fetched on a thread of its own: at first use, when older than
    max_age, and for a token naming an unknown kid. A check whose key is known never waits for a fetch (a
    stale set serves while the next one comes); a check that needs one waits at most `wait` seconds.
    Fetches for unknown kids happen at most once per refresh_floor (random kids must not turn into a flood
    of requests to the authorization server), and so do retries after a failed fetch; a token signed with
    a key the server has just rotated in is accepted at once, however recently the keys were fetched for
    other reasons."""

    def __init__(self, source: Callable[[], KeySet], *, refresh_floor: float, max_age: float, wait: float,
                 clock: Callable[[], float]):
        self._source = source
        self._refresh_floor = refresh_floor
        self._max_age = max_age
        self._wait = wait
        self._clock = clock
        self._keys: Optional[KeySet] = None
        self._fetched_at = -math.inf
        self._attempted_at = -math.inf
        self._unknown_kid_at = -math.inf
        self._running: Optional[threading.Event] = None  # set when the fetch under way ends
        self._failure = ""  # why the last fetch failed
        self._lock = threading.Lock()
        self.fetches = 0

    def current(self) -> KeySet:
        keys = self._keys
        if keys is None:
            self._start(None, unknown_kid=False)
            return self._awaited(self._running, None)
        if self._clock() - self._fetched_at >= self._max_age:
            self._start(keys, unknown_kid=False)
        return keys

    def newer_than(self, seen: KeySet) -> KeySet:
        """For a token whose kid `seen` lacks: a newer key set. The first such token since the floor fetches it;
        the others get AuthUnavailable (503, Retry-After), not 401, as theirs may be a key rotated in since."""
        started = self._start(seen, unknown_kid=True)
        if started is None:
            keys = self._keys
            if keys is not seen and keys is not None:  # fetched meanwhile
                return keys
            refused = AuthUnavailable("the token's key is not in the authorization server's key set, which "
                                      f"is fetched again for an unknown key at most every {self._refresh_floor:g} s")
            if self._running is None:
                elapsed = self._clock() - self._unknown_kid_at
                refused.retry_after = max(1, math.ceil(self._refresh_floor - elapsed))
            raise refused
        return self._awaited(started, seen)

    def _start(self, seen: Optional[KeySet], unknown_kid: bool) -> Optional[threading.Event]:
        """A fetch on a thread of its own, unless the keys are no longer `seen`, one is under way or the floor
        forbids it; its event, or None."""
        with self._lock:
            now = self._clock()
            last = self._unknown_kid_at if unknown_kid else self._attempted_at
            if self._keys is not seen or self._running is not None or now - last < self._refresh_floor:
                return None
            self._attempted_at = now
            if unknown_kid:
                self._unknown_kid_at = now
            self.fetches += 1
            self._running = threading.Event()
            threading.Thread(target=self._fetch, args=(self._running, now), name="mcpserver-jwks", daemon=True).start()
            return self._running

    def _fetch(self, done: threading.Event, started: float) -> None:
        keys, failure = None, "the authorization server's key set could not be fetched"
        try:
            keys = self._source()
        except AuthUnavailable as error:  # the keys we have, if any, are still the best we know
            failure = error.description
        finally:
            with self._lock:
                if keys is not None:
                    self._keys, self._fetched_at = keys, started
                self._failure, self._running = failure, None
            done.set()

    def _awaited(self, running: Optional[threading.Event], seen: Optional[KeySet]) -> KeySet:
        """The key set once `running` has brought one other than `seen`, within `wait`; else AuthUnavailable."""
        if running is not None and not running.wait(self._wait):
            raise AuthUnavailable(f"the authorization server's key set did not arrive within {self._wait:g} s")
        keys = self._keys
        if keys is None or keys is seen:
            raise AuthUnavailable(self._failure + ("; it is tried again shortly" if running is None else ""))
        return keys


class JwtValidator:
    """JWT access tokens (RFC 9068) signed by the authorization server, checked with its JWKS.

    issuer: exactly the `iss` the tokens carry; its metadata (RFC 8414 or OpenID Connect) gives the
    jwks_uri unless `jwks_uri` or a fixed `jwks` document is given. audience: this resource's canonical
    URL (RFC 8707), or several accepted values. token_types: if given, the header's `typ` must be one of
    them (RFC 9068 says "at+jwt"; many servers send "JWT" or nothing).
    """

    def __init__(self, *, issuer: str, audience: Union[str, Iterable[str]], jwks: Optional[Mapping[str, Any]] = None,
                 jwks_uri: Optional[str] = None, algorithms: Sequence[str] = ("RS256", "ES256"),
                 leeway: float = DEFAULT_LEEWAY, token_types: Optional[Iterable[str]] = None,
                 refresh_floor: float = DEFAULT_REFRESH_FLOOR, jwks_max_age: float = DEFAULT_JWKS_MAX_AGE,
                 timeout: float = DEFAULT_TIMEOUT, clock: Callable[[], float] = time.time, fetch: Fetch = fetch_json):
        self.issuer = issuer
        self.audiences = _audiences(audience)
        self.algorithms = tuple(algorithms)
        unsupported = set(self.algorithms) - {"RS256", "ES256"}
        if unsupported or not self.algorithms:
            raise ValueError(f"algorithms must be RS256 and/or ES256, not {sorted(unsupported)}")
        self.leeway = leeway
        self.token_types = None if token_types is None else frozenset(t.lower() for t in token_types)
        self._clock = clock
        self._fetch = fetch
        self._timeout = timeout
        self._jwks_uri = None if jwks_uri is None else _check_url(jwks_uri, "jwks_uri")
        self._fixed = None if jwks is None else parse_jwks(jwks)
        self.keys = _KeyCache(self._fetch_keys, refresh_floor=refresh_floor, max_age=jwks_max_age, wait=timeout,
                              clock=clock)

    def _fetch_keys(self) -> KeySet:
        if self._jwks_uri is None:
            metadata = discover_authorization_server(self.issuer, timeout=self._timeout, fetch=self._fetch)
            uri = metadata.get("jwks_uri")
            if not isinstance(uri, str):
                raise AuthUnavailable(f"the metadata of {self.issuer} has no jwks_uri")
            try:
                self._jwks_uri = _check_url(uri, "jwks_uri")
            except ValueError as error:
                raise AuthUnavailable(str(error)) from None
        try:
            return parse_jwks(self._fetch(self._jwks_uri, timeout=self._timeout))
        except JoseError as error:
            raise AuthUnavailable(f"the key set at {self._jwks_uri} is not usable: {error}") from None

    def __call__(self, token: str) -> Principal:
        try:
            jws = parse_compact(token)
            if self.token_types is not None and str(jws.header.get("typ", "")).lower() not in self.token_types:
                raise JoseError(f"the token's type (typ) is {_shown(jws.header.get('typ'))}, not an access token")
            keys = self._fixed if self._fixed is not None else self.keys.current()
            try:
                claims = verify_jws(jws, keys, self.algorithms)
            except UnknownKey:
                if self._fixed is not None:  # a fixed set: nothing newer to fetch
                    raise
                claims = verify_jws(jws, self.keys.newer_than(keys), self.algorithms)
        except JoseError as error:
            raise InvalidToken(str(error)) from None
        check_claims(claims, now=self._clock(), leeway=self.leeway, audiences=self.audiences, issuer=self.issuer)
        return Principal.from_claims(claims)


class IntrospectionValidator:
    """Opaque (or any) tokens, asked about at the authorization server's RFC 7662 introspection endpoint.

    The endpoint comes from `endpoint`, or from the issuer's metadata (`introspection_endpoint`). This
    resource authenticates with client_secret_basic (default) or client_secret_post. An active token must
    name this resource in `aud`; `iss`, when the response has one, must be the issuer. At most
    `max_concurrent` tokens are being introspected at once; beyond that a new token is 503 at once, so random
    tokens sent while the authorization server is slow cannot hold every connection of the server.
    """

    def __init__(self, *, client_id: str, client_secret: str, audience: Union[str, Iterable[str]],
                 endpoint: Optional[str] = None, issuer: Optional[str] = None,
                 auth_method: str = "client_secret_basic", leeway: float = DEFAULT_LEEWAY,
                 timeout: float = DEFAULT_TIMEOUT, clock: Callable[[], float] = time.time, fetch: Fetch = fetch_json,
                 max_concurrent: int = DEFAULT_MAX_INTROSPECTIONS):
        if endpoint is None and issuer is None:
            raise ValueError("give the introspection endpoint, or the issuer whose metadata names it")
        if auth_method not in ("client_secret_basic", "client_secret_post"):
            raise ValueError("auth_method must be client_secret_basic or client_secret_post")
        self.endpoint = None if endpoint is None else _check_url(endpoint, "introspection endpoint")
        self.issuer = issuer
        self.audiences = _audiences(audience)
        self.leeway = leeway
        self._client = (client_id, client_secret)
        self._auth_method = auth_method
        self._timeout = timeout
        self._clock = clock
        self._fetch = fetch
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(max_concurrent)
        self.max_concurrent = max_concurrent

    def _endpoint(self) -> str:
        if self.endpoint is None:
            assert self.issuer is not None
            metadata = discover_authorization_server(self.issuer, timeout=self._timeout, fetch=self._fetch)
            endpoint = metadata.get("introspection_endpoint")
            if not isinstance(endpoint, str):
                raise AuthUnavailable(f"the metadata of {self.issuer} has no introspection_endpoint")
            try:
                checked = _check_url(endpoint, "introspection endpoint")
            except ValueError as error:
                raise AuthUnavailable(str(error)) from None
            with self._lock:
                self.endpoint = checked
        return self.endpoint

    def __call__(self, token: str) -> Principal:
        form = {"token": token, "token_type_hint": "access_token"}
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        client_id, client_secret = self._client
        if self._auth_method == "client_secret_basic":
            # RFC 6749 §2.3.1: each part form-urlencoded before joining, then base64
            pair = f"{urllib.parse.quote_plus(client_id)}:{urllib.parse.quote_plus(client_secret)}"
            headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode("ascii")
        else:
            form.update(client_id=client_id, client_secret=client_secret)
        if not self._slots.acquire(blocking=False):
            raise AuthUnavailable(f"{self.max_concurrent} tokens are already waiting for the authorization server")
        try:
            answer = self._fetch(self._endpoint(), timeout=self._timeout,
                                 data=urllib.parse.urlencode(form).encode("ascii"), headers=headers)
        except AuthUnavailable as error:
            if error.upstream_status == 400:  # e.g. unsupported_token_type: a token it will not vouch for
                raise InvalidToken("the authorization server refused to introspect the token") from None
            raise
        finally:
            self._slots.release()
        if answer.get("active") is not True:
            raise InvalidToken("the token is not active (expired, revoked, or unknown to the authorization server)")
        token_type = answer.get("token_type")
        if isinstance(token_type, str) and token_type.lower() not in ("bearer", "access_token"):
            raise InvalidToken(f"the token is a {_shown(token_type)} token, not an access token")
        issuer = self.issuer if "iss" in answer else None
        check_claims(answer, now=self._clock(), leeway=self.leeway, audiences=self.audiences, issuer=issuer,
                     require_exp=False)
        return Principal.from_claims(answer)


# --- the per-request entry point -----------------------------------------------------------------------------


class Authenticator:
    """Turns an Authorization header into a Principal, or an AuthError ready to send.

    resource_metadata_url: where this resource's RFC 9728 metadata is served (put into every challenge so
    clients can find the authorization server); None for static tokens without OAuth. required_scopes:
    what every request needs (else 403 insufficient_scope); they are also the challenge's `scope`.
    """

    def __init__(self, validator: Validator, *, resource_metadata_url: Optional[str] = None,
                 required_scopes: Iterable[str] = (), realm: Optional[str] = None,
                 cache_size: int = DEFAULT_CACHE_SIZE, max_cache_seconds: float = DEFAULT_MAX_CACHE_SECONDS,
                 refusal_cache_size: int = DEFAULT_REFUSAL_CACHE_SIZE, refusal_seconds: float = DEFAULT_REFUSAL_SECONDS,
                 clock: Callable[[], float] = time.time):
        self.validator = validator
        self.resource_metadata_url = resource_metadata_url
        self.required_scopes = frozenset(required_scopes)
        self.scope = " ".join(sorted(self.required_scopes)) or None
        self.realm = realm
        self._cache_size = cache_size
        self._max_cache_seconds = max_cache_seconds
        self._refusal_cache_size = refusal_cache_size
        self._refusal_seconds = refusal_seconds
        self._clock = clock
        # digest -> (valid until, principal) and digest -> (refused until, error)
        self._accepted: dict[bytes, tuple[float, Principal]] = {}
        self._refused: dict[bytes, tuple[float, AuthError]] = {}
        self._lock = threading.Lock()

    def authenticate(self, authorization: Optional[str]) -> Principal:
        """The principal for this Authorization header value; AuthError (with www_authenticate set) if none."""
        try:
            return self._authenticate(authorization)
        except AuthError as error:
            if error.status != 503:
                error.www_authenticate = self.challenge(error)
            raise

    def _authenticate(self, authorization: Optional[str]) -> Principal:
        token = bearer_token(authorization)
        digest = _digest(token)
        now = self._clock()
        entry = self._accepted.get(digest)
        principal = entry[1] if entry is not None and now < entry[0] else self._validate(token, digest, now)
        if not self.required_scopes <= principal.scopes:
            missing = " ".join(sorted(self.required_scopes - principal.scopes))
            raise InsufficientScope(f"the token lacks the scope {missing}", scope=self.scope)
        return principal

    def _validate(self, token: str, digest: bytes, now: float) -> Principal:
        refused = self._refused.get(digest)
        if refused is not None and now < refused[0]:
            raise type(refused[1])(refused[1].description, scope=refused[1].scope)
        try:
            principal = self.validator(token)
            if principal is None:
                raise InvalidToken("the token is not recognised")
        except InvalidToken as error:
            self._remember(self._refused, self._refusal_cache_size, digest, (now + self._refusal_seconds, error), now)
            raise
        until = now + self._max_cache_seconds
        if principal.expires_at is not None:
            until = min(until, principal.expires_at)
        if until > now:
            self._remember(self._accepted, self._cache_size, digest, (until, principal), now)
        return principal

    def _remember(self, table: dict[bytes, Any], limit: int, digest: bytes, entry: tuple[float, Any],
                  now: float) -> None:
        with self._lock:
            if len(table) >= limit:
                for stale in [key for key, (until, _) in table.items() if until <= now]:
                    del table[stale]
                while len(table) >= limit:  # still full of live entries: drop the oldest
                    del table[next(iter(table))]
            table[digest] = entry

    def challenge(self, error: Optional[AuthError] = None) -> str:
        """The WWW-Authenticate value for a refusal (or, with no error, for a request without a token)."""
        scope = error.scope if error is not None and error.scope else self.scope
        return www_authenticate(realm=self.realm, resource_metadata=self.resource_metadata_url, scope=scope,
                                error=error.error if error is not None else None,
                                error_description=error.description if error is not None and error.error else None)

    def forget(self) -> None:
        """Drop every cached decision (after changing the static tokens, say)."""
        with self._lock:
            self._accepted.clear()
            self._refused.clear()


def bearer_token(authorization: Optional[str]) -> str:
    """The token of an `Authorization: Bearer TOKEN` value (RFC 6750 §2.1); MissingToken, InvalidRequest
    or InvalidToken if there is none, it is empty, or it is malformed."""
    if not authorization:
        raise MissingToken("this endpoint needs an Authorization: Bearer token")
    scheme, _, credential = authorization.strip().partition(" ")
    if scheme.lower() != "bearer":
        raise MissingToken(f"the {scheme[:20]!r} authorization scheme is not supported; send a Bearer token")
    credential = credential.strip()
    if not credential:
        raise InvalidRequest("the Bearer authorization carries no token")
    if len(credential) > MAX_AUTHORIZATION_CHARS:
        raise InvalidToken(f"the token is longer than {MAX_AUTHORIZATION_CHARS} characters")
    if not _is_token_text(credential):
        raise InvalidToken("the token has characters a bearer token cannot have")
    return credential


# --- RFC 9728 protected-resource metadata and the challenge -------------------------------------------------------

WELL_KNOWN_RESOURCE = "/.well-known/oauth-protected-resource"


def canonical_resource(url: str) -> str:
    """This resource's canonical URL (RFC 8707 §2, MCP authorization): absolute http(s), no fragment,
    lower-case scheme and host, no default port, no trailing slash; ValueError if it cannot be one."""
    parts = urllib.parse.urlsplit(url.strip())
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"the resource must be an absolute http(s) URL: {url!r}")
    if parts.fragment or "#" in url:
        raise ValueError(f"the resource must not have a fragment: {url!r}")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"the resource must not carry credentials: {url!r}")
    host = parts.hostname.lower()
    netloc = f"[{host}]" if ":" in host else host
    if parts.port is not None and parts.port != {"http": 80, "https": 443}[scheme]:
        netloc += f":{parts.port}"
    path = parts.path.rstrip("/")
    return urllib.parse.urlunsplit((scheme, netloc, path, parts.query, ""))


def resource_metadata_url(resource: str) -> str:
    """Where the metadata for `resource` lives (RFC 9728 §3.1): the well-known path goes between the
    host and the resource's path, so https://x/mcp has https://x/.well-known/oauth-protected-resource/mcp."""
    parts = urllib.parse.urlsplit(resource)
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, WELL_KNOWN_RESOURCE + parts.path.rstrip("/"),
                                    parts.query, ""))


def resource_metadata_paths(resource: str) -> tuple[str, ...]:
    """The request paths to serve the metadata at: the RFC 9728 one for this resource, and the bare
    well-known path that clients try when the resource has a path (MCP authorization, §2.3.2)."""
    path = urllib.parse.urlsplit(resource_metadata_url(resource)).path
    return (path,) if path == WELL_KNOWN_RESOURCE else (path, WELL_KNOWN_RESOURCE)


def resource_metadata(resource: str, authorization_servers: Sequence[str], *,
                      scopes_supported: Optional[Iterable[str]] = None,
                      bearer_methods_supported: Sequence[str] = ("header",), resource_name: Optional[str] = None,
                      resource_documentation: Optional[str] = None) -> dict[str, Any]:
    """The RFC 9728 §2 document for `resource`: serve it as application/json at resource_metadata_paths()."""
    document: dict[str, Any] = {"resource": resource, "authorization_servers": list(authorization_servers)}
    if scopes_supported is not None:
        document["scopes_supported"] = sorted(set(scopes_supported))
    document["bearer_methods_supported"] = list(bearer_methods_supported)
    if resource_name is not None:
        document["resource_name"] = resource_name
    if resource_documentation is not None:
        document["resource_documentation"] = resource_documentation
    return document


def _quoted(value: str) -> str:
    # RFC 6750 §3 limits these values to printable ASCII without " and \ ; anything else (a CR or LF from
    # a token's claims, say) is dropped, so no value can end the header or start another.
    return '"' + "".join(c for c in value if " " <= c <= "~" and c not in '"\\') + '"'


def www_authenticate(*, realm: Optional[str] = None, resource_metadata: Optional[str] = None,
                     scope: Optional[str] = None, error: Optional[str] = None,
                     error_description: Optional[str] = None) -> str:
    """A `Bearer` challenge (RFC 6750 §3, RFC 9728 §5.1), parameters in a fixed order, absent ones left out."""
    parameters = [(name, value) for name, value in (
        ("realm", realm), ("resource_metadata", resource_metadata), ("scope", scope), ("error", error),
        ("error_description", error_description)) if value]
    return "Bearer " + ", ".join(f"{name}={_quoted(value)}" for name, value in parameters) if parameters else "Bearer"


# --- one object for the transport ------------------------------------------------------------------------------


class ResourceServer:
    """What the HTTP transport needs to be an OAuth 2.1 resource server (MCP authorization):

        oauth = ResourceServer("https://mcp.example.com/mcp", ["https://auth.example.com"], scopes=["mcp"])
        create_app("server.py", oauth=oauth)   # or: mcpserver --http --resource URL --authorization-server URL

    It serves the RFC 9728 metadata at `metadata_paths`, and checks each request's bearer token with
    `validator` (default: JWT access tokens from the first authorization server, verified with its
    JWKS, audience = this resource; or RFC 7662 introspection when client credentials are given).
    """

    def __init__(self, resource: str, authorization_servers: Sequence[str], *, scopes: Iterable[str] = (),
                 validator: Optional[Validator] = None, introspection_client_id: Optional[str] = None,
                 introspection_client_secret: Optional[str] = None, algorithms: Sequence[str] = ("RS256", "ES256")):
        if not authorization_servers and validator is None:
            raise ValueError("an OAuth resource server needs at least one authorization server")
        self.resource = canonical_resource(resource)
        host = urllib.parse.urlsplit(self.resource).hostname or ""
        if self.resource.startswith("http:") and not _is_loopback(host):
            raise ValueError(f"the resource must be an https URL (http only on loopback): {resource!r}")
        scopes = tuple(scopes)
        if validator is None:
            issuer = authorization_servers[0]
            if introspection_client_id is not None:
                validator = IntrospectionValidator(client_id=introspection_client_id,
                                                   client_secret=introspection_client_secret or "",
                                                   audience=self.resource, issuer=issuer)
            else:
                validator = JwtValidator(issuer=issuer, audience=self.resource, algorithms=tuple(algorithms))
        self.authenticator = Authenticator(validator, resource_metadata_url=resource_metadata_url(self.resource),
                                           required_scopes=scopes)
        self.metadata = resource_metadata(self.resource, authorization_servers, scopes_supported=scopes or None)
        self.metadata_paths = resource_metadata_paths(self.resource)

    def authenticate(self, authorization: Optional[str]) -> Principal:
        """The principal for this Authorization header value; AuthError, ready to send, if none."""
        return self.authenticator.authenticate(authorization)
