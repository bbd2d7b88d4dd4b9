"""The OAuth resource server over real sockets, with no network beyond loopback.

`python -m mcpserver --http --resource URL --authorization-server ISSUER --scope mcp:read` runs as a
real process. The authorization server here is a stand-in on 127.0.0.1 that serves only what a
resource server reads from one (RFC 8414 metadata and the key set), while the tests sign tokens with
tests/jose_keys.py; so this suite runs in every lab cell. The same against a real authorization
server (oidc-provider), and the official client's OAuth flow, are tests/auth/test_resource_server.py.
"""

import json
import os
import subprocess
import time

import pytest
from jose_keys import EC_JWK, RSA_JWK, KeyServer, ec_keypair, encode_part, hs256_with_public_key, sign
from mcptest import (
    EXAMPLES,
    HAS_GUNICORN,
    HttpServer,
    call,
    free_port,
    gunicorn_server,
    mcp_headers,
    request,
    server_command,
)

try:
    import ssl  # noqa: F401
    HAS_SSL = True
except ImportError:  # a Python built without OpenSSL (the lab's musl cell)
    HAS_SSL = False

ACCOUNTS = os.path.join(EXAMPLES, "accounts.py")
INTERACTIVE = os.path.join(EXAMPLES, "interactive.py")


@pytest.fixture(scope="module")
def issuer():
    server = KeyServer()
    yield server
    server.stop()


def oauth_server(issuer, *extra, scopes=("mcp:read",), target=ACCOUNTS):
    port = free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    options = ["--port", str(port), "--resource", resource, "--authorization-server", issuer.issuer]
    for scope in scopes:
        options += ["--scope", scope]
    return HttpServer(target, *options, *extra)


@pytest.fixture(scope="module")
def accounts(issuer):
    with oauth_server(issuer) as server:
        yield server


def claims(issuer, server, **changes):
    now = int(time.time())
    base = {"iss": issuer.issuer, "aud": server.url, "sub": "alice", "client_id": "app", "iat": now,
            "exp": now + 300, "scope": "mcp:read"}
    base.update(changes)
    return {name: value for name, value in base.items() if value is not None}


def authorized(message, token):
    return dict(mcp_headers(message), Authorization=f"Bearer {token}")


def post_with(server, message, token):
    return server.post(message, headers=authorized(message, token))


def metadata_url(server):
    return f"http://127.0.0.1:{server.port}/.well-known/oauth-protected-resource/mcp"


# --- discovery: RFC 9728 metadata and the 401 that points to it --------------------------------------------------

def test_the_metadata_is_served_at_both_well_known_paths(accounts, issuer):
    expected = {"resource": accounts.url, "authorization_servers": [issuer.issuer],
                "scopes_supported": ["mcp:read", "mcp:write"],  # --scope's, and rename_account's own
                "bearer_methods_supported": ["header"]}
    for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
        status, headers, body = accounts.post(method="GET", path=path, headers={})
        assert (status, body) == (200, expected)
        assert headers["access-control-allow-origin"] == "*"  # public: browser clients discover with it
    status, headers, _ = accounts.post(method="POST", path="/.well-known/oauth-protected-resource", body=b"{}",
                                       headers={})
    assert status == 405 and "GET" in headers["allow"]
    assert accounts.post(method="GET", path="/.well-known/oauth-protected-resource/other", headers={})[0] == 404


def test_a_request_without_a_token_gets_401_pointing_at_the_metadata(accounts):
    status, headers, body = accounts.post(call("whoami"))
    assert status == 401
    assert headers["www-authenticate"] == f'Bearer resource_metadata="{metadata_url(accounts)}", scope="mcp:read"'
    assert b"Bearer" in body  # a plain-text explanation, never a JSON-RPC result


# --- tokens that pass: the principal reaches the tool, the token does not -------------------------------------------

@pytest.mark.parametrize("alg, kid", [("RS256", "rsa-1"), ("ES256", "ec-1")])
def test_a_token_signed_with_the_issuers_key_reaches_the_tool_as_a_principal(accounts, issuer, alg, kid):
    token = sign(claims(issuer, accounts, scope="mcp:read mcp:write"), alg=alg, kid=kid)
    status, _, body = post_with(accounts, call("whoami"), token)
    assert status == 200, body
    seen = body["result"]["structuredContent"]
    assert seen == {"authenticated": True, "subject": "alice", "client_id": "app", "scopes": ["mcp:read", "mcp:write"]}
    assert token not in json.dumps(body)


def test_a_tool_checks_a_scope_itself(accounts, issuer):
    reader = sign(claims(issuer, accounts), kid="ec-1")
    body = post_with(accounts, call("close_account", account="acme"), reader)[2]
    assert body["result"]["isError"] is True and "mcp:admin" in body["result"]["content"][0]["text"]
    admin = sign(claims(issuer, accounts, scope="mcp:read mcp:admin"), kid="ec-1")
    body = post_with(accounts, call("close_account", account="acme"), admin)[2]
    assert body["result"]["content"][0]["text"] == "closed acme for alice"


def test_every_method_needs_the_token_not_only_tools(accounts, issuer):
    assert accounts.post(request("tools/list"))[0] == 401
    token = sign(claims(issuer, accounts), kid="ec-1")
    assert post_with(accounts, request("tools/list"), token)[0] == 200


def test_a_token_without_the_required_scope_gets_403_insufficient_scope(accounts, issuer):
    token = sign(claims(issuer, accounts, scope="mcp:write"), kid="ec-1")
    status, headers, _ = post_with(accounts, call("whoami"), token)
    assert status == 403
    assert headers["www-authenticate"] == (f'Bearer resource_metadata="{metadata_url(accounts)}", scope="mcp:read", '
                                           'error="insufficient_scope", error_description="the token lacks the '
                                           'scope mcp:read"')


def test_a_request_state_is_bound_to_the_principal_it_was_issued_to(issuer):
    """Bob must not resume (and so complete) a request that asked Alice to confirm something."""
    with oauth_server(issuer, target=INTERACTIVE) as server:
        alice = sign(claims(issuer, server), kid="ec-1")
        bob = sign(claims(issuer, server, sub="bob"), kid="ec-1")
        ask = call("delete_file", path="/tmp/x")
        ask["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] = {"elicitation": {}}
        first = post_with(server, ask, alice)[2]["result"]
        assert first["resultType"] == "input_required"
        key = next(iter(first["inputRequests"]))
        ask["params"].update(requestState=first["requestState"],
                             inputResponses={key: {"action": "accept", "content": {"confirm": True}}})
        status, _, body = post_with(server, ask, bob)
        assert status == 200 and body["error"]["code"] == -32602
        assert "issued to another client" in body["error"]["message"]
        body = post_with(server, ask, alice)[2]
        assert body["result"]["content"][0]["text"] == "Deleted /tmp/x."


# --- tokens that do not -----------------------------------------------------------------------------------------

def forgeries(issuer, server):
    """(name, token, what the refusal says) for every way a token here can be wrong."""
    now = int(time.time())
    outsider_d, _ = ec_keypair()
    good = sign(claims(issuer, server), kid="ec-1")
    header, payload, signature = good.split(".")
    tampered = encode_part(dict(claims(issuer, server), sub="mallory"))
    rsa_public = json.dumps(RSA_JWK, sort_keys=True).encode()
    return [
        ("expired", sign(claims(issuer, server, exp=now - 3600), kid="ec-1"), "expired"),
        ("not yet valid", sign(claims(issuer, server, nbf=now + 3600), kid="ec-1"), "not valid yet"),
        ("another audience", sign(claims(issuer, server, aud="https://other.example.com/mcp"), kid="ec-1"),
         "audience"),
        ("another issuer", sign(claims(issuer, server, iss="https://evil.example.com"), kid="ec-1"), "issued by"),
        ("an unknown key", sign(claims(issuer, server), kid="ec-9", ec_d=outsider_d), "no key has the id"),
        ("a known kid, another key", sign(claims(issuer, server), kid="ec-1", ec_d=outsider_d), "signature does not"),
        ("alg none", f"{encode_part({'alg': 'none'})}.{payload}.", "alg none"),
        ("HS256 with the public key", hs256_with_public_key(claims(issuer, server), rsa_public, kid="rsa-1"),
         "HS256"),
        ("a tampered payload", f"{header}.{tampered}.{signature}", "signature"),
        ("not a JWT", "opaque-garbage", "JWS"),
    ]


def test_forged_and_wrong_tokens_get_401_invalid_token(accounts, issuer):
    for name, token, reason in forgeries(issuer, accounts):
        status, headers, _ = post_with(accounts, call("whoami"), token)
        assert status == 401, name
        challenge = headers["www-authenticate"]
        assert challenge.startswith(f'Bearer resource_metadata="{metadata_url(accounts)}", scope="mcp:read", '
                                    'error="invalid_token", error_description="'), (name, challenge)
        assert reason.lower() in challenge.lower(), (name, challenge)


def test_a_key_rotated_in_at_the_issuer_is_picked_up_at_once(issuer):
    with oauth_server(issuer) as server:
        first = sign(claims(issuer, server), kid="ec-1")
        assert post_with(server, call("whoami"), first)[0] == 200
        fetched = issuer.jwks_fetches
        new_d, new_jwk = ec_keypair()
        issuer.keys = [RSA_JWK, EC_JWK, dict(new_jwk, kid="ec-2")]
        try:
            rotated = sign(claims(issuer, server), kid="ec-2", ec_d=new_d)
            assert post_with(server, call("whoami"), rotated)[0] == 200
            assert issuer.jwks_fetches == fetched + 1
            for attempt in range(5):  # random kids right after: the keys just fetched lack them, so 401
                stranger = sign(claims(issuer, server), kid=f"random-{attempt}", ec_d=new_d)
                status, headers, _ = post_with(server, call("whoami"), stranger)
                assert status == 401 and 'error="invalid_token"' in headers["www-authenticate"]
            assert issuer.jwks_fetches == fetched + 1
        finally:
            issuer.keys = [RSA_JWK, EC_JWK]


# --- configuration: refused before serving, with the reason ---------------------------------------------------

@pytest.mark.parametrize("options, message", [
    (["--host", "0.0.0.0", "--resource", "https://mcp.example.com/mcp", "--authorization-server",
      "https://auth.example.com"], "refusing OAuth on 0.0.0.0 over plain HTTP"),
    (["--resource", "http://mcp.example.com/mcp", "--authorization-server", "https://auth.example.com"],
     "must be an https URL"),
    (["--resource", "http://127.0.0.1:3000/other", "--authorization-server", "https://auth.example.com"],
     "does not end with the endpoint path /mcp"),
    (["--resource", "http://127.0.0.1:3000/mcp"], "needs both --resource"),
    (["--resource", "http://127.0.0.1:3000/mcp", "--authorization-server", "https://auth.example.com",
      "--token", "secret"], "not both"),
    (["--tls-key", "/nonexistent.key"], "without a certificate"),
    (["--tls-cert", "/nonexistent.pem"], "cannot load the TLS certificate" if HAS_SSL else "without the ssl module"),
])
def test_unsafe_or_inconsistent_configurations_are_refused(options, message):
    done = subprocess.run(server_command(ACCOUNTS, "--http", "--port", "0", *options), capture_output=True,
                          text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert done.returncode == 1 and message in done.stderr, done.stderr


def test_behind_a_proxy_only_requests_it_marks_as_https_are_served(issuer):
    with oauth_server(issuer, "--behind-proxy") as server:
        token = sign(claims(issuer, server), kid="ec-1")
        for forwarded in (None, "http", "https, http"):
            headers = authorized(call("whoami"), token)
            if forwarded is not None:
                headers["X-Forwarded-Proto"] = forwarded
            status, _, body = server.post(call("whoami"), headers=headers)
            assert status == 403 and b"X-Forwarded-Proto: https" in body, forwarded
        headers = dict(authorized(call("whoami"), token), **{"X-Forwarded-Proto": "http, https"})
        assert server.post(call("whoami"), headers=headers)[0] == 200  # the nearest proxy's word counts


@pytest.mark.skipif(not HAS_GUNICORN, reason="gunicorn is not installed here")
def test_the_same_under_gunicorn_with_create_app(issuer, tmp_path):
    port = free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    (tmp_path / "wsgi.py").write_text(
        "from mcpserver.auth import ResourceServer\n"
        "from mcpserver.http import create_app\n"
        f"oauth = ResourceServer({resource!r}, [{issuer.issuer!r}], scopes=['mcp:read'])\n"
        f"app = create_app({ACCOUNTS!r}, oauth=oauth)\n")
    with gunicorn_server("wsgi:app", "-w", "2", "--chdir", str(tmp_path), port=port) as server:
        status, headers, _ = server.post(call("whoami"))
        assert status == 401 and f'resource_metadata="{metadata_url(server)}"' in headers["www-authenticate"]
        assert server.post(method="GET", path="/.well-known/oauth-protected-resource/mcp",
                           headers={})[2]["resource"] == resource
        token = sign(claims(issuer, server), kid="rsa-1", alg="RS256")
        for _ in range(4):  # whichever worker answers
            body = post_with(server, call("whoami"), token)[2]
            assert body["result"]["structuredContent"]["subject"] == "alice"


# --- /readyz: the authorization server's keys --------------------------------------------------------------------

def readiness_within(server, status, saying="", timeout=30):
    deadline = time.monotonic() + timeout
    while True:
        answer = server.post(method="GET", path="/readyz", headers={})
        if (answer[0] == status and saying in answer[2].decode()) or time.monotonic() > deadline:
            return answer[0], answer[2].decode()
        time.sleep(0.1)


def test_readiness_waits_for_the_authorization_servers_keys(issuer):
    fetches = issuer.jwks_fetches
    with oauth_server(issuer, "--health") as server:
        assert readiness_within(server, 200) == (200, "ready\n")  # no token asked for
        assert issuer.jwks_fetches > fetches  # fetched by the readiness check: no client had asked yet

    class Nowhere:
        issuer = f"http://127.0.0.1:{free_port()}"  # nothing listens there

    with oauth_server(Nowhere, "--health") as server:
        status, why = readiness_within(server, 503, "keys")
        assert status == 503 and why.startswith("not ready: the authorization server's keys are not here"), why
        assert server.post(method="GET", path="/healthz", headers={})[0] == 200
