"""protocol.dispatch, one rule per test (WIRE.md section in each docstring). Pure: no process, no socket."""

import base64
import json
import logging

import pytest
from mcpserver import Server, ToolError, ToolResult, content, protocol
from mcpserver.protocol import encode
from mcptest import META, VERSION, answer, call, core_reply, request

HEADERS = {"mcp-protocol-version": VERSION}


@pytest.fixture
def server():
    server = Server("test", "2.0.0", instructions="Use echo.")

    @server.tool()
    def echo(text: str) -> str:
        """Return the text."""
        return text

    @server.tool()
    def fail(reason: str = "boom") -> str:
        raise ToolError(f"cannot do it: {reason}")

    @server.tool()
    def crash() -> str:
        raise RuntimeError("secret internals")

    return server


def error_of(reply):
    assert "result" not in reply.response, reply.response
    return reply.response["error"]


def http_headers(method, name=None, **extra):
    headers = dict(HEADERS, **{"mcp-method": method})
    if name is not None:
        headers["mcp-name"] = name
    headers.update({k.lower().replace("_", "-"): v for k, v in extra.items()})
    return headers


# --- §5 server/discover ---------------------------------------------------------------------


def test_discover_lists_version_capabilities_instructions_and_cache_hints(server):
    result = answer(request("server/discover"), server)["result"]
    assert result["supportedVersions"] == [VERSION]
    assert result["capabilities"] == {"tools": {"listChanged": True}}
    assert result["instructions"] == "Use echo."
    assert result["resultType"] == "complete"
    assert isinstance(result["ttlMs"], int) and result["ttlMs"] >= 0
    assert result["cacheScope"] in ("public", "private")
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"] == {"name": "test", "version": "2.0.0"}


def test_capabilities_follow_what_is_registered():
    server = Server("empty")
    assert answer(request("server/discover"), server)["result"]["capabilities"] == {}


# --- §3.1 required _meta: -32602, HTTP 400 --------------------------------------------------


@pytest.mark.parametrize("params", [
    None,
    {},
    {"_meta": {}},
    {"_meta": {"io.modelcontextprotocol/clientCapabilities": {}}},
    {"_meta": {"io.modelcontextprotocol/protocolVersion": VERSION}},
    {"_meta": {"io.modelcontextprotocol/protocolVersion": 20260728, "io.modelcontextprotocol/clientCapabilities": {}}},
    {"_meta": {"io.modelcontextprotocol/protocolVersion": VERSION, "io.modelcontextprotocol/clientCapabilities": []}},
    {"_meta": "2026-07-28"},
], ids=["no-params", "no-meta", "empty-meta", "no-version", "no-capabilities", "numeric-version",
        "array-capabilities", "string-meta"])
@pytest.mark.parametrize("method", ["server/discover", "tools/list", "tools/call"])
def test_missing_or_mistyped_meta_is_invalid_params_400(server, method, params):
    message = {"jsonrpc": "2.0", "id": 7, "method": method}
    if params is not None:
        message["params"] = params
    reply = core_reply(message, server)
    assert error_of(reply)["code"] == -32602
    assert reply.http_status == 400
    assert reply.response["id"] == 7


def test_missing_client_info_is_still_served(server):
    meta = {k: v for k, v in META.items() if k != "io.modelcontextprotocol/clientInfo"}
    assert "result" in answer(request("tools/list", meta=meta), server)


def test_params_that_are_not_an_object_are_invalid_params(server):
    reply = core_reply({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": [1, 2]}, server)
    assert error_of(reply)["code"] == -32602 and reply.http_status == 400


# --- §4 version: every method, discover included ----------------------------------------------


@pytest.mark.parametrize("method", ["server/discover", "tools/list", "tools/call", "nonexistent/method"])
def test_unsupported_version_is_32022_with_supported_and_requested(server, method):
    meta = dict(META, **{"io.modelcontextprotocol/protocolVersion": "1900-01-01"})
    reply = core_reply(request(method, meta=meta, name="echo", arguments={"text": "x"}), server)
    error = error_of(reply)
    assert error["code"] == -32022
    assert error["data"] == {"supported": [VERSION], "requested": "1900-01-01"}
    assert reply.http_status == 400


def test_an_earlier_revision_is_unsupported_too(server):
    meta = dict(META, **{"io.modelcontextprotocol/protocolVersion": "2025-11-25"})
    assert error_of(core_reply(request("tools/list", meta=meta), server))["code"] == -32022


def test_each_request_is_judged_alone(server):
    """§2: nothing carries over; a good request does not vouch for the next one."""
    assert "result" in answer(request("tools/list", id=1), server)
    bad = dict(META, **{"io.modelcontextprotocol/protocolVersion": "2099-01-01"})
    assert answer(request("tools/list", id=2, meta=bad), server)["error"]["code"] == -32022
    assert "result" in answer(request("tools/list", id=3), server)


# --- §7 method not found: -32601, 404 -------------------------------------------------------


def test_unknown_method_is_32601_404(server):
    reply = core_reply(request("tools/frobnicate"), server)
    assert error_of(reply)["code"] == -32601 and reply.http_status == 404


@pytest.mark.parametrize("method", ["initialize", "ping", "logging/setLevel", "resources/subscribe"])
def test_retired_methods_are_32601_and_name_the_supported_version(server, method):
    reply = core_reply(request(method), server)
    error = error_of(reply)
    assert error["code"] == -32601 and reply.http_status == 404
    assert error["data"]["supported"] == [VERSION]


def test_a_legacy_initialize_is_answered_in_the_revision_asked_for(server):
    """A dual-era server (LEGACY.md §1): initialize opens a legacy session; the transport keeps it."""
    message = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
               "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                          "clientInfo": {"name": "old", "version": "1"}}}
    reply = core_reply(message, server)
    assert reply.response["result"]["protocolVersion"] == "2025-06-18"
    assert reply.session.revision == "2025-06-18" and "resultType" not in reply.response["result"]


@pytest.mark.parametrize("method", ["prompts/list", "prompts/get", "resources/list", "resources/read",
                                    "resources/templates/list"])
def test_methods_of_undeclared_capabilities_are_32601(server, method):
    reply = core_reply(request(method, name="x", uri="x://y"), server)
    error = error_of(reply)
    assert error["code"] == -32601 and reply.http_status == 404
    assert "capability" in error["data"]["reason"]


# --- §1 envelope: -32600 / -32700, ids ------------------------------------------------------


@pytest.mark.parametrize("data", [b"{", b"not json", b'{"a": NaN}', b"\xff\xfe{}", b'{"jsonrpc": "2.0", "id": 1,'])
def test_unparseable_bytes_are_32700_without_id(server, data):
    reply = core_reply(data, server)
    assert reply.response == {"jsonrpc": "2.0", "error": reply.response["error"]}
    assert reply.response["error"]["code"] == -32700 and reply.http_status == 400


@pytest.mark.parametrize("message", [
    [request("tools/list")],
    [],
    "tools/list",
    42,
    None,
    {"id": 1, "method": "tools/list", "params": {"_meta": META}},
    {"jsonrpc": "1.0", "id": 1, "method": "tools/list", "params": {"_meta": META}},
    {"jsonrpc": "2.0", "id": 1, "method": 5, "params": {"_meta": META}},
    {"jsonrpc": "2.0", "id": 1, "params": {"_meta": META}},
], ids=["batch", "empty-batch", "string", "number", "null", "no-jsonrpc", "jsonrpc-1.0", "method-number",
        "no-method"])
def test_invalid_requests_are_32600(server, message):
    reply = core_reply(message, server)
    assert error_of(reply)["code"] == -32600 and reply.http_status == 400


@pytest.mark.parametrize("bad_id", [None, 1.5, True, False, {"a": 1}, [1]])
def test_an_invalid_id_is_32600_and_the_error_omits_it(server, bad_id):
    reply = core_reply({"jsonrpc": "2.0", "id": bad_id, "method": "tools/list", "params": {"_meta": META}}, server)
    assert error_of(reply)["code"] == -32600
    assert "id" not in reply.response


@pytest.mark.parametrize("good_id", ["abc", "", 0, -3, 2**62])
def test_string_and_integer_ids_are_echoed(server, good_id):
    assert answer(request("tools/list", id=good_id), server)["id"] == good_id


def test_errors_echo_a_readable_id(server):
    assert answer(request("nope", id="req-9"), server)["id"] == "req-9"


# --- §8 notifications are never answered ----------------------------------------------------


@pytest.mark.parametrize("method", ["notifications/cancelled", "notifications/initialized", "whatever/else"])
def test_notifications_are_never_answered(server, method):
    message = {"jsonrpc": "2.0", "method": method, "params": {"requestId": 1}}
    assert core_reply(message, server) is None and answer(message, server) is None
    expected = protocol.Cancel if method == "notifications/cancelled" else protocol.Notification
    assert type(protocol.classify(message)) is expected


@pytest.mark.parametrize("params", [None, {}, {"requestId": None}, {"requestId": 1.5}, {"requestId": True}, [1]])
def test_a_cancel_with_malformed_params_is_an_ignored_notification(server, params):
    message = {"jsonrpc": "2.0", "method": "notifications/cancelled", **({} if params is None else {"params": params})}
    assert type(protocol.classify(message)) is protocol.Notification and answer(message, server) is None


def test_a_response_from_the_client_is_parsed_as_one_and_never_answered(server):
    response = {"jsonrpc": "2.0", "id": 4, "result": {}}
    assert answer(response, server) is None
    typed = protocol.parse(json.dumps(response).encode())
    assert isinstance(typed, protocol.ClientResponse) and (typed.id, typed.result, typed.error) == (4, {}, None)


def test_a_response_from_the_client_is_refused_where_the_server_sent_no_request(server):
    """Over HTTP without a session the server never asks the client anything: -32600, 400."""
    refused = protocol.parse(json.dumps({"jsonrpc": "2.0", "id": 4, "result": {}}).encode(), responses=False)
    assert isinstance(refused, protocol.Refusal)
    assert error_of(refused.reply)["code"] == -32600 and refused.reply.http_status == 400
    assert refused.reply.response["id"] == 4


def test_messages_are_immutable_values():
    typed = protocol.parse(json.dumps(call("echo", id=3, text="x")).encode())
    assert isinstance(typed, protocol.Request) and (typed.id, typed.method, typed.work) == (3, "tools/call", "author")
    with pytest.raises(AttributeError):
        typed.id = 4


def test_a_message_kind_has_its_annotated_fields_in_order_and_no_other():
    assert protocol.Request._fields == ("id", "method", "params", "progress_token", "work")
    assert protocol.Cancel(3, "why") == protocol.Cancel(3, "why") != protocol.Notification(3, "why")
    with pytest.raises(TypeError, match="Cancel takes 2 fields"):
        protocol.Cancel(3)
    response = protocol.ClientResponse(4, {"ok": True}, None)
    assert (response.id, response.result, response.error) == (4, {"ok": True}, None)
    assert repr(response) == "ClientResponse(id=4, result={'ok': True}, error=None)"


# --- §6 results: resultType, cache hints, serverInfo ----------------------------------------


def test_tools_list_is_cacheable_complete_and_ends_without_next_cursor(server):
    result = answer(request("tools/list"), server)["result"]
    assert [t["name"] for t in result["tools"]] == ["echo", "fail", "crash"]
    assert result["resultType"] == "complete"
    assert "ttlMs" in result and "cacheScope" in result
    assert "nextCursor" not in result


def test_tool_call_results_carry_no_cache_hints(server):
    result = answer(call("echo", text="hi"), server)["result"]
    assert result["resultType"] == "complete"
    assert "ttlMs" not in result and "cacheScope" not in result


def test_server_info_can_be_left_out_of_results():
    quiet = Server("quiet", server_info_in_results=False)
    assert "_meta" not in answer(request("server/discover"), quiet)["result"]


def test_cache_hints_come_from_the_server():
    server = Server("cached", ttl_ms=0, cache_scope="private")
    result = answer(request("server/discover"), server)["result"]
    assert (result["ttlMs"], result["cacheScope"]) == (0, "private")


# --- §10 pagination -------------------------------------------------------------------------


@pytest.fixture
def paged():
    server = Server("paged", page_size=2)
    for i in range(5):
        server.tool(lambda: "x", name=f"t{i}")
    return server


def test_pagination_walks_every_tool_once_and_ends_without_cursor(paged):
    names, cursor, pages = [], None, 0
    while True:
        params = {} if cursor is None else {"cursor": cursor}
        result = answer(request("tools/list", **params), paged)["result"]
        names += [t["name"] for t in result["tools"]]
        pages += 1
        cursor = result.get("nextCursor")
        assert cursor != ""
        if cursor is None:
            break
    assert names == [f"t{i}" for i in range(5)] and pages == 3


@pytest.mark.parametrize("cursor", ["garbage", "", base64.urlsafe_b64encode(b"prompts:2").decode(),
                                    base64.urlsafe_b64encode(b"tools:99").decode(), 17])
def test_bad_cursors_are_32602(paged, cursor):
    reply = core_reply(request("tools/list", cursor=cursor), paged)
    assert error_of(reply)["code"] == -32602 and reply.http_status == 200


# --- §9 tools/call --------------------------------------------------------------------------


def test_unknown_tool_is_32602_not_a_result(server):
    reply = core_reply(call("nope"), server)
    assert error_of(reply) == {"code": -32602, "message": "Unknown tool: nope"}
    assert reply.http_status == 200


@pytest.mark.parametrize("params", [{}, {"name": 3}, {"name": "echo", "arguments": "text=hi"},
                                    {"name": "echo", "arguments": [1]}])
def test_malformed_call_params_are_32602(server, params):
    assert error_of(core_reply(request("tools/call", **params), server))["code"] == -32602


def test_arguments_the_schema_rejects_are_an_is_error_result(server):
    """WIRE.md §9.4 CONFLICT: we follow the prose (SEP-1303): the model sees what to fix."""
    reply = core_reply(call("echo", text=5), server)
    result = reply.response["result"]
    assert result["isError"] is True and reply.http_status == 200
    assert "text: expected string, got integer" in result["content"][0]["text"]
    result = answer(call("echo"), server)["result"]
    assert result["isError"] and "missing required property 'text'" in result["content"][0]["text"]
    result = answer(call("echo", text="a", extra=1), server)["result"]
    assert result["isError"] and "unexpected property 'extra'" in result["content"][0]["text"]


def test_a_reported_failure_is_an_is_error_result_with_its_message(server):
    result = answer(call("fail", reason="disk full"), server)["result"]
    assert result == {"content": [{"type": "text", "text": "cannot do it: disk full"}], "isError": True,
                      "resultType": "complete", "_meta": result["_meta"]}


def test_an_exception_is_an_is_error_result_and_its_traceback_goes_to_the_log_only(server, caplog):
    with caplog.at_level(logging.ERROR):
        result = answer(call("crash"), server)["result"]
    text = result["content"][0]["text"]
    assert result["isError"] is True
    assert "RuntimeError" in text and "Traceback" not in text
    assert any(r.exc_info and "secret internals" in str(r.exc_info[1]) for r in caplog.records)


def test_a_tool_calling_exit_does_not_end_the_server(server):
    @server.tool()
    def leave() -> str:
        raise SystemExit(3)

    assert answer(call("leave"), server)["result"]["isError"] is True


def test_an_internal_fault_outside_tools_is_32603(server, caplog):
    server.offers_capability = None  # break the server itself, not a tool
    with caplog.at_level(logging.ERROR):
        reply = core_reply(request("tools/list"), server)
    assert error_of(reply) == {"code": -32603, "message": "Internal error"}
    assert caplog.records


# --- return values --------------------------------------------------------------------------


@pytest.fixture
def returns():
    server = Server("returns")
    server.tool(lambda: "plain", name="text")
    server.tool(lambda: {"a": 1, "b": [True, None]}, name="mapping")
    server.tool(lambda: [1, 2, 3], name="sequence")
    server.tool(lambda: None, name="nothing")
    server.tool(lambda: content.image(b"\x89PNG", "image/png"), name="picture")
    server.tool(lambda: [content.text("one"), content.embedded("file:///a.txt", "A", mime_type="text/plain")],
                name="blocks")
    server.tool(lambda: ToolResult(structured={"n": 1}), name="explicit")
    server.tool(lambda: ToolResult(content=[content.text("nope")], is_error=True), name="explicit_error")
    server.tool(lambda: {1, 2}, name="not_json")
    server.tool(lambda: {"sum": "three"}, name="off_schema",
                output_schema={"type": "object", "properties": {"sum": {"type": "number"}}})
    server.tool(lambda: "no structure", name="text_with_schema", output_schema={"type": "object"})
    return server


def result_of(server, tool):
    result = answer(call(tool), server)["result"]
    del result["_meta"], result["resultType"]
    return result


def test_str_becomes_one_text_block(returns):
    assert result_of(returns, "text") == {"content": [{"type": "text", "text": "plain"}]}


def test_dict_becomes_structured_content_plus_its_json_as_text(returns):
    result = result_of(returns, "mapping")
    assert result["structuredContent"] == {"a": 1, "b": [True, None]}
    assert json.loads(result["content"][0]["text"]) == {"a": 1, "b": [True, None]}


def test_other_json_values_are_structured_too(returns):
    assert result_of(returns, "sequence")["structuredContent"] == [1, 2, 3]


def test_none_is_empty_content(returns):
    assert result_of(returns, "nothing") == {"content": []}


def test_content_blocks_pass_as_they_are(returns):
    picture = {"type": "image", "data": "iVBORw==", "mimeType": "image/png"}
    assert result_of(returns, "picture") == {"content": [picture]}
    blocks = result_of(returns, "blocks")["content"]
    embedded = {"uri": "file:///a.txt", "mimeType": "text/plain", "text": "A"}
    assert blocks[1] == {"type": "resource", "resource": embedded}


def test_tool_result_gives_full_control(returns):
    assert result_of(returns, "explicit") == {"content": [{"type": "text", "text": '{"n":1}'}],
                                              "structuredContent": {"n": 1}}
    assert result_of(returns, "explicit_error") == {"content": [{"type": "text", "text": "nope"}], "isError": True}


def test_a_value_that_is_not_json_is_an_is_error_result(returns):
    assert result_of(returns, "not_json")["isError"] is True


def test_structured_content_must_match_the_output_schema(returns):
    result = result_of(returns, "off_schema")
    assert result["isError"] is True and "result.sum: expected number" in result["content"][0]["text"]
    assert result_of(returns, "text_with_schema")["isError"] is True


# --- §16.4-16.6 headers, checked by the core when a transport passes them ---------------------


def test_missing_required_headers_are_32020(server):
    for missing in ("mcp-protocol-version", "mcp-method"):
        headers = {k: v for k, v in http_headers("tools/list").items() if k != missing}
        reply = core_reply(request("tools/list"), server, headers)
        assert error_of(reply)["code"] == -32020 and reply.http_status == 400
    reply = core_reply(call("echo", text="x"), server, http_headers("tools/call"))
    assert error_of(reply)["code"] == -32020 and "Mcp-Name" in error_of(reply)["message"]


def test_header_checks_come_before_meta_checks(server):
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    assert error_of(core_reply(message, server, {}))["code"] == -32020
    assert error_of(core_reply(message, server, http_headers("tools/list")))["code"] == -32602


def test_header_values_must_equal_the_body(server):
    reply = core_reply(call("echo", text="x"), server, http_headers("tools/call", "other"))
    assert error_of(reply)["code"] == -32020 and reply.http_status == 400
    assert "'other'" in error_of(reply)["message"] and "'echo'" in error_of(reply)["message"]
    assert error_of(core_reply(request("tools/list"), server, http_headers("Tools/List")))["code"] == -32020


@pytest.mark.parametrize("value", ["echo\x7f", "ech\x00o", "\u00e9cho", "echo\x1b", "echo\u2028"])
def test_a_header_value_outside_visible_ascii_is_32020(server, value):
    reply = core_reply(call("echo", text="x"), server, http_headers("tools/call", value))
    assert error_of(reply)["code"] == -32020 and "not allowed" in error_of(reply)["message"]


def test_tabs_and_spaces_around_or_inside_a_header_value_are_allowed(server):
    reply = core_reply(call("echo", text="x"), server, http_headers("tools/call", " \techo\t "))
    assert reply.response["result"]["content"][0]["text"] == "x"
    reply = core_reply(call("e\tc ho", text="x"), server, http_headers("tools/call", "e\tc ho"))
    assert error_of(reply)["code"] == -32602  # past the headers: no such tool


def test_version_header_mismatch_is_32020_before_version_support(server):
    meta = dict(META, **{"io.modelcontextprotocol/protocolVersion": "1900-01-01"})
    reply = core_reply(request("tools/list", meta=meta), server, http_headers("tools/list"))
    assert error_of(reply)["code"] == -32020
    agreed = dict(http_headers("tools/list"), **{"mcp-protocol-version": "1900-01-01"})
    assert error_of(core_reply(request("tools/list", meta=meta), server, agreed))["code"] == -32022


def test_header_values_are_trimmed_and_base64_names_decoded(server):
    reply = core_reply(call("echo", text="x"), server, http_headers(" tools/call ", "  echo\t"))
    assert "result" in reply.response
    name = "=?base64?" + base64.b64encode(b"echo").decode() + "?="
    assert "result" in core_reply(call("echo", text="x"), server, http_headers("tools/call", name)).response


def test_a_non_ascii_name_travels_base64(server):
    message = request("tools/call", name="naïve", arguments={})
    encoded = "=?base64?" + base64.b64encode("naïve".encode()).decode() + "?="
    reply = core_reply(message, server, http_headers("tools/call", encoded))
    assert error_of(reply)["message"] == "Unknown tool: naïve"  # the headers agreed; the tool does not exist


@pytest.mark.parametrize("value", ["=?base64?not base64!?=", "=?base64?/w==?=", "caf\u00e9", "a\x01b"])
def test_bad_header_values_are_32020(server, value):
    reply = core_reply(call("echo", text="x"), server, http_headers("tools/call", value))
    assert error_of(reply)["code"] == -32020 and reply.http_status == 400


def test_notifications_need_no_headers(server):
    assert core_reply({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}, server,
                      {}) is None


def test_mcp_param_headers_must_mirror_annotated_arguments():
    server = Server("regions")
    schema = {"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"},
                                               "count": {"type": "integer", "x-mcp-header": "Count"}}}

    @server.tool(input_schema=schema)
    def where(region: str = "eu", count: int = 1) -> str:
        return region

    message = request("tools/call", name="where", arguments={"region": "us-west", "count": 42})
    good = http_headers("tools/call", "where", **{"mcp-param-region": "us-west", "mcp-param-count": "42.0"})
    assert "result" in core_reply(message, server, good).response
    missing = http_headers("tools/call", "where", **{"mcp-param-count": "42"})
    assert error_of(core_reply(message, server, missing))["code"] == -32020
    wrong = dict(good, **{"mcp-param-region": "eu"})
    assert error_of(core_reply(message, server, wrong))["code"] == -32020


# --- encoding -------------------------------------------------------------------------------


def test_encoding_is_one_line_of_utf8(server):
    data = encode(answer(call("echo", text="line1\nline2\t\u00e9\u4e2d\U0001f600"), server))
    assert b"\n" not in data
    assert json.loads(data)["result"]["content"][0]["text"] == "line1\nline2\t\u00e9\u4e2d\U0001f600"
    assert "\u00e9".encode() in data  # UTF-8 as it is, not \\u escapes


def test_a_lone_surrogate_survives_escaped(server):
    response = core_reply(json.dumps(call("echo", text="\ud800")).encode(), server).response
    assert json.loads(encode(response))["result"]["content"][0]["text"] == "\ud800"


def test_an_unencodable_response_becomes_an_internal_error():
    assert json.loads(encode({"jsonrpc": "2.0", "id": 3, "result": {"x": object()}}))["error"]["code"] == -32603


def test_a_tool_needing_an_undeclared_client_capability_is_32021():
    server = Server("needs")
    server.tool(lambda: "sampled", name="summarise", requires_client_capabilities={"sampling": {}})
    reply = core_reply(call("summarise"), server)
    assert reply.http_status == 400
    assert error_of(reply) == {"code": -32021, "message": "Missing required client capability: sampling",
                               "data": {"requiredCapabilities": {"sampling": {}}}}
    declared = dict(META, **{"io.modelcontextprotocol/clientCapabilities": {"sampling": {}}})
    assert answer(request("tools/call", meta=declared, name="summarise"), server)["result"]["content"][0]["text"] \
        == "sampled"
