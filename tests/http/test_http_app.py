"""The HTTP binding's rules, in-process: the WSGI app called through wsgiref.validate (no socket)."""

import base64
import io
import json
from wsgiref.util import setup_testing_defaults
from wsgiref.validate import validator

import pytest
from mcpserver import Server
from mcpserver.http import McpApp, create_app
from mcptest import META, call, mcp_headers, request


@pytest.fixture
def server():
    server = Server("app-test", "1.0.0")
    server.tool(lambda text: text, name="echo", input_schema={
        "type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]})
    return server


def send(app, message=None, *, headers=None, body=None, method="POST", path="/mcp", host="127.0.0.1:3000",
         remote="127.0.0.1", extra=None):
    data = body if body is not None else json.dumps(message).encode()
    environ = {"REQUEST_METHOD": method, "PATH_INFO": path, "HTTP_HOST": host, "QUERY_STRING": "", "SCRIPT_NAME": "",
               "REMOTE_ADDR": remote,
               "wsgi.input": io.BytesIO(data), "CONTENT_LENGTH": str(len(data))}
    sent = mcp_headers(message) if headers is None else headers
    for name, value in sent.items():
        key = name.upper().replace("-", "_")
        environ[key if key in ("CONTENT_TYPE", "CONTENT_LENGTH") else "HTTP_" + key] = value
    environ.update(extra or {})
    setup_testing_defaults(environ)
    captured = {}

    def start_response(status, response_headers, exc_info=None):
        captured["status"], captured["headers"] = status, dict(response_headers)
        return lambda data: None

    result = validator(app)(environ, start_response)
    try:
        raw = b"".join(result)
    finally:
        result.close()
    status = int(captured["status"][:3])
    content_type = captured["headers"].get("Content-Type", "")
    return status, captured["headers"], json.loads(raw) if content_type == "application/json" else raw


@pytest.fixture
def app(server):
    return McpApp(server)


def test_a_call_is_200_with_one_json_response(app):
    status, headers, body = send(app, call("echo", text="hi"))
    assert status == 200 and headers["Content-Type"] == "application/json"
    assert body["result"]["content"][0]["text"] == "hi"


def test_a_tool_error_result_is_still_200(app):
    status, _, body = send(app, call("echo", text=3))
    assert status == 200 and body["result"]["isError"] is True


def test_a_notification_is_202_with_no_body(app):
    status, headers, body = send(app, {"jsonrpc": "2.0", "method": "notifications/cancelled",
                                       "params": {"requestId": 1}})
    assert status == 202 and body == b"" and headers["Content-Length"] == "0"


@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT", "PATCH", "OPTIONS"])
def test_other_methods_are_405_with_allow(app, method):
    status, headers, _ = send(app, request("tools/list"), method=method)
    assert status == 405 and headers["Allow"] == "POST"


@pytest.mark.parametrize("path", ["/", "/mcp/", "/other", "/MCP"])
def test_other_paths_are_404(app, path):
    assert send(app, request("tools/list"), path=path)[0] == 404


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded"])
def test_the_body_must_be_json_or_415(app, content_type):
    headers = mcp_headers(request("tools/list"))
    headers.pop("Content-Type")
    if content_type:
        headers["Content-Type"] = content_type
    assert send(app, request("tools/list"), headers=headers)[0] == 415


def test_json_with_a_charset_is_fine(app):
    headers = dict(mcp_headers(request("tools/list")), **{"Content-Type": "application/json; charset=utf-8"})
    assert send(app, request("tools/list"), headers=headers)[0] == 200


@pytest.mark.parametrize("accept, status", [("text/html", 406), ("text/event-stream", 406), ("*/*", 200),
                                            ("application/json", 200), (None, 200)])
def test_accept_must_allow_json(app, accept, status):
    headers = mcp_headers(request("tools/list"))
    headers.pop("Accept")
    if accept:
        headers["Accept"] = accept
    assert send(app, request("tools/list"), headers=headers)[0] == status


def test_a_body_over_the_limit_is_413(server):
    small = McpApp(server, max_body_bytes=1000)
    assert send(small, call("echo", text="x" * 2000))[0] == 413
    assert send(small, call("echo", text="x" * 100))[0] == 200


@pytest.mark.parametrize("body, code", [(b"{oops", -32700), (b"\xff", -32700), (b"[]", -32600),
                                        (b'{"jsonrpc":"2.0","id":1}', -32600),
                                        (b'{"jsonrpc":"2.0","id":1,"result":{}}', -32600)])
def test_parse_and_envelope_errors_are_400_without_id(app, body, code):
    headers = mcp_headers({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    status, _, answer = send(app, body=body, headers=headers)
    assert status == 400 and answer["error"]["code"] == code


def test_missing_meta_is_400_and_32602(app):
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    status, _, answer = send(app, message)
    assert status == 400 and answer["error"]["code"] == -32602


def test_unsupported_version_is_400_and_32022(app):
    meta = dict(META, **{"io.modelcontextprotocol/protocolVersion": "1999-01-01"})
    status, _, answer = send(app, request("server/discover", meta=meta))
    assert status == 400 and answer["error"]["code"] == -32022 and answer["error"]["data"]["requested"] == "1999-01-01"


@pytest.mark.parametrize("drop", ["MCP-Protocol-Version", "Mcp-Method", "Mcp-Name"])
def test_a_missing_header_is_400_and_32020(app, drop):
    headers = {k: v for k, v in mcp_headers(call("echo", text="x")).items() if k != drop}
    status, _, answer = send(app, call("echo", text="x"), headers=headers)
    assert status == 400 and answer["error"]["code"] == -32020 and drop in answer["error"]["message"]


def test_header_names_are_case_insensitive(app):
    sent = mcp_headers(call("echo", text="x"))
    headers = {k.upper() if k.startswith("Mcp") else k.lower(): v for k, v in sent.items()}
    assert send(app, call("echo", text="x"), headers=headers)[0] == 200


def test_a_mismatched_header_is_400_and_32020(app):
    headers = dict(mcp_headers(call("echo", text="x")), **{"Mcp-Name": "other"})
    status, _, answer = send(app, call("echo", text="x"), headers=headers)
    assert status == 400 and answer["error"]["code"] == -32020


def test_base64_names_are_decoded(app):
    headers = dict(mcp_headers(call("echo", text="x")),
                   **{"Mcp-Name": "=?base64?" + base64.b64encode(b"echo").decode() + "?="})
    assert send(app, call("echo", text="x"), headers=headers)[0] == 200


def test_an_unknown_method_is_404_with_a_json_rpc_body(app):
    status, _, answer = send(app, request("sampling/whatever"))
    assert status == 404 and answer["error"]["code"] == -32601


def test_an_unknown_tool_is_200_and_32602(app):
    status, _, answer = send(app, call("nope"))
    assert status == 200 and answer["error"] == {"code": -32602, "message": "Unknown tool: nope"}


def test_a_modern_request_ignores_session_headers_and_is_never_issued_one(app):
    headers = dict(mcp_headers(request("tools/list")), **{"Mcp-Session-Id": "abc", "Last-Event-ID": "7"})
    status, response_headers, _ = send(app, request("tools/list"), headers=headers)
    assert status == 200
    assert not any(name.lower() == "mcp-session-id" for name in response_headers)


def test_a_legacy_request_with_a_session_this_server_never_issued_is_404(app):
    legacy = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {"Content-Type": "application/json", "Accept": "application/json", "Mcp-Session-Id": "abc"}
    assert send(app, legacy, headers=headers)[0] == 404


@pytest.mark.parametrize("origin, status", [
    ("http://localhost:5173", 200), ("https://127.0.0.1", 200), ("http://[::1]:8080", 200),
    ("https://evil.example.com", 403), ("http://localhost.evil.com", 403), ("null", 403)])
def test_origin_is_checked_when_present(app, origin, status):
    headers = dict(mcp_headers(request("tools/list")), Origin=origin)
    assert send(app, request("tools/list"), headers=headers)[0] == status


def test_an_allow_listed_origin_passes(server):
    app = McpApp(server, allowed_origins=["https://app.example.com"])
    headers = dict(mcp_headers(request("tools/list")), Origin="https://app.example.com")
    assert send(app, request("tools/list"), headers=headers)[0] == 200


@pytest.mark.parametrize("host, status", [("localhost:3000", 200), ("127.0.0.1", 200), ("[::1]:3000", 200),
                                          ("evil.example.com", 403), ("evil.example.com:3000", 403)])
def test_host_is_checked_on_loopback(app, host, status):
    assert send(app, request("tools/list"), host=host)[0] == status


def test_extra_host_names_can_be_allowed(server):
    app = McpApp(server, allowed_hosts=["mcp.internal"])
    assert send(app, request("tools/list"), host="mcp.internal:8000")[0] == 200


def test_a_token_is_required_when_configured(server):
    app = McpApp(server, token="s3cret", loopback=False)
    message = request("tools/list")
    status, headers, _ = send(app, message, host="10.0.0.5:3000")
    assert status == 401 and headers["WWW-Authenticate"] == 'Bearer realm="mcp"'
    wrong = dict(mcp_headers(message), Authorization="Bearer nope")
    status, headers, _ = send(app, message, headers=wrong, host="10.0.0.5")
    assert status == 401 and headers["WWW-Authenticate"] == 'Bearer realm="mcp", error="invalid_token"'
    right = dict(mcp_headers(message), Authorization="Bearer s3cret")
    assert send(app, message, headers=right, host="10.0.0.5")[0] == 200
    assert send(app, message, headers=dict(right, Origin="https://evil.example.com"))[0] == 403


@pytest.mark.parametrize("remote, status", [("10.0.0.5", 403), ("192.168.1.9", 403), ("127.0.0.2", 200), ("::1", 200)])
def test_without_a_token_only_loopback_peers_are_served(server, remote, status, monkeypatch):
    # Issue 11, item 5: under gunicorn on 0.0.0.0 with no token, a foreign peer saying Host: localhost got 200.
    monkeypatch.delenv("MCPSERVER_TOKEN", raising=False)
    monkeypatch.delenv("MCPSERVER_TOKEN_FILE", raising=False)
    app = create_app(server)
    answer = send(app, request("tools/list"), host="localhost:8000", remote=remote)
    assert answer[0] == status, answer
    if status == 403:
        assert b"serves loopback clients only" in answer[2]
        opted_out = create_app(server, insecure_no_auth=True)
        assert send(opted_out, request("tools/list"), host="localhost:8000", remote=remote)[0] == 200


def oauth_app(server, **options):
    from mcpserver.auth import ResourceServer, StaticTokens

    tokens = StaticTokens(["good-token"], scopes=["mcp"])
    oauth = ResourceServer("https://mcp.example.com/mcp", ["https://auth.example.com"], scopes=["mcp"],
                           validator=tokens)
    return McpApp(server, loopback=False, oauth=oauth, **options)


def test_oauth_tokens_cross_plain_http_only_on_loopback(server):
    app, message = oauth_app(server), request("tools/list")
    headers = dict(mcp_headers(message), Authorization="Bearer good-token")
    status, _, body = send(app, message, headers=headers, host="mcp.example.com", remote="10.0.0.5")
    assert status == 403 and b"HTTPS only" in body
    assert send(app, message, headers=headers, host="mcp.example.com", remote="127.0.0.1")[0] == 200


def test_oauth_over_https_from_anywhere(server):
    app, message = oauth_app(server), request("tools/list")
    headers = dict(mcp_headers(message), Authorization="Bearer good-token")
    environ_https = {"HTTPS": "on"}  # wsgiref's setup_testing_defaults derives wsgi.url_scheme from it
    status, _, _ = send(app, message, headers=headers, host="mcp.example.com", remote="10.0.0.5",
                        extra=environ_https)
    assert status == 200


def test_oauth_and_a_static_token_together_are_refused(server):
    from mcpserver.auth import ResourceServer
    from mcpserver.errors import ConfigError

    oauth = ResourceServer("https://mcp.example.com/mcp", ["https://auth.example.com"])
    with pytest.raises(ConfigError, match="not both"):
        McpApp(server, token="s3cret", oauth=oauth)


def test_a_quiet_listen_stream_sends_keep_alive_comments(server, monkeypatch):
    from mcpserver.http import _stream

    monkeypatch.setattr(_stream, "SSE_KEEPALIVE_SECONDS", 0.05)
    message = request("subscriptions/listen", "quiet", notifications={"toolsListChanged": True})
    headers = dict(mcp_headers(message), Accept="application/json, text/event-stream")
    environ = {"REQUEST_METHOD": "POST", "PATH_INFO": "/mcp", "HTTP_HOST": "127.0.0.1", "REMOTE_ADDR": "127.0.0.1",
               "wsgi.input": io.BytesIO(json.dumps(message).encode())}
    for name, value in headers.items():
        key = name.upper().replace("-", "_")
        environ[key if key == "CONTENT_TYPE" else "HTTP_" + key] = value
    environ["CONTENT_LENGTH"] = str(len(environ["wsgi.input"].getvalue()))
    setup_testing_defaults(environ)
    statuses = []
    body = McpApp(server)(environ, lambda status, headers, exc_info=None: statuses.append(status))
    chunks = iter(body)
    acknowledged = next(chunks)
    assert statuses == ["200 OK"] and b"notifications/subscriptions/acknowledged" in acknowledged
    assert [next(chunks) for _ in range(3)] == [b": keep-alive\n\n"] * 3  # nothing changed: comments, not data
    body.close()  # the client went away
