"""mcpserver as an OAuth resource server, end to end, against a real authorization server (oidc-provider).

Each test starts `python -m mcpserver --http --resource URL --authorization-server ISSUER` as a real
process; tokens come from oidc-provider's client-credentials grant with the resource indicator
(RFC 8707) set to that URL. The official Python SDK's client (mcp, with its OAuth support) then
connects from nothing: 401, protected-resource metadata, authorization-server metadata, token,
tools/call. Run with `make test-auth` (part of `make test`).
"""

import asyncio
import hashlib
import hmac
import json
import os
import subprocess
import time

import pytest
from authorization_server import CLIENT, RESOURCE_SERVER, RESOURCES, AuthorizationServer
from mcpserver.auth._jose import b64url_decode, b64url_encode
from mcptest import EXAMPLES, HttpServer, call, free_port, mcp_headers

ACCOUNTS = os.path.join(EXAMPLES, "accounts.py")


@pytest.fixture(scope="module")
def authorization():
    started = AuthorizationServer()
    yield started
    started.stop()


def resource_server(authorization, path="/mcp", *extra, scopes=("mcp:read",)):
    resource = f"http://127.0.0.1:{free_port()}{path}"
    port = resource.split(":")[2].split("/")[0]
    options = ["--port", port, "--path", path, "--resource", resource, "--authorization-server",
               authorization.issuer]
    for scope in scopes:
        options += ["--scope", scope]
    return HttpServer(ACCOUNTS, *options, *extra)


def whoami(server, token):
    message = call("whoami")
    return server.post(message, headers=dict(mcp_headers(message), Authorization=f"Bearer {token}"))


@pytest.mark.parametrize("path, alg", [("/mcp", "RS256"), ("/es256", "ES256")])
def test_tokens_the_server_issues_for_this_resource_are_accepted(authorization, path, alg):
    with resource_server(authorization, path) as server:
        token = authorization.token(server.url, "mcp:read mcp:write")
        status, _, body = whoami(server, token)
        assert status == 200, body
        assert body["result"]["structuredContent"] == {
            "authenticated": True, "subject": "mcp-client", "client_id": "mcp-client",
            "scopes": ["mcp:read", "mcp:write"]}
        assert authorization.sign({"alg": alg}, {})  # the server signs this resource's tokens with alg
        status, headers, _ = whoami(server, authorization.token(server.url, "mcp:write"))
        assert status == 403 and 'error="insufficient_scope"' in headers["www-authenticate"]


def test_a_token_for_another_resource_is_refused(authorization):
    with resource_server(authorization) as server:
        elsewhere = authorization.token(RESOURCES["rs256"])  # a real token, for another audience
        status, headers, _ = whoami(server, elsewhere)
        assert status == 401 and 'error="invalid_token"' in headers["www-authenticate"]
        assert "audience" in headers["www-authenticate"]


def forgeries(authorization, resource):
    """Tokens for `resource` that must be refused, signed (where signed) by jose in the authorization
    server's own process: with its current key but wrong claims, with a key it never published, with
    no signature, or altered after signing."""
    now = int(time.time())
    kid = authorization.current_kid("RS256")
    claims = {"iss": authorization.issuer, "aud": resource, "sub": "mcp-client", "client_id": "mcp-client",
              "iat": now, "exp": now + 300, "scope": "mcp:read"}
    header = {"alg": "RS256", "kid": kid, "typ": "at+jwt"}
    real = authorization.token(resource)
    head, payload, signature = real.split(".")
    altered = b64url_encode(json.dumps(dict(json.loads(b64url_decode(payload)), scope="mcp:read mcp:admin")).encode())
    public = json.dumps(authorization.jwks()["keys"][0], sort_keys=True).encode()
    hs256_head = b64url_encode(json.dumps({"alg": "HS256", "kid": kid}).encode())
    hs256_mac = hmac.new(public, f"{hs256_head}.{payload}".encode(), hashlib.sha256).digest()
    return {
        "expired": authorization.sign(header, dict(claims, exp=now - 120)),
        "wrong issuer": authorization.sign(header, dict(claims, iss="http://127.0.0.1:1")),
        "wrong audience": authorization.sign(header, dict(claims, aud="https://elsewhere.example/mcp")),
        "unknown key": authorization.sign(dict(header, kid="stranger"), claims, key="outsider"),
        "alg none": f"{b64url_encode(json.dumps({'alg': 'none'}).encode())}.{payload}.",
        "HS256 with the public key": f"{hs256_head}.{payload}.{b64url_encode(hs256_mac)}",
        "tampered": f"{head}.{altered}.{signature}",
    }


def test_forged_tokens_are_refused_through_the_server(authorization):
    with resource_server(authorization) as server:
        assert whoami(server, authorization.token(server.url))[0] == 200  # the control: a real token passes
        for name, token in forgeries(authorization, server.url).items():
            status, headers, _ = whoami(server, token)
            challenge = headers.get("www-authenticate", "")
            assert status == 401, name
            assert challenge.startswith(f'Bearer resource_metadata="{server.url.replace("/mcp", "")}'
                                        '/.well-known/oauth-protected-resource/mcp", scope="mcp:read", '
                                        'error="invalid_token"'), (name, challenge)


def test_a_key_rotation_at_the_server_is_picked_up_without_a_restart():
    authorization = AuthorizationServer()  # its own: rotating keys must not disturb the other tests
    try:
        with resource_server(authorization) as server:
            assert whoami(server, authorization.token(server.url))[0] == 200
            jwks_before = authorization.stats()["jwks"]
            authorization.rotate(keep_old=False)
            status, _, body = whoami(server, authorization.token(server.url))
            assert status == 200, body
            assert authorization.stats()["jwks"] == jwks_before + 1
    finally:
        authorization.stop()


def test_opaque_tokens_are_checked_by_introspection(authorization, tmp_path):
    secret = tmp_path / "secret"
    secret.write_text(RESOURCE_SERVER[1] + "\n")
    with resource_server(authorization, "/opaque", "--introspection-client-id", RESOURCE_SERVER[0],
                         "--introspection-secret-file", str(secret)) as server:
        token = authorization.token(server.url)
        assert token.count(".") == 0  # opaque, not a JWT
        assert whoami(server, token)[0] == 200
        revoked = authorization.token(server.url)
        authorization.revoke(revoked)
        status, headers, _ = whoami(server, revoked)
        assert status == 401 and 'error="invalid_token"' in headers["www-authenticate"]


# --- the official client's OAuth flow, from nothing --------------------------------------------------------------

mcp_auth = pytest.importorskip("mcp.client.auth.extensions.client_credentials",
                               reason="the official MCP Python SDK (mcp) is not installed")


class Tokens:
    """The client's token storage, in memory (the SDK's TokenStorage protocol)."""

    def __init__(self):
        self.tokens = self.client_info = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client_info

    async def set_client_info(self, client_info):
        self.client_info = client_info


async def connect_and_call(url, issuer, scope):
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    provider = mcp_auth.ClientCredentialsOAuthProvider(server_url=url, storage=Tokens(), client_id=CLIENT[0],
                                                       client_secret=CLIENT[1], scope=scope, issuer=issuer)
    async with create_mcp_http_client(auth=provider) as http, \
            Client(streamable_http_client(url, http_client=http), mode="2026-07-28") as client:
        first = await client.call_tool("whoami", {})
        second = await client.call_tool("close_account", {"account": "acme"})
    return first, second, provider


def test_the_official_client_connects_from_nothing(authorization):
    with resource_server(authorization) as server:
        first, second, provider = asyncio.run(connect_and_call(server.url, authorization.issuer,
                                                               "mcp:read mcp:admin"))
        # The client asks for the scope the 401 names (MCP's scope selection), not the one it was given.
        assert first.structured_content == {"authenticated": True, "subject": "mcp-client",
                                            "client_id": "mcp-client", "scopes": ["mcp:read"]}
        assert second.is_error and "needs the mcp:admin scope" in second.content[0].text
        metadata = provider.context.protected_resource_metadata
        assert str(metadata.resource) == server.url  # it found this server's RFC 9728 metadata
        log = server.stderr
        assert '"POST /mcp" 401' in log and '"GET /.well-known/oauth-protected-resource/mcp" 200' in log


# --- the official TypeScript client steps up its token ----------------------------------------------------------

@pytest.mark.parametrize("era", ["2026-07-28", "legacy"])
def test_the_typescript_client_asks_for_the_scope_the_challenge_names_and_calls_again(authorization, era):
    """@modelcontextprotocol/client 2.4.0 (SEP-2350): on 403 insufficient_scope it gets a token for the union of its
    scopes and the challenge's, and retries. (The 1.x SDK, @modelcontextprotocol/sdk 1.32.2, re-authorizes too, but
    a client-credentials provider then asks for its configured scope again, not the challenge's, and gives up.)"""
    from authorization_server import CACHE, install

    with resource_server(authorization) as server:
        tokens_before = len(authorization.stats()["tokens"])
        done = subprocess.run([install(), os.path.join(CACHE, "step_up_client.mjs"), server.url, authorization.issuer,
                               era], capture_output=True, text=True, timeout=120, cwd=CACHE)
        assert done.returncode == 0, done.stderr
        seen = json.loads(done.stdout.strip().splitlines()[-1])
        assert seen["protocol"] == ("2026-07-28" if era != "legacy" else "2025-11-25")
        assert seen["before"]["scopes"] == ["mcp:read"]
        assert seen["renamed"] == "renamed acme to Acme"
        assert seen["after"]["scopes"] == ["mcp:read", "mcp:write"]
        assert authorization.stats()["tokens"][tokens_before:] == ["mcp:read", "mcp:read mcp:write"]
        refused = [request for request in seen["endpoint"] if request["status"] == 403]
        assert len(refused) == 1 and refused[0]["challenge"] == (
            f'Bearer resource_metadata="{server.url.replace("/mcp", "")}/.well-known/oauth-protected-resource/mcp", '
            'scope="mcp:read mcp:write", error="insufficient_scope", error_description="tools/call needs the scope '
            'mcp:write, which the token lacks"')
        if era == "legacy":  # the refusal did not end the session: the retry and the next call are in it
            sessions = {request["session"] for request in seen["endpoint"][seen["endpoint"].index(refused[0]):]}
            assert len(sessions) == 1 and None not in sessions
