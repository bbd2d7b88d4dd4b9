"""Rate limits (--rate-limit, --burst; @server.tool(rate_limit=...)) from the attacker's side: many peers, forged
X-Forwarded-For, many identities against a bounded table. Every count here is of requests admitted and refused,
with limits no test can outrun (N/h) or an injected clock: nothing depends on how fast this machine is."""

import os
import subprocess
import sys
import textwrap

import pytest
from mcpserver import Server, ToolRateLimits
from mcpserver._ratelimit import Buckets, Rate
from mcpserver.auth import Principal
from mcpserver.errors import ConfigError
from mcpserver.testing import Client, ClientError
from mcptest import DEMO, HttpServer, StdioServer, call, mcp_headers, request

LEGACY = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_bucket_lets_its_burst_through_then_says_when_the_next_will_pass():
    clock = Clock()
    buckets = Buckets(Rate("1/s", burst=3), clock=clock)
    assert [buckets.take("a") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert buckets.take("a") == pytest.approx(1.0)
    assert buckets.take("b") == 0.0  # another key, its own bucket
    clock.now += 1.0
    assert buckets.take("a") == 0.0 and buckets.take("a") == pytest.approx(1.0)


def test_a_hundred_thousand_identities_cost_a_bounded_table_and_get_one_extra_bucket_between_them():
    clock = Clock()
    buckets = Buckets(Rate("5/h"), max_keys=1000, clock=clock)  # burst 5
    admitted = sum(buckets.take(f"identity {n}") == 0.0 for n in range(100_000))
    assert len(buckets) == 1000
    assert admitted == 1000 + 5  # one each for the table's, then the overflow bucket's burst, then nothing
    assert buckets.take("identity 0") == 0.0  # those in the table keep their own bucket
    clock.now += 3600  # every bucket filled up again: forgetting one loses nothing, so newcomers take places...
    assert sum(buckets.take(f"newcomer {n}") == 0.0 for n in range(5000)) == 1000 + 5  # ...until they fill it
    assert len(buckets) == 1000


@pytest.mark.parametrize("text", ["10", "0/s", "1.5/s", "10/d", "-3/m", "/s", "ten/s", "10/s/s"])
def test_what_is_not_a_rate_is_refused_saying_what_one_is(text):
    with pytest.raises(ValueError, match="N/s, N/m or N/h"):
        Rate(text)


def test_the_command_line_refuses_a_bad_rate_and_a_burst_without_one():
    bad = subprocess.run([sys.executable, "-m", "mcpserver", "--http", "--rate-limit", "10/day", DEMO],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "N/s, N/m or N/h" in bad.stderr
    alone = subprocess.run([sys.executable, "-m", "mcpserver", "--http", "--port", "0", "--burst", "5", DEMO],
                           capture_output=True, text=True, timeout=60)
    assert alone.returncode == 1 and "a burst needs a rate limit" in alone.stderr


def through_proxy(server, message, peer, **extra):
    headers = {**mcp_headers(message), "X-Forwarded-Proto": "https", "X-Forwarded-For": peer, **extra}
    return server.post(message, headers=headers)


def assert_limited(answer):
    status, headers, body = answer
    assert status == 429 and int(headers["retry-after"]) >= 1, answer
    assert "id" not in body and body["error"]["code"] == -32603
    assert body["error"]["message"].startswith("Too many requests: at most 2 an hour (bursts of 2) per client")
    assert body["error"]["data"]["retryAfterSeconds"] == int(headers["retry-after"])


def test_each_peer_behind_the_proxy_has_its_own_bucket_and_forging_the_header_does_not_escape_it():
    with HttpServer(DEMO, "--behind-proxy", "--insecure-no-auth", "--rate-limit", "2/h") as server:
        listing = request("tools/list")
        assert [through_proxy(server, listing, "10.0.0.1")[0] for _ in range(2)] == [200, 200]
        assert_limited(through_proxy(server, listing, "10.0.0.1"))
        # The client prepends addresses of its own; the proxy appends the one it saw, which is what counts.
        assert_limited(through_proxy(server, listing, "203.0.113.9, 10.0.0.1"))
        assert through_proxy(server, listing, "10.0.0.2")[0] == 200  # others are served meanwhile
        # A legacy client at the same address is the same client: its initialize is refused too.
        opening = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}}
        status, _, body = server.post(opening, headers={**LEGACY, "X-Forwarded-Proto": "https",
                                                        "X-Forwarded-For": "10.0.0.1"})
        assert status == 429 and body["error"]["code"] == -32603


def test_the_holders_of_the_static_token_are_one_client_wherever_they_connect_from(tmp_path):
    token = tmp_path / "token"
    token.write_text("a-token-for-everyone\n")
    with HttpServer(DEMO, "--behind-proxy", "--token-file", str(token), "--rate-limit", "2/h") as server:
        listing = request("tools/list")
        auth = {"Authorization": "Bearer a-token-for-everyone"}
        assert through_proxy(server, listing, "10.0.0.1", **auth)[0] == 200
        assert through_proxy(server, listing, "10.0.0.2", **auth)[0] == 200
        assert_limited(through_proxy(server, listing, "10.0.0.3", **auth))
        assert through_proxy(server, listing, "10.0.0.3")[0] == 401  # no token: refused before it is counted


LIMITED_TOOLS = textwrap.dedent('''
    from mcpserver import Server

    server = Server("limited")

    @server.tool(rate_limit="2/h")
    def expensive(query: str) -> str:
        """Ask the paid API."""
        return "answer to " + query

    @server.tool()
    def free() -> str:
        """Costs nothing."""
        return "free"
''')


def test_a_tools_own_limit_holds_over_stdio_and_the_other_tools_are_served(tmp_path):
    target = tmp_path / "limited.py"
    target.write_text(LIMITED_TOOLS)
    with StdioServer(str(target)) as server:
        answers = [server.ask(call("expensive", id=n, query="q")) for n in range(3)]
        assert [("result" in a) for a in answers] == [True, True, False]
        error = answers[2]["error"]
        assert error["code"] == -32603 and "for the tool expensive" in error["message"]
        assert error["data"]["retryAfterSeconds"] >= 1 and error["data"]["limit"] == "2/h"
        assert "result" in server.ask(call("free", id=9))


def test_a_tools_own_limit_over_http_is_429_with_retry_after(tmp_path):
    target = tmp_path / "limited.py"
    target.write_text(LIMITED_TOOLS)
    with HttpServer(str(target)) as server:
        statuses = [server.post(call("expensive", id=n, query="q"))[0] for n in range(2)]
        status, headers, body = server.post(call("expensive", id=3, query="q"))
        assert statuses == [200, 200] and status == 429
        assert int(headers["retry-after"]) == body["error"]["data"]["retryAfterSeconds"] >= 1
        assert server.post(call("free"))[0] == 200


def test_a_tools_limit_counts_each_oauth_subject_apart_in_both_eras():
    """Each subject has its own bucket: bob is served after alice is refused."""
    server = Server("subjects")

    @server.tool(rate_limit="1/h")
    def expensive() -> str:
        return "done"

    for era in ("modern", "legacy"):
        for subject in ("alice", "bob"):
            with Client(server, era=era, principal=Principal(subject=f"{era} {subject}")) as client:
                assert client.call_tool("expensive").text == "done"
                with pytest.raises(ClientError) as refused:
                    client.call_tool("expensive")
                # a legacy session's errors are all HTTP 200 (LEGACY.md §10); the HTTP-level limit is 429 there too
                assert refused.value.code == -32603 and refused.value.http_status == (429 if era == "modern" else 200)


def test_a_mapping_of_limits_as_middleware_refills_at_its_rate():
    clock = Clock()
    server = Server("mapped")
    server.tool(lambda: "x", name="git_log")
    server.middleware(ToolRateLimits({"git_log": Rate("1/s", burst=2)}, clock=clock))
    with Client(server) as client:
        assert [client.call_tool("git_log").text for _ in range(2)] == ["x", "x"]
        with pytest.raises(ClientError, match="try again in 1 s"):
            client.call_tool("git_log")
        clock.now += 1.0
        assert client.call_tool("git_log").text == "x"


def test_a_bad_rate_on_a_tool_refuses_to_register_it():
    server = Server("bad")
    with pytest.raises(ConfigError, match="N/s, N/m or N/h"):
        server.tool(rate_limit="lots")(lambda: "x")
    assert server.tools == {} and len(server.middleware) == 0


def test_no_limit_asked_for_loads_nothing_and_adds_no_middleware():
    done = subprocess.run([sys.executable, "-c", "import sys, mcpserver; s = mcpserver.Server('x'); s.tool(lambda: 1, "
                           "name='t'); print('mcpserver._ratelimit' in sys.modules, len(s.middleware))"],
                          capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": "server"})
    assert done.stdout.split() == ["False", "0"], done
