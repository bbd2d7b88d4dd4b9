"""mcpserver.auth without a network: claims, validators, the Authenticator's answers and caches, RFC 9728.

The authorization server's side (discovery, JWKS, introspection over HTTP) is tested against a real
one in tests/auth/. Here, a validator's `fetch` is a plain function that serves documents, so the
key-refresh rules can be driven step by step with a clock the test controls.
"""

import threading
import time

import pytest
from jose_keys import EC_JWK, RSA_JWK, ec_keypair, sign
from mcpserver.auth import (
    Authenticator,
    AuthUnavailable,
    InsufficientScope,
    IntrospectionValidator,
    InvalidToken,
    JwtValidator,
    MalformedRequest,
    MissingToken,
    Principal,
    StaticTokens,
    canonical_resource,
    check_claims,
    metadata_urls,
    resource_metadata,
    resource_metadata_paths,
    resource_metadata_url,
    www_authenticate,
)

ISSUER = "https://auth.example.com"
RESOURCE = "https://mcp.example.com/mcp"
NOW = 1_800_000_000.0


class Clock:
    def __init__(self, now=NOW):
        self.now = now

    def __call__(self):
        return self.now


def claims(**changes):
    base = {"iss": ISSUER, "aud": RESOURCE, "sub": "alice", "client_id": "app", "exp": NOW + 300, "iat": NOW,
            "scope": "mcp:read mcp:write"}
    base.update(changes)
    return {name: value for name, value in base.items() if value is not None}


def validator(clock=None, **options):
    return JwtValidator(issuer=ISSUER, audience=RESOURCE, jwks={"keys": [RSA_JWK, EC_JWK]},
                        clock=clock or Clock(), **options)


# --- claims ---------------------------------------------------------------------------------------------------

CHECK = {"now": NOW, "leeway": 60, "audiences": frozenset([RESOURCE]), "issuer": ISSUER}


@pytest.mark.parametrize(("changes", "message"), [
    ({"exp": NOW - 61}, "expired"),
    ({"exp": None}, "no expiry"),
    ({"exp": "tomorrow"}, "not a number"),
    ({"exp": True}, "not a number"),
    ({"exp": float("nan")}, "not a number"),
    ({"nbf": NOW + 61}, "not valid yet"),
    ({"nbf": "now"}, "not valid yet"),
    ({"iss": "https://auth.example.com/"}, "issued by"),
    ({"iss": None}, "issued by"),
    ({"aud": "https://mcp.example.com/mcp/"}, "audience"),
    ({"aud": "https://other.example.com/mcp"}, "audience"),
    ({"aud": ["https://other.example.com", 5]}, "audience"),
    ({"aud": None}, "audience"),
    ({"aud": {"url": RESOURCE}}, "audience"),
])
def test_claims_that_fail(changes, message):
    with pytest.raises(InvalidToken, match=message):
        check_claims(claims(**changes), **CHECK)


@pytest.mark.parametrize("changes", [
    {}, {"exp": NOW - 59}, {"nbf": NOW + 59}, {"aud": ["https://other.example.com", RESOURCE]}])
def test_claims_that_pass_including_within_the_leeway(changes):
    check_claims(claims(**changes), **CHECK)


def test_principal_from_claims_merges_scope_and_scp():
    principal = Principal.from_claims(claims(scope="a b", scp=["c", 7], client_id=None, azp="the-app"))
    assert principal.scopes == {"a", "b", "c"}
    assert principal.client_id == "the-app"
    assert principal.subject == "alice" and principal.expires_at == NOW + 300
    assert principal.has_scopes("a", "c") and not principal.has_scopes("d")
    with pytest.raises(TypeError):
        principal.claims["sub"] = "mallory"


# --- the JWT validator with a fixed key set --------------------------------------------------------------------

@pytest.mark.parametrize(("alg", "kid"), [("RS256", "rsa-1"), ("ES256", "ec-1")])
def test_jwt_validator_accepts_a_good_token(alg, kid):
    principal = validator()(sign(claims(), alg=alg, kid=kid))
    assert (principal.subject, principal.client_id, principal.scopes) == ("alice", "app", {"mcp:read", "mcp:write"})
    assert principal.claims["iss"] == ISSUER


@pytest.mark.parametrize(("token", "message"), [
    (sign(claims(exp=NOW - 120), kid="ec-1"), "expired"),
    (sign(claims(nbf=NOW + 120), kid="ec-1"), "not valid yet"),
    (sign(claims(aud="https://evil.example.com/mcp"), kid="ec-1"), "audience"),
    (sign(claims(iss="https://evil.example.com"), kid="ec-1"), "issued by"),
    (sign(claims(), kid="unknown"), "no key has the id"),
    (sign(claims(), {"alg": "none"}), "alg none"),
    ("not-a-jwt", "three dot-separated parts"),
])
def test_jwt_validator_refuses(token, message):
    with pytest.raises(InvalidToken, match=message):
        validator()(token)


def test_jwt_validator_checks_typ_and_algorithms_when_asked():
    strict = validator(token_types=["at+jwt", "application/at+jwt"], algorithms=["ES256"])
    assert strict(sign(claims(), {"alg": "ES256", "kid": "ec-1", "typ": "at+JWT"})).subject == "alice"
    with pytest.raises(InvalidToken, match="typ"):
        strict(sign(claims(), {"alg": "ES256", "kid": "ec-1", "typ": "JWT"}))
    with pytest.raises(InvalidToken, match="'RS256' is not accepted"):
        strict(sign(claims(), {"alg": "RS256", "kid": "rsa-1", "typ": "at+jwt"}))
    with pytest.raises(ValueError, match="HS256"):
        validator(algorithms=["HS256"])
    with pytest.raises(ValueError, match="audience"):
        JwtValidator(issuer=ISSUER, audience=[], jwks={"keys": [EC_JWK]})


# --- the JWT validator fetching keys: discovery, refresh on unknown kid, the floor -----------------------------

class AuthorizationServer:
    """Serves metadata and a key set the test can change, and counts what was asked."""

    def __init__(self, keys, metadata_issuer=ISSUER):
        self.keys = keys
        self.metadata_issuer = metadata_issuer
        self.requests = []
        self.down = False

    def __call__(self, url, timeout=None, data=None, headers=None):
        self.requests.append(url)
        if self.down:
            raise AuthUnavailable(f"the authorization server could not be reached at {url}")
        if url == "https://auth.example.com/.well-known/oauth-authorization-server":
            return {"issuer": self.metadata_issuer, "jwks_uri": "https://auth.example.com/jwks"}
        if url == "https://auth.example.com/jwks":
            return {"keys": list(self.keys)}
        raise AuthUnavailable(f"the authorization server answered 404 at {url}")

    def jwks_fetches(self):
        return self.requests.count("https://auth.example.com/jwks")


def fetching_validator(server, clock, **options):
    return JwtValidator(issuer=ISSUER, audience=RESOURCE, fetch=server, clock=clock, **options)


def test_keys_are_discovered_once_and_reused():
    server, clock = AuthorizationServer([EC_JWK]), Clock()
    check = fetching_validator(server, clock)
    for _ in range(3):
        assert check(sign(claims(), kid="ec-1")).subject == "alice"
    assert server.requests == ["https://auth.example.com/.well-known/oauth-authorization-server",
                               "https://auth.example.com/jwks"]


def test_metadata_for_another_issuer_is_refused():
    check = fetching_validator(AuthorizationServer([EC_JWK], metadata_issuer="https://evil.example.com"), Clock())
    with pytest.raises(AuthUnavailable, match=r"for issuer 'https://evil\.example\.com'"):
        check(sign(claims(), kid="ec-1"))


def test_a_rotated_key_is_fetched_once_and_unknown_kids_never_more_often_than_the_floor():
    d2, jwk2 = ec_keypair()
    server, clock = AuthorizationServer([EC_JWK]), Clock()
    check = fetching_validator(server, clock, refresh_floor=60)
    check(sign(claims(), kid="ec-1"))
    clock.now += 1  # however recent the first fetch, a new kid is looked for at once
    server.keys = [EC_JWK, dict(jwk2, kid="ec-2")]  # the server rotates in a new key
    assert check(sign(claims(), kid="ec-2", ec_d=d2)).subject == "alice"
    assert server.jwks_fetches() == 2
    for attempt in range(20):  # an attacker's random kids, right after: no fetch at all, and 401
        clock.now += 1
        with pytest.raises(InvalidToken, match="no key has the id"):  # the keys fetched for ec-2 lack them
            check(sign(claims(), kid=f"random-{attempt}"))
    assert server.jwks_fetches() == 2
    clock.now += 40  # the floor ends: the next unknown kid is looked for again
    with pytest.raises(InvalidToken, match="no key has the id"):
        check(sign(claims(), kid="random-again"))
    assert server.jwks_fetches() == 3


def test_an_unknown_kid_is_503_only_while_the_key_set_cannot_be_fetched():
    server, clock = AuthorizationServer([EC_JWK]), Clock()
    check = fetching_validator(server, clock, refresh_floor=60)
    check(sign(claims(), kid="ec-1"))
    server.down = True
    with pytest.raises(AuthUnavailable, match="could not be reached"):  # the fetch for it failed
        check(sign(claims(), kid="new-1"))
    clock.now += 20
    with pytest.raises(AuthUnavailable, match="could not be fetched again") as refused:  # nor fetched since
        check(sign(claims(), kid="new-2"))
    assert refused.value.headers() == [("Retry-After", "40")]  # when the floor lets it be tried again
    assert check(sign(claims(), kid="ec-1")).subject == "alice"  # the keys it has still serve
    assert server.jwks_fetches() == 2
    server.down = False
    clock.now += 40
    with pytest.raises(InvalidToken, match="no key has the id"):
        check(sign(claims(), kid="new-2"))
    assert server.jwks_fetches() == 3


def fetched(server, check):
    """How often the key set was asked for, once the background refresh of stale keys (if any) has ended."""
    deadline = time.monotonic() + 10
    while check.keys._running is not None and time.monotonic() < deadline:
        time.sleep(0.001)
    return server.jwks_fetches()


def test_keys_expire_after_max_age_and_survive_an_outage():
    server, clock = AuthorizationServer([EC_JWK]), Clock()
    check = fetching_validator(server, clock, jwks_max_age=600, refresh_floor=60)
    check(sign(claims(), kid="ec-1"))
    clock.now += 601
    server.down = True
    for _ in range(3):  # stale keys still serve; the failed fetch is not retried before the floor
        assert check(sign(claims(exp=clock.now + 60), kid="ec-1")).subject == "alice"
    assert fetched(server, check) == 2
    server.down = False
    clock.now += 61
    check(sign(claims(exp=clock.now + 60), kid="ec-1"))
    assert fetched(server, check) == 3
    clock.now += 61
    check(sign(claims(exp=clock.now + 60), kid="ec-1"))
    assert server.jwks_fetches() == 3  # fresh again until max_age


def test_an_unreachable_server_is_503_and_is_not_hammered():
    server, clock = AuthorizationServer([EC_JWK]), Clock()
    server.down = True
    check = fetching_validator(server, clock, refresh_floor=30)
    for _ in range(5):
        with pytest.raises(AuthUnavailable):
            check(sign(claims(), kid="ec-1"))
    assert len(server.requests) == 2  # both metadata URLs, once
    server.down = False
    clock.now += 31
    assert check(sign(claims(), kid="ec-1")).subject == "alice"


def test_metadata_urls_follow_rfc8414_and_oidc():
    assert metadata_urls("https://as.example.com") == (
        "https://as.example.com/.well-known/oauth-authorization-server",
        "https://as.example.com/.well-known/openid-configuration")
    assert metadata_urls("https://as.example.com/tenant/1") == (
        "https://as.example.com/.well-known/oauth-authorization-server/tenant/1",
        "https://as.example.com/tenant/1/.well-known/openid-configuration")


def test_plain_http_is_refused_off_loopback():
    with pytest.raises(ValueError, match="https"):
        JwtValidator(issuer=ISSUER, audience=RESOURCE, jwks_uri="http://auth.example.com/jwks")
    JwtValidator(issuer=ISSUER, audience=RESOURCE, jwks_uri="http://127.0.0.1:9/jwks")
    with pytest.raises(ValueError, match="https"):
        IntrospectionValidator(client_id="c", client_secret="s", audience=RESOURCE,
                               endpoint="http://auth.example.com/introspect")


# --- introspection: what is sent, and what an answer must say -------------------------------------------------

class Introspection:
    def __init__(self, answer):
        self.answer = answer
        self.sent = []

    def __call__(self, url, timeout=None, data=None, headers=None):
        self.sent.append((url, data, headers))
        return self.answer


def introspect(answer, **options):
    server = Introspection(answer)
    check = IntrospectionValidator(client_id="mcp server", client_secret="s3cr:t&=", audience=RESOURCE,
                                   endpoint="https://auth.example.com/introspect", issuer=ISSUER,
                                   clock=Clock(), fetch=server, **options)
    return check, server


def test_introspection_sends_the_token_with_client_secret_basic():
    check, server = introspect({"active": True, **claims()})
    assert check("opaque-token").subject == "alice"
    url, data, headers = server.sent[0]
    assert url == "https://auth.example.com/introspect"
    assert data == b"token=opaque-token&token_type_hint=access_token"
    # RFC 6749 §2.3.1: form-encode id and secret, then base64 "id:secret"
    assert headers["Authorization"] == "Basic bWNwK3NlcnZlcjpzM2NyJTNBdCUyNiUzRA=="


def test_introspection_with_client_secret_post():
    check, server = introspect({"active": True, **claims()}, auth_method="client_secret_post")
    check("t")
    _, data, headers = server.sent[0]
    assert "Authorization" not in headers
    assert data == b"token=t&token_type_hint=access_token&client_id=mcp+server&client_secret=s3cr%3At%26%3D"


@pytest.mark.parametrize(("answer", "message"), [
    ({"active": False}, "not active"),
    ({"active": "true", **claims()}, "not active"),
    ({}, "not active"),
    ({"active": True, **claims(aud=None)}, "audience"),
    ({"active": True, **claims(aud="https://other.example.com")}, "audience"),
    ({"active": True, **claims(exp=NOW - 100)}, "expired"),
    ({"active": True, **claims(iss="https://evil.example.com")}, "issued by"),
    ({"active": True, "token_type": "refresh_token", **claims()}, "not an access token"),
])
def test_introspection_answers_that_refuse(answer, message):
    check, _ = introspect(answer)
    with pytest.raises(InvalidToken, match=message):
        check("t")


def test_introspection_without_exp_is_accepted_without_expiry():
    check, _ = introspect({"active": True, **claims(exp=None, iss=None)})
    assert check("t").expires_at is None


# --- the Authenticator: statuses, challenges, caches ---------------------------------------------------------------

class Counting:
    def __init__(self, inner):
        self.inner = inner
        self.calls = 0

    def __call__(self, token):
        self.calls += 1
        return self.inner(token)


METADATA_URL = resource_metadata_url(RESOURCE)


def authenticator(inner, clock=None, **options):
    counting = Counting(inner)
    options.setdefault("required_scopes", ["mcp:read"])
    return Authenticator(counting, resource_metadata_url=METADATA_URL, clock=clock or Clock(), **options), counting


def refusal(auth, header):
    with pytest.raises(Exception) as caught:
        auth.authenticate(header)
    return caught.value


def test_missing_or_foreign_credentials_get_401_without_an_error_code():
    auth, _ = authenticator(StaticTokens(["tok"], scopes=["mcp:read"]))
    for header in (None, "", "Basic dXNlcjpwYXNz", "Token abc"):
        error = refusal(auth, header)
        assert isinstance(error, MissingToken) and error.status == 401
        assert error.headers() == [("WWW-Authenticate", f'Bearer resource_metadata="{METADATA_URL}", '
                                                        'scope="mcp:read"')]


def test_malformed_bearer_headers():
    auth, counting = authenticator(StaticTokens(["tok"], scopes=["mcp:read"]))
    empty = refusal(auth, "Bearer   ")
    assert isinstance(empty, MalformedRequest) and empty.status == 400 and 'error="invalid_request"' in \
        empty.www_authenticate
    for header in ("Bearer tok en", "Bearer tök", "Bearer " + "a" * 17_000, "Bearer a\x00b"):
        error = refusal(auth, header)
        assert isinstance(error, InvalidToken) and error.status == 401, header[:20]
    assert counting.calls == 0


def test_a_valid_token_passes_and_the_scheme_is_case_insensitive():
    auth, _ = authenticator(StaticTokens({"tok": Principal("bob", scopes=frozenset({"mcp:read"}))}))
    assert auth.authenticate("Bearer tok").subject == "bob"
    assert auth.authenticate("bearer tok").subject == "bob"
    assert auth.authenticate("BEARER  tok ").subject == "bob"


def test_an_invalid_token_gets_401_invalid_token_with_a_description():
    auth, _ = authenticator(validator())
    error = refusal(auth, "Bearer " + sign(claims(exp=NOW - 3600), kid="ec-1"))
    assert isinstance(error, InvalidToken) and error.status == 401
    assert error.www_authenticate == (f'Bearer resource_metadata="{METADATA_URL}", scope="mcp:read", '
                                      'error="invalid_token", error_description="the token has expired"')


def test_missing_scope_gets_403_insufficient_scope():
    auth, _ = authenticator(validator(), required_scopes=["mcp:admin", "mcp:read"])
    error = refusal(auth, "Bearer " + sign(claims(), kid="ec-1"))
    assert isinstance(error, InsufficientScope) and error.status == 403
    assert 'error="insufficient_scope"' in error.www_authenticate
    assert 'scope="mcp:admin mcp:read"' in error.www_authenticate
    assert "lacks the scope mcp:admin" in error.description


def test_an_unavailable_server_gets_503_with_retry_after_and_is_not_cached():
    def down(token):
        raise AuthUnavailable("the authorization server could not be reached")
    auth, counting = authenticator(down)
    for _ in range(2):
        error = refusal(auth, "Bearer tok")
        assert isinstance(error, AuthUnavailable) and error.status == 503
        assert error.headers() == [("Retry-After", "5")]
    assert counting.calls == 2


def test_a_user_callable_is_a_validator_and_none_means_invalid():
    auth, _ = authenticator(lambda token: Principal("carol", scopes=frozenset({"mcp:read"})) if token == "ok" else None)
    assert auth.authenticate("Bearer ok").subject == "carol"
    assert "not recognised" in refusal(auth, "Bearer nope").description


def test_a_valid_token_is_validated_once_until_it_expires():
    clock = Clock()
    auth, counting = authenticator(validator(clock), clock=clock)
    header = "Bearer " + sign(claims(exp=NOW + 100), kid="ec-1")
    for _ in range(50):
        assert auth.authenticate(header).subject == "alice"
    assert counting.calls == 1
    clock.now = NOW + 100.5  # past exp, inside the validator's leeway: checked again, still valid
    auth.authenticate(header)
    assert counting.calls == 2
    clock.now = NOW + 161
    assert "expired" in refusal(auth, header).description


def test_the_cache_is_capped_by_max_cache_seconds():
    clock = Clock()
    auth, counting = authenticator(StaticTokens(["tok"], scopes=["mcp:read"]), clock=clock, max_cache_seconds=10)
    auth.authenticate("Bearer tok")
    clock.now += 5
    auth.authenticate("Bearer tok")
    assert counting.calls == 1
    clock.now += 6
    auth.authenticate("Bearer tok")
    assert counting.calls == 2


def test_refusals_are_remembered_briefly():
    clock = Clock()
    auth, counting = authenticator(validator(clock), clock=clock, refusal_seconds=10)
    header = "Bearer " + sign(claims(aud="https://other.example.com"), kid="ec-1")
    for _ in range(5):
        assert "audience" in refusal(auth, header).description
    assert counting.calls == 1
    clock.now += 11
    refusal(auth, header)
    assert counting.calls == 2


def test_the_caches_are_bounded_and_garbage_cannot_evict_good_tokens():
    tokens = {f"good{i}": Principal(f"user{i}", scopes=frozenset({"mcp:read"})) for i in range(5)}
    auth, counting = authenticator(StaticTokens(tokens), cache_size=5, refusal_cache_size=3)
    for token in tokens:
        auth.authenticate(f"Bearer {token}")
    for i in range(100):
        refusal(auth, f"Bearer garbage{i}")
    calls = counting.calls
    for token in tokens:
        auth.authenticate(f"Bearer {token}")
    assert counting.calls == calls
    assert len(auth._accepted) == 5 and len(auth._refused) == 3
    auth.authenticate("Bearer good0")
    for i in range(5):  # a sixth good token evicts the oldest
        auth.authenticate(f"Bearer good{i}")
    assert len(auth._accepted) <= 5


def test_many_threads_share_one_authenticator():
    tokens = {f"t{i}": Principal(f"u{i}", scopes=frozenset({"mcp:read"})) for i in range(50)}
    auth, _ = authenticator(StaticTokens(tokens), cache_size=16)
    failures = []

    def work(offset):
        for round_ in range(200):
            i = (offset + round_) % 50
            try:
                if auth.authenticate(f"Bearer t{i}").subject != f"u{i}":
                    failures.append(i)
            except Exception as error:  # any exception here is the failure looked for
                failures.append(repr(error))
    threads = [threading.Thread(target=work, args=(n * 7,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


# --- static tokens ------------------------------------------------------------------------------------------------

def test_static_tokens_from_a_file(tmp_path):
    path = tmp_path / "tokens"
    path.write_text("# token subject scopes\n\nabc123 ci-bot mcp:read mcp:write\n  xyz789\n", encoding="utf-8")
    tokens = StaticTokens.from_file(str(path))
    assert tokens("abc123") == Principal("ci-bot", scopes=frozenset({"mcp:read", "mcp:write"}))
    assert tokens("xyz789").subject == "static"
    assert tokens("abc12") is None and tokens("abc1234") is None
    path.write_text("a\na\n", encoding="utf-8")
    with pytest.raises(ValueError, match=":2: this token is already listed"):
        StaticTokens.from_file(str(path))
    path.write_text("# nothing\n", encoding="utf-8")
    with pytest.raises(ValueError, match="lists no token"):
        StaticTokens.from_file(str(path))
    with pytest.raises(ValueError, match="visible ASCII"):
        StaticTokens(["with space"])


# --- RFC 9728 metadata and the challenge ---------------------------------------------------------------------------

def test_resource_metadata_url_and_paths():
    assert resource_metadata_url("https://mcp.example.com/mcp") == \
        "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
    assert resource_metadata_url("https://mcp.example.com") == \
        "https://mcp.example.com/.well-known/oauth-protected-resource"
    assert resource_metadata_paths("https://x.example/a/mcp") == (
        "/.well-known/oauth-protected-resource/a/mcp", "/.well-known/oauth-protected-resource")
    assert resource_metadata_paths("https://x.example") == ("/.well-known/oauth-protected-resource",)


def test_canonical_resource():
    assert canonical_resource("HTTPS://MCP.Example.COM:443/mcp/") == "https://mcp.example.com/mcp"
    assert canonical_resource("http://127.0.0.1:8000/mcp") == "http://127.0.0.1:8000/mcp"
    assert canonical_resource("http://[::1]:80/") == "http://[::1]"
    for bad in ("mcp.example.com/mcp", "ftp://x/mcp", "https://x/mcp#frag", "https://u:p@x/mcp", "https:///mcp"):
        with pytest.raises(ValueError):
            canonical_resource(bad)


def test_resource_metadata_document():
    assert resource_metadata(RESOURCE, [ISSUER], scopes_supported=["b", "a", "a"], resource_name="Demo") == {
        "resource": RESOURCE, "authorization_servers": [ISSUER], "scopes_supported": ["a", "b"],
        "bearer_methods_supported": ["header"], "resource_name": "Demo"}


def test_www_authenticate_cannot_be_used_for_header_injection():
    value = www_authenticate(error="invalid_token", error_description='bad "x"\r\nSet-Cookie: a=b\\ é')
    assert value == 'Bearer error="invalid_token", error_description="bad xSet-Cookie: a=b "'
    assert www_authenticate() == "Bearer"
    assert www_authenticate(realm="mcp") == 'Bearer realm="mcp"'
