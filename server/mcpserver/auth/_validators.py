"""The built-in validators, each a callable `token -> Principal or None`: StaticTokens, JwtValidator (signed JWTs,
checked against the authorization server's key set, which _KeyCache keeps) and IntrospectionValidator (RFC 7662)."""


from __future__ import annotations

import base64
import hashlib
import math
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence, Union

from .._forks import renew_at_fork
from .._scopes import scope_set
from ..errors import ConfigError
from ._fetch import Fetch, _check_url, discover_authorization_server, fetch_json
from ._jose import JoseError, KeySet, UnknownKey, parse_compact, parse_jwks, verify_jws
from ._principal import (
    DEFAULT_JWKS_MAX_AGE,
    DEFAULT_LEEWAY,
    DEFAULT_MAX_INTROSPECTIONS,
    DEFAULT_REFRESH_FLOOR,
    DEFAULT_TIMEOUT,
    AuthUnavailable,
    InvalidToken,
    Principal,
    _audiences,
    _is_token_text,
    _shown,
    check_claims,
)

# --- validators ----------------------------------------------------------------------------------------------


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


class StaticTokens:
    """Fixed tokens, each for a principal. Looked up by SHA-256, so no comparison touches a token's bytes."""

    def __init__(self, tokens: Union[Iterable[str], Mapping[str, Principal]], *,
                 scopes: Union[str, Iterable[str]] = ()):
        if isinstance(tokens, Mapping):
            pairs = list(tokens.items())
        else:
            try:  # a string is its scopes separated by spaces, not its characters
                given = scope_set(scopes, "static tokens")
            except ConfigError as bad:
                raise ValueError(str(bad)) from None
            pairs = [(token, Principal(subject="static", scopes=given)) for token in tokens]
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
    other reasons. Until the next such fetch is due, a kid that the last one did not bring is unknown
    (401, RFC 6750 §3.1): only a key set that could not be fetched, or is being fetched, is a reason to
    retry (503)."""

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
        self._unknown_kid_fetch = 0  # which fetch (by self.fetches) was the last one for an unknown kid
        self._fetched_number = 0  # and which brought the keys we have
        self._running: Optional[threading.Event] = None  # set when the fetch under way ends
        self._failure = ""  # why the last fetch failed
        self._lock = threading.Lock()
        renew_at_fork(self, "_lock")
        self.fetches = 0

    def current(self) -> KeySet:
        keys = self._keys
        if keys is None:
            self._start(None, unknown_kid=False)
            return self._awaited(self._running, None)
        if self._clock() - self._fetched_at >= self._max_age:
            self._start(keys, unknown_kid=False)
        return keys

    def newer_than(self, seen: KeySet) -> Optional[KeySet]:
        """For a token whose kid `seen` lacks: a newer key set, fetched for it when the floor allows; None when
        the keys fetched since the last such fetch began lack it too (the kid is unknown); AuthUnavailable
        (503, Retry-After) while that fetch is under way or failed, as the key may be in the set it brings."""
        started = self._start(seen, unknown_kid=True)
        if started is not None:
            return self._awaited(started, seen)
        keys = self._keys
        if keys is not seen and keys is not None:  # fetched meanwhile
            return keys
        fresh = self._fetched_number >= self._unknown_kid_fetch
        if fresh and self._clock() - self._unknown_kid_at < self._refresh_floor:
            return None  # until the next fetch for an unknown kid is due
        refused = AuthUnavailable("the token's key is not in the authorization server's key set, which could "
                                  f"not be fetched again; it is tried at most every {self._refresh_floor:g} s")
        if self._running is None:
            elapsed = self._clock() - self._unknown_kid_at
            refused.retry_after = max(1, math.ceil(self._refresh_floor - elapsed))
        raise refused

    def _start(self, seen: Optional[KeySet], unknown_kid: bool) -> Optional[threading.Event]:
        """A fetch on a thread of its own, unless the keys are no longer `seen`, one is under way or the floor
        forbids it; its event, or None."""
        with self._lock:
            now = self._clock()
            last = self._unknown_kid_at if unknown_kid else self._attempted_at
            if self._keys is not seen or self._running is not None or now - last < self._refresh_floor:
                return None
            self._attempted_at = now
            self.fetches += 1
            if unknown_kid:
                self._unknown_kid_at, self._unknown_kid_fetch = now, self.fetches
            self._running = threading.Event()
            threading.Thread(target=self._fetch, args=(self._running, now, self.fetches), name="mcpserver-jwks",
                             daemon=True).start()
            return self._running

    def _fetch(self, done: threading.Event, started: float, number: int) -> None:
        keys, failure = None, "the authorization server's key set could not be fetched"
        try:
            keys = self._source()
        except AuthUnavailable as error:  # the keys we have, if any, are still the best we know
            failure = error.description
        finally:
            with self._lock:
                if keys is not None:
                    self._keys, self._fetched_at, self._fetched_number = keys, started, number
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
                newer = None if self._fixed is not None else self.keys.newer_than(keys)  # a fixed set has no newer
                if newer is None:
                    raise
                claims = verify_jws(jws, newer, self.algorithms)
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
        renew_at_fork(self, "_lock", "_slots")
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


