"""Scopes of one tool, resource or prompt over real sockets (mcpserver._scopes): a call whose token lacks them gets
403 insufficient_scope naming every scope it needs (the MCP authorization spec's runtime scope challenge, RFC 6750
§3.1), in both eras and for a task tool, and the entry stays listed.

`python -m mcpserver --http --resource URL --authorization-server ISSUER --scope mcp:read tests/scoped_tools.py`
runs as a real process; the issuer is the stand-in of tests/jose_keys.py, so this suite runs in every lab cell. The
official TypeScript client stepping up against a real authorization server is tests/auth/test_scope_step_up.py.
"""

import json
import os
import time

import pytest
from jose_keys import KeyServer, sign
from legacy_http import LegacySession
from mcpserver.auth._jose import b64url_decode, b64url_encode
from mcptest import ROOT, HttpServer, call, free_port, mcp_headers, request

SCOPED = os.path.join(ROOT, "tests", "scoped_tools.py")


@pytest.fixture(scope="module")
def issuer():
    server = KeyServer()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def scoped(issuer):
    port = free_port()
    with HttpServer(SCOPED, "--port", str(port), "--resource", f"http://127.0.0.1:{port}/mcp",
                    "--authorization-server", issuer.issuer, "--scope", "mcp:read") as server:
        yield server


def token(issuer, server, scope, sub="alice"):
    now = int(time.time())
    return sign({"iss": issuer.issuer, "aud": server.url, "sub": sub, "client_id": "app", "iat": now,
                 "exp": now + 300, "scope": scope}, kid="ec-1")


def post(server, message, bearer):
    return server.post(message, headers=dict(mcp_headers(message), Authorization=f"Bearer {bearer}"))


def challenge(server, scope, method):
    metadata = f"http://127.0.0.1:{server.port}/.well-known/oauth-protected-resource/mcp"
    return (f'Bearer resource_metadata="{metadata}", scope="{scope}", error="insufficient_scope", '
            f'error_description="{method} needs the scope {{}}, which the token lacks"')


def test_a_call_without_the_tools_scope_gets_the_challenge_naming_every_scope_it_needs(scoped, issuer):
    reader = token(issuer, scoped, "mcp:read")
    status, headers, body = post(scoped, call("write_file", path="/x"), reader)
    assert status == 403, body
    assert headers["www-authenticate"] == challenge(scoped, "files:write mcp:read", "tools/call").format("files:write")
    assert b"files:write" in body  # plain text for a client that reads only the body
    writer = token(issuer, scoped, "mcp:read files:write")
    status, _, body = post(scoped, call("write_file", path="/x"), writer)
    assert status == 200 and body["result"]["content"][0]["text"] == "wrote /x"


def test_scopes_given_as_one_string_are_each_needed(scoped, issuer):
    half = token(issuer, scoped, "mcp:read files:write")
    status, headers, _ = post(scoped, call("wipe"), half)
    assert status == 403
    assert headers["www-authenticate"] == challenge(scoped, "admin:all files:write mcp:read",
                                                    "tools/call").format("admin:all")
    whole = token(issuer, scoped, "mcp:read files:write admin:all")
    assert post(scoped, call("wipe"), whole)[2]["result"]["content"][0]["text"] == "wiped"


def test_the_scoped_entries_stay_listed_for_a_token_without_their_scopes(scoped, issuer):
    reader = token(issuer, scoped, "mcp:read")
    tools = post(scoped, request("tools/list"), reader)[2]["result"]["tools"]
    assert {tool["name"] for tool in tools} == {"whoami", "write_file", "wipe", "export"}
    resources = post(scoped, request("resources/list"), reader)[2]["result"]["resources"]
    assert {r["uri"] for r in resources} == {"notes://public", "notes://secret"}
    templates = post(scoped, request("resources/templates/list"), reader)[2]["result"]["resourceTemplates"]
    assert [t["uriTemplate"] for t in templates] == ["notes://by/{author}"]
    prompts = post(scoped, request("prompts/list"), reader)[2]["result"]["prompts"]
    assert {p["name"] for p in prompts} == {"review", "hello"}
    assert post(scoped, call("whoami"), reader)[2]["result"]["structuredContent"] == {"scopes": ["mcp:read"]}


@pytest.mark.parametrize("message, scope, method", [
    (request("resources/read", uri="notes://secret"), "notes:read", "resources/read"),
    (request("resources/read", uri="notes://by/ada"), "notes:read", "resources/read"),  # the template's
    (request("prompts/get", name="review", arguments={"code": "x"}), "prompts:use", "prompts/get"),
    (request("subscriptions/listen", notifications={"resourceSubscriptions": ["notes://public", "notes://secret"]}),
     "notes:read", "subscriptions/listen"),
], ids=["resource", "template", "prompt", "listen"])
def test_a_resource_a_template_a_prompt_and_a_subscription_need_their_scopes(scoped, issuer, message, scope, method):
    reader = token(issuer, scoped, "mcp:read")
    status, headers, _ = post(scoped, message, reader)
    assert status == 403
    assert headers["www-authenticate"] == challenge(scoped, f"mcp:read {scope}", method).format(scope)
    assert post(scoped, request("resources/read", uri="notes://public"), reader)[0] == 200  # the control
    assert post(scoped, request("prompts/get", name="hello"), reader)[0] == 200
    if method != "subscriptions/listen":  # a listen stream stays open: its answer is not one body to read
        assert post(scoped, message, token(issuer, scoped, f"mcp:read {scope}"))[0] == 200


def test_a_task_tool_needs_its_scope_before_a_task_is_made(scoped, issuer):
    meta = {**request("x")["params"]["_meta"], "io.modelcontextprotocol/clientCapabilities": {
        "extensions": {"io.modelcontextprotocol/tasks": {}}}}
    message = request("tools/call", 3, meta=meta, name="export", arguments={"name": "q3"})
    status, headers, _ = post(scoped, message, token(issuer, scoped, "mcp:read"))
    assert status == 403 and 'scope="files:read mcp:read"' in headers["www-authenticate"]
    status, _, body = post(scoped, message, token(issuer, scoped, "mcp:read files:read"))
    assert status == 200 and body["result"]["resultType"] == "task", body


@pytest.mark.parametrize("revision", ["2025-11-25", "2025-03-26"])
def test_in_a_legacy_session_the_refusal_does_not_end_the_session(scoped, issuer, revision):
    session = LegacySession(scoped, revision, token=token(issuer, scoped, "mcp:read"))
    message = {"jsonrpc": "2.0", "id": session.next_id(), "method": "tools/call",
               "params": {"name": "write_file", "arguments": {"path": "/y"}}}
    status, headers, _ = session.post(message)
    assert status == 403
    assert headers["www-authenticate"] == challenge(scoped, "files:write mcp:read", "tools/call").format("files:write")
    seen = json.loads(session.call("whoami")["content"][0]["text"])  # 2025-03-26 has no structuredContent
    assert seen == {"scopes": ["mcp:read"]}  # the same session goes on
    session.token = token(issuer, scoped, "mcp:read files:write")  # the client stepped up: same subject
    assert session.call("write_file", path="/y")["content"][0]["text"] == "wrote /y"
    assert session.delete() == 204


def test_a_token_whose_scope_claim_was_edited_fails_its_signature(scoped, issuer):
    """The forged scope claim: a real token for mcp:read with files:write written into its payload."""
    head, payload, signature = token(issuer, scoped, "mcp:read").split(".")
    claims = json.loads(b64url_decode(payload))
    forged = f"{head}.{b64url_encode(json.dumps(dict(claims, scope='mcp:read files:write')).encode())}.{signature}"
    status, headers, _ = post(scoped, call("write_file", path="/z"), forged)
    assert status == 401 and 'error="invalid_token"' in headers["www-authenticate"]
    unsigned = f"{b64url_encode(json.dumps({'alg': 'none'}).encode())}.{payload}."
    assert post(scoped, call("write_file", path="/z"), unsigned)[0] == 401


def test_the_metadata_lists_every_entrys_scopes(scoped):
    status, _, body = scoped.post(method="GET", path="/.well-known/oauth-protected-resource/mcp", headers={})
    assert status == 200
    assert body["scopes_supported"] == ["admin:all", "files:read", "files:write", "mcp:read", "notes:read",
                                        "prompts:use"]


def test_without_oauth_there_is_no_token_to_hold_scopes(tmp_path):
    """A static token names no one and carries no scopes: its holder calls everything, as over stdio."""
    secret = tmp_path / "token"
    secret.write_text("s3cret\n")
    with HttpServer(SCOPED, "--token-file", str(secret)) as server:
        message = call("write_file", path="/w")
        status, _, body = server.post(message, headers=dict(mcp_headers(message), Authorization="Bearer s3cret"))
        assert status == 200 and body["result"]["content"][0]["text"] == "wrote /w"
