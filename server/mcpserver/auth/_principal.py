"""Who a token says the caller is (Principal), every refusal an authentication can end in (AuthError and its kinds,
each with its HTTP status), the checks on a token's claims, and the limits the other parts of the wing share."""


from __future__ import annotations

import types
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Optional, Union

DEFAULT_LEEWAY = 60.0  # seconds of clock skew allowed on exp and nbf
DEFAULT_CACHE_SIZE = 10_000  # validated tokens kept
DEFAULT_MAX_CACHE_SECONDS = 3600.0  # a token without exp, or with a far one, is checked again after this
DEFAULT_REFUSAL_CACHE_SIZE = 1_000  # refused tokens remembered, so a client retrying a bad one costs nothing
DEFAULT_REFUSAL_SECONDS = 10.0  # how long a refused token stays refused without being checked again
DEFAULT_REFRESH_FLOOR = 60.0  # the key set is fetched again for an unknown kid at most this often
DEFAULT_JWKS_MAX_AGE = 3600.0  # and in any case after this
DEFAULT_TIMEOUT = 5.0  # seconds for one request to the authorization server, all of it
MAX_DOCUMENT_BYTES = 1024 * 1024  # metadata, key set, introspection response
MAX_AUTHORIZATION_CHARS = 16 * 1024 + 64  # an Authorization header longer than a 16 KiB token is 401 unread
RETRY_AFTER_SECONDS = 5  # the Retry-After of a 503 while the authorization server cannot be reached
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


class MalformedRequest(AuthError):
    """An Authorization header that is not one `Bearer` token (RFC 6750 §3.1 invalid_request): 400."""

    status = 400
    error = "invalid_request"


class InvalidToken(AuthError):
    """Malformed, expired, revoked, for another audience or issuer, or signed by an unknown key."""


class InsufficientScope(AuthError):
    """A good token without a scope the request needs (RFC 6750 §3.1 insufficient_scope): 403, naming every scope
    the request needs, so the client can step up."""

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


# A token in, its Principal out (None: not valid), as JwtValidator, IntrospectionValidator and StaticTokens do.
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


