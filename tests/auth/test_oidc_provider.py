"""mcpserver.auth against a real authorization server: oidc-provider (a certified OpenID Provider).

Tokens come from its client-credentials grant with resource indicators (RFC 8707): JWT access
tokens signed RS256 and ES256, checked with the key set found through its metadata, and opaque
tokens checked at its introspection endpoint (RFC 7662). Forged tokens are signed by the same
process with jose (Node), so the refusals are refusals of tokens a real library produced.
Run with `make test-auth` (installs Node 22 and oidc-provider into .cache/ on first use).
"""

import hashlib
import hmac
import json
import time
import urllib.request

import pytest
from authorization_server import RESOURCE_SERVER, RESOURCES, AuthorizationServer
from mcpserver.auth import (
    Authenticator,
    AuthUnavailable,
    InsufficientScope,
    IntrospectionValidator,
    InvalidToken,
    JwtValidator,
    resource_metadata_url,
)
from mcpserver.auth._jose import b64url_decode, b64url_encode

ALGORITHMS = {"RS256": RESOURCES["rs256"], "ES256": RESOURCES["es256"]}


@pytest.fixture(scope="module")
def server():
    started = AuthorizationServer()
    yield started
    started.stop()


@pytest.fixture
def fresh_server():
    """A server of its own, for tests that rotate keys."""
    started = AuthorizationServer()
    yield started
    started.stop()


def jwt_auth(server, resource, *, clock=time.time, required_scopes=("mcp:read",), **options):
    validator = JwtValidator(issuer=server.issuer, audience=resource, token_types=["at+jwt"], clock=clock,
                             **options)
    return Authenticator(validator, resource_metadata_url=resource_metadata_url(resource),
                         required_scopes=required_scopes, clock=clock), validator


def refused(auth, token):
    with pytest.raises((InvalidToken, InsufficientScope, AuthUnavailable)) as caught:
        auth.authenticate(f"Bearer {token}")
    return caught.value


def claims_of(token):
    return json.loads(b64url_decode(token.split(".")[1]))


def server_claims(server, resource, **changes):
    now = int(time.time())
    claims = {"iss": server.issuer, "aud": resource, "sub": "mcp-client", "client_id": "mcp-client",
              "iat": now, "exp": now + 300, "scope": "mcp:read"}
    claims.update(changes)
    return {name: value for name, value in claims.items() if value is not None}


# --- what the server issues is accepted ------------------------------------------------------------------------

@pytest.mark.parametrize("alg", ["RS256", "ES256"])
def test_jwt_access_tokens_from_the_server_are_accepted(server, alg):
    resource = ALGORITHMS[alg]
    auth, validator = jwt_auth(server, resource)
    token = server.token(resource, "mcp:read mcp:write")
    assert json.loads(b64url_decode(token.split(".")[0]))["alg"] == alg
    principal = auth.authenticate(f"Bearer {token}")
    assert principal.subject == "mcp-client" and principal.client_id == "mcp-client"
    assert principal.scopes == {"mcp:read", "mcp:write"}
    assert principal.expires_at == claims_of(token)["exp"]
    assert validator.keys.fetches == 1


@pytest.mark.parametrize("alg", ["RS256", "ES256"])
def test_many_tokens_cross_check_the_signature_arithmetic(server, alg):
    """ES256 signatures are randomised: 25 of them exercise r and s of every shape the server makes."""
    resource = ALGORITHMS[alg]
    _, validator = jwt_auth(server, resource)
    tokens = [server.token(resource) for _ in range(25)]
    assert len(set(tokens)) == 25
    for token in tokens:
        assert validator(token).client_id == "mcp-client"


def test_the_key_set_is_found_through_the_servers_metadata(server):
    with urllib.request.urlopen(server.issuer + "/.well-known/openid-configuration", timeout=10) as response:
        jwks_uri = json.loads(response.read())["jwks_uri"]
    _, validator = jwt_auth(server, RESOURCES["es256"], jwks_uri=jwks_uri)
    before = server.stats()["jwks"]
    assert validator(server.token(RESOURCES["es256"])).subject == "mcp-client"
    assert server.stats()["jwks"] == before + 1


# --- what must be refused ---------------------------------------------------------------------------------------

def test_a_token_for_another_resource_is_refused(server):
    auth, _ = jwt_auth(server, RESOURCES["rs256"])
    error = refused(auth, server.token(RESOURCES["es256"]))
    assert error.status == 401 and "audience" in error.description
    assert error.www_authenticate.startswith(
        f'Bearer resource_metadata="{resource_metadata_url(RESOURCES["rs256"])}", scope="mcp:read", '
        'error="invalid_token"')


def test_a_token_without_the_required_scope_gets_403(server):
    auth, _ = jwt_auth(server, RESOURCES["es256"], required_scopes=["mcp:admin"])
    error = refused(auth, server.token(RESOURCES["es256"], "mcp:read"))
    assert isinstance(error, InsufficientScope) and error.status == 403
    assert 'error="insufficient_scope"' in error.www_authenticate and 'scope="mcp:admin"' in error.www_authenticate


@pytest.mark.parametrize("alg", ["RS256", "ES256"])
def test_an_expired_token_is_refused(server, alg):
    resource = ALGORITHMS[alg]
    token = server.token(resource)
    later = claims_of(token)["exp"] + 61  # past the 60-second leeway
    auth, _ = jwt_auth(server, resource, clock=lambda: later)
    assert "expired" in refused(auth, token).description
    forged = server.sign({"alg": alg, "kid": server.current_kid(alg), "typ": "at+jwt"},
                         server_claims(server, resource, exp=int(time.time()) - 120))
    auth, _ = jwt_auth(server, resource)
    assert "expired" in refused(auth, forged).description


@pytest.mark.parametrize(("changes", "message"), [
    ({"iss": "http://127.0.0.1:1"}, "issued by"),
    ({"nbf": int(time.time()) + 3600}, "not valid yet"),
    ({"aud": "https://mcp.example.test/other"}, "audience"),
    ({"aud": None}, "audience"),
    ({"exp": None}, "no expiry"),
])
def test_tokens_signed_with_the_servers_own_key_but_wrong_claims_are_refused(server, changes, message):
    resource = RESOURCES["es256"]
    token = server.sign({"alg": "ES256", "kid": server.current_kid("ES256"), "typ": "at+jwt"},
                        server_claims(server, resource, **changes))
    auth, _ = jwt_auth(server, resource)
    error = refused(auth, token)
    assert error.status == 401 and message in error.description
    control = server.sign({"alg": "ES256", "kid": server.current_kid("ES256"), "typ": "at+jwt"},
                          server_claims(server, resource))
    assert auth.authenticate(f"Bearer {control}").subject == "mcp-client"  # the same forgery, claims right


@pytest.mark.parametrize("alg", ["RS256", "ES256"])
def test_a_token_signed_by_a_key_the_server_never_published_is_refused(server, alg):
    resource = ALGORITHMS[alg]
    auth, _ = jwt_auth(server, resource)
    header = {"alg": alg, "kid": server.current_kid(alg), "typ": "at+jwt"}
    assert "does not verify" in refused(auth, server.sign(header, server_claims(server, resource),
                                                          key="outsider")).description
    before = server.stats()["jwks"]
    for attempt in range(5):
        unknown = server.sign(dict(header, kid=f"stranger-{attempt}"), server_claims(server, resource), key="outsider")
        error = refused(auth, unknown)  # the first looked for at once; the fetch for it answers for the rest
        assert error.status == 401 and "no key has the id" in error.description
    assert server.stats()["jwks"] == before + 1


def test_alg_none_is_refused(server):
    resource = RESOURCES["rs256"]
    head, payload, _ = server.token(resource).split(".")
    header = dict(json.loads(b64url_decode(head)), alg="none")
    auth, _ = jwt_auth(server, resource)
    for signature in ("", "AA"):
        error = refused(auth, f"{b64url_encode(json.dumps(header).encode())}.{payload}.{signature}")
        assert error.status == 401 and "alg none" in error.description


def test_hs256_signed_with_the_servers_public_key_is_refused(server):
    resource = RESOURCES["rs256"]
    with urllib.request.urlopen(server.issuer + "/jwks", timeout=10) as response:
        public = next(key for key in json.loads(response.read())["keys"] if key["kty"] == "RSA")
    auth, _ = jwt_auth(server, resource)
    for secret in (json.dumps(public).encode(), b64url_decode(public["n"])):
        header = b64url_encode(json.dumps({"alg": "HS256", "kid": public["kid"], "typ": "at+jwt"}).encode())
        body = b64url_encode(json.dumps(server_claims(server, resource)).encode())
        mac = hmac.new(secret, f"{header}.{body}".encode(), hashlib.sha256).digest()
        error = refused(auth, f"{header}.{body}.{b64url_encode(mac)}")
        assert error.status == 401 and "'HS256' is not accepted" in error.description


@pytest.mark.parametrize("alg", ["RS256", "ES256"])
def test_tampered_tokens_are_refused(server, alg):
    resource = ALGORITHMS[alg]
    token = server.token(resource, "mcp:read")
    head, payload, signature = token.split(".")
    raised = b64url_encode(json.dumps(dict(claims_of(token), scope="mcp:read mcp:admin")).encode())
    flipped = signature[:10] + ("A" if signature[10] != "A" else "B") + signature[11:]
    auth, _ = jwt_auth(server, resource)
    for tampered in (f"{head}.{raised}.{signature}", f"{head}.{payload}.{flipped}", f"{head}.{payload}",
                     f"{head}.{payload}.{signature}.{signature}", token + "A" * 20_000):
        assert refused(auth, tampered).status == 401
    assert auth.authenticate(f"Bearer {token}").scopes == {"mcp:read"}


# --- key rotation ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("keep_old", [True, False])
def test_a_key_rotation_at_the_server_is_picked_up(fresh_server, keep_old):
    resource = RESOURCES["es256"]
    auth, validator = jwt_auth(fresh_server, resource, refresh_floor=0.5)
    old = fresh_server.token(resource)
    assert auth.authenticate(f"Bearer {old}").subject == "mcp-client"
    fresh_server.rotate(keep_old=keep_old)
    time.sleep(0.6)  # past the refresh floor
    new = fresh_server.token(resource)
    assert json.loads(b64url_decode(new.split(".")[0]))["kid"] == "ec-2"
    assert auth.authenticate(f"Bearer {new}").subject == "mcp-client"
    assert validator.keys.fetches == 2 and fresh_server.stats()["jwks"] == 2
    # A new authenticator (no cached decision) shares the validator, which now has only what the server publishes.
    uncached = Authenticator(validator, required_scopes=["mcp:read"])
    if keep_old:
        assert uncached.authenticate(f"Bearer {old}").subject == "mcp-client"
        assert validator.keys.fetches == 2
    else:
        # the key set fetched for ec-2 lacks ec-1: it is gone, and no fetch more is needed to say so
        assert "no key has the id 'ec-1'" in refused(uncached, old).description
        assert validator.keys.fetches == 2


# --- introspection (RFC 7662) -------------------------------------------------------------------------------------

def introspection_auth(server, resource, secret=RESOURCE_SERVER[1]):
    validator = IntrospectionValidator(issuer=server.issuer, client_id=RESOURCE_SERVER[0], client_secret=secret,
                                       audience=resource, leeway=0)
    return Authenticator(validator, resource_metadata_url=resource_metadata_url(resource),
                         required_scopes=["mcp:read"])


def test_an_opaque_token_is_introspected_once_and_cached(server):
    resource = RESOURCES["opaque"]
    auth = introspection_auth(server, resource)
    token = server.token(resource, "mcp:read mcp:write")
    assert token.count(".") == 0
    before = server.stats()["introspection"]
    for _ in range(20):
        principal = auth.authenticate(f"Bearer {token}")
    assert (principal.subject, principal.client_id) == (None, "mcp-client")
    assert principal.scopes == {"mcp:read", "mcp:write"}
    assert principal.expires_at is not None and principal.expires_at > time.time()
    assert server.stats()["introspection"] == before + 1


def test_revoked_unknown_and_foreign_tokens_are_refused_by_introspection(server):
    resource = RESOURCES["opaque"]
    token = server.token(resource)
    server.revoke(token)
    assert "not active" in refused(introspection_auth(server, resource), token).description
    assert "not active" in refused(introspection_auth(server, resource), "no-such-token-0123456789").description
    other = server.token(RESOURCES["brief"])
    assert "audience" in refused(introspection_auth(server, resource), other).description
    jwt = server.token(RESOURCES["es256"])  # JWTs cannot be introspected at oidc-provider: it answers 400
    assert refused(introspection_auth(server, RESOURCES["es256"]), jwt).status == 401


def test_an_expired_opaque_token_is_inactive(server):
    token = server.token(RESOURCES["brief"])  # lives 1 second
    time.sleep(2.1)
    assert "not active" in refused(introspection_auth(server, RESOURCES["brief"]), token).description


def test_wrong_resource_server_credentials_are_a_503_not_a_401(server):
    resource = RESOURCES["opaque"]
    error = refused(introspection_auth(server, resource, secret="wrong"), server.token(resource))
    assert isinstance(error, AuthUnavailable) and error.status == 503 and "401" in error.description

