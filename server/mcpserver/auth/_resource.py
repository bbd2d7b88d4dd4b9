"""The per-request entry point (Authenticator: cached decisions, the challenge), RFC 9728 protected-resource
metadata, and ResourceServer, the one object the HTTP transport takes."""


from __future__ import annotations

import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Callable, Iterable, Optional, Sequence, Union

from .._forks import renew_at_fork
from .._scopes import scope_set
from ..errors import ConfigError
from ._fetch import _is_loopback
from ._principal import (
    DEFAULT_CACHE_SIZE,
    DEFAULT_MAX_CACHE_SECONDS,
    DEFAULT_REFUSAL_CACHE_SIZE,
    DEFAULT_REFUSAL_SECONDS,
    MAX_AUTHORIZATION_CHARS,
    AuthError,
    AuthUnavailable,
    InsufficientScope,
    InvalidToken,
    MalformedRequest,
    MissingToken,
    Principal,
    Validator,
    _is_token_text,
)
from ._validators import IntrospectionValidator, JwtValidator, _digest

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
        renew_at_fork(self, "_lock")

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
    """The token of an `Authorization: Bearer TOKEN` value (RFC 6750 §2.1); MissingToken, MalformedRequest
    or InvalidToken if there is none, it is empty, or it is malformed."""
    if not authorization:
        raise MissingToken("this endpoint needs an Authorization: Bearer token")
    scheme, _, credential = authorization.strip().partition(" ")
    if scheme.lower() != "bearer":
        raise MissingToken(f"the {scheme[:20]!r} authorization scheme is not supported; send a Bearer token")
    credential = credential.strip()
    if not credential:
        raise MalformedRequest("the Bearer authorization carries no token")
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

    def __init__(self, resource: str, authorization_servers: Sequence[str], *, scopes: Union[str, Iterable[str]] = (),
                 validator: Optional[Validator] = None, introspection_client_id: Optional[str] = None,
                 introspection_client_secret: Optional[str] = None, algorithms: Sequence[str] = ("RS256", "ES256")):
        if not authorization_servers and validator is None:
            raise ValueError("an OAuth resource server needs at least one authorization server")
        self.resource = canonical_resource(resource)
        host = urllib.parse.urlsplit(self.resource).hostname or ""
        if self.resource.startswith("http:") and not _is_loopback(host):
            raise ValueError(f"the resource must be an https URL (http only on loopback): {resource!r}")
        try:  # a string is its scopes separated by spaces, not its characters; a bad scope is refused
            scopes = tuple(sorted(scope_set(scopes, "the resource server")))
        except ConfigError as bad:
            raise ValueError(str(bad)) from None
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

    def unready(self) -> Optional[str]:
        """Why tokens cannot be checked yet (the authorization server's keys were never fetched), or None. A JWT
        validator's keys are fetched if need be, waiting at most its timeout: call this off any event loop."""
        keys = getattr(self.authenticator.validator, "keys", None)
        if keys is None:  # introspection or fixed tokens: no keys to hold
            return None
        try:
            keys.current()
        except AuthUnavailable as unavailable:
            return f"the authorization server's keys are not here: {unavailable.description}"
        return None
