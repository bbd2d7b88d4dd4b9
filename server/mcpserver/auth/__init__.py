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

The wing, by role:
  _principal   the Principal, the refusals (AuthError and its kinds), the claims checks, the shared limits
  _jose        JWS compact serialization, JWK sets, RS256 and ES256 verification, in pure Python
  _fetch       fetching from the authorization server: metadata, key sets, introspection
  _validators  StaticTokens, JwtValidator (with its key cache), IntrospectionValidator
  _resource    the Authenticator (per request, cached), RFC 9728 metadata and challenges, ResourceServer
"""

from ._fetch import discover_authorization_server, fetch_json, metadata_urls
from ._principal import (
    DEFAULT_CACHE_SIZE,
    DEFAULT_JWKS_MAX_AGE,
    DEFAULT_LEEWAY,
    DEFAULT_MAX_CACHE_SECONDS,
    DEFAULT_MAX_INTROSPECTIONS,
    DEFAULT_REFRESH_FLOOR,
    DEFAULT_REFUSAL_CACHE_SIZE,
    DEFAULT_REFUSAL_SECONDS,
    DEFAULT_TIMEOUT,
    MAX_AUTHORIZATION_CHARS,
    MAX_DOCUMENT_BYTES,
    MAX_TIME,
    RETRY_AFTER_SECONDS,
    AuthError,
    AuthUnavailable,
    InsufficientScope,
    InvalidToken,
    MalformedRequest,
    MissingToken,
    Principal,
    Validator,
    check_claims,
)
from ._resource import (
    Authenticator,
    ResourceServer,
    bearer_token,
    canonical_resource,
    resource_metadata,
    resource_metadata_paths,
    resource_metadata_url,
    www_authenticate,
)
from ._validators import IntrospectionValidator, JwtValidator, StaticTokens

__all__ = [
    "DEFAULT_CACHE_SIZE",
    "DEFAULT_JWKS_MAX_AGE",
    "DEFAULT_LEEWAY",
    "DEFAULT_MAX_CACHE_SECONDS",
    "DEFAULT_MAX_INTROSPECTIONS",
    "DEFAULT_REFRESH_FLOOR",
    "DEFAULT_REFUSAL_CACHE_SIZE",
    "DEFAULT_REFUSAL_SECONDS",
    "DEFAULT_TIMEOUT",
    "MAX_AUTHORIZATION_CHARS",
    "MAX_DOCUMENT_BYTES",
    "MAX_TIME",
    "RETRY_AFTER_SECONDS",
    "AuthError",
    "AuthUnavailable",
    "Authenticator",
    "InsufficientScope",
    "IntrospectionValidator",
    "InvalidToken",
    "JwtValidator",
    "MalformedRequest",
    "MissingToken",
    "Principal",
    "ResourceServer",
    "StaticTokens",
    "Validator",
    "bearer_token",
    "canonical_resource",
    "check_claims",
    "discover_authorization_server",
    "fetch_json",
    "metadata_urls",
    "resource_metadata",
    "resource_metadata_paths",
    "resource_metadata_url",
    "www_authenticate",
]
