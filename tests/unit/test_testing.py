"""mcpserver.testing: the in-process client a server's author tests with. Each test drives a real server
through it and checks what the wire carried; the README's quick start is run as written."""

import asyncio
import logging
import os
import re
import subprocess
import sys
import threading
import time

import mcpserver
import pytest
from mcpserver import Context, ProtocolError, Server, ToolError, content, inputs
from mcpserver.auth import Principal
from mcpserver.testing import (
    Client,
    ClientError,
    InputNotAnswered,
    LogRecord,
    Progress,
    RequestCancelled,
    accept,
    decline,
    roots,
    sampled,
)
from mcptest import DEMO, ROOT

ERAS = ["modern", "legacy"]
FORM = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


@pytest.fixture
def server():
    """Tools for every feature; `runs` counts how often each got past its first line (MRTR reruns show)."""
    server = Server("testing", "1.0.0", state_key="test-key", instructions="for the tests")
    server.runs = []
    server.stopped = threading.Event()

    @server.tool()
    def greet(name: str, excited: bool = False) -> str:
        return f"Hello, {name}" + ("!" if excited else ".")

    @server.tool()
    def add(a: int, b: int) -> dict:
        return {"sum": a + b}

    @server.tool()
    def refuse() -> str:
        raise ToolError("not today")

    @server.tool()
    def count(to: int, ctx: Context) -> str:
        for number in range(1, to + 1):
            ctx.progress(number, to, f"at {number}")
        return f"counted to {to}"

    @server.tool()
    def wobbly(ctx: Context) -> str:
        for value in (1, 3, 2, 4):  # 2 is not above 3: never sent
            ctx.progress(value)
        return "done"

    @server.tool()
    def endless(ctx: Context) -> str:
        try:
            for number in range(1, 10_000):
                ctx.progress(number)
                ctx.sleep(0.02)
        finally:
            server.stopped.set()
        return "never"

    @server.tool()
    def confirm(what: str, ctx: Context) -> str:
        server.runs.append(what)
        answer = ctx.elicit(f"Really {what}?", FORM)
        return f"{what}: {answer['action']} {answer.get('content', {}).get('ok')}"

    @server.tool()
    def everything(ctx: Context) -> str:
        server.runs.append("everything")
        form = ctx.elicit("Name?", {"type": "object", "properties": {"name": {"type": "string"}}})
        reply = ctx.sample("Say hi", max_tokens=10)
        places = ctx.roots()
        return f"{form['content']['name']} / {reply['content']['text']} / {[r['uri'] for r in places]}"

    @server.tool()
    def where(ctx: Context) -> str:
        return ",".join(r["uri"] for r in ctx.roots(default=[{"uri": "nowhere"}]))

    @server.tool()
    def chatty(ctx: Context) -> str:
        ctx.log("debug", "a detail")
        ctx.log("warning", {"disk": "full"}, logger="storage")
        logging.getLogger("tests.chatty").error("from Python logging")
        return "said"

    @server.tool()
    async def shout(text: str) -> str:
        await asyncio.sleep(0.01)
        return text.upper()

    @server.tool()
    def whoami(ctx: Context) -> str:
        return "nobody" if ctx.principal is None else ctx.principal.subject

    @server.tool()
    def deep(value: dict) -> str:
        return "read"

    @server.resource("notes://todo", mime_type="text/plain")
    def todo() -> str:
        return "buy milk"

    @server.resource("files://logo")
    def logo() -> bytes:
        return b"\x89PNG\x00"

    @server.resource_template("users://{user}/notes/{note}", completions={"note": ["draft", "done", "dreams"]})
    def note(user: str, note: str) -> str:
        return f"{user}:{note}"

    @server.prompt(completions={"style": ["terse", "thorough"]})
    def review(code: str, style: str = "terse") -> str:
        """Review some code."""
        return f"Review ({style}):\n{code}"

    return server


# -- calls, results and errors ----------------------------------------------------------------------------


def test_a_tool_call_gives_a_typed_result(server):
    with Client(server) as client:
        greeting = client.call_tool("greet", {"name": "Ada", "excited": True})
        assert greeting.text == "Hello, Ada!" and not greeting.is_error and greeting.structured is None
        assert greeting.content == [{"type": "text", "text": "Hello, Ada!"}]
        assert greeting.raw["resultType"] == "complete" and greeting.task_id is None
        total = client.call_tool("add", {"a": 2, "b": 3})
        assert total.structured == {"sum": 5}
        refused = client.call_tool("refuse")
        assert refused.is_error and refused.text == "not today"
        assert client.call_tool("greet", {}).is_error  # arguments the schema refuses: a result, not an error


def test_a_json_rpc_error_is_a_client_error_with_code_data_and_the_http_status(server):
    with Client(server) as client, pytest.raises(ClientError) as raised:
        client.call_tool("nope")
    assert isinstance(raised.value, ProtocolError)
    assert (raised.value.code, raised.value.message, raised.value.http_status) == (-32602, "Unknown tool: nope", 200)
    assert raised.value.response["error"]["code"] == -32602 and str(raised.value) == "-32602 Unknown tool: nope"


def test_every_message_crosses_as_bytes_so_the_test_sees_what_a_transport_would(server):
    with Client(server) as client:
        # A tuple is not JSON: it arrives as the array a transport would carry. handle() with dicts would not
        # show it; nor the refusal of nesting deeper than the parser takes, which only bytes can reach.
        assert client.call_tool("add", {"a": 1, "b": 2}).raw["content"][0]["text"] == '{"sum":3}'
        nested: dict = {}
        for _ in range(70):
            nested = {"x": nested}
        with pytest.raises(ClientError) as raised:
            client.call_tool("deep", {"value": nested})
        assert raised.value.code == -32700 and raised.value.http_status == 400


def test_a_target_loads_like_the_command_lines_and_is_shut_down_after():
    with Client(DEMO) as client:
        assert client.server.name == "demo"
        assert client.call_tool("add", {"a": 2, "b": 40}).structured == {"sum": 42}
        assert "echo" in [tool["name"] for tool in client.list_tools()]


def test_lists_follow_every_page(server):
    paged = Server("paged", page_size=2)
    for n in range(5):
        paged.tool(lambda: "x", name=f"tool{n}")
    with Client(paged) as client:
        assert [tool["name"] for tool in client.list_tools()] == [f"tool{n}" for n in range(5)]
    with Client(server) as client:
        assert [r["uri"] for r in client.list_resources()] == ["notes://todo", "files://logo"]
        assert [t["uriTemplate"] for t in client.list_resource_templates()] == ["users://{user}/notes/{note}"]
        assert [p["name"] for p in client.list_prompts()] == ["review"]


def test_resources_prompts_completions_and_discovery(server):
    with Client(server) as client:
        assert client.read_resource("notes://todo").text == "buy milk"
        assert client.read_resource("files://logo").blob == b"\x89PNG\x00"
        assert client.read_resource("users://ada/notes/42").contents[0]["text"] == "ada:42"
        with pytest.raises(ClientError, match="Resource not found"):
            client.read_resource("notes://nothing")
        prompt = client.get_prompt("review", {"code": "x = 1"})
        assert prompt.text == "Review (terse):\nx = 1" and prompt.description == "Review some code."
        assert client.complete("style", "t", prompt="review").values == ["terse", "thorough"]
        notes = client.complete("note", "d", resource="users://{user}/notes/{note}", context={"user": "ada"})
        assert notes.values == ["draft", "done", "dreams"] and notes.total == 3 and not notes.has_more
        found = client.discover()
        assert found.supported_versions == ["2026-07-28"] and found.instructions == "for the tests"
        assert found.server_info == {"name": "testing", "version": "1.0.0"} and "tools" in found.capabilities


def test_a_legacy_session_opens_with_initialize_at_the_revision_asked_for(server):
    with Client(server, era="legacy") as client:
        assert client.protocol_version == "2025-11-25" and client.session.revision == "2025-11-25"
        assert client.discover().supported_versions == ["2025-11-25"]
        assert client.call_tool("greet", {"name": "Ada"}).raw == {"content": [{"type": "text", "text": "Hello, Ada."}]}
    with Client(server, era="legacy", revision="2024-11-05") as old:
        assert old.discover().server_info == {"name": "testing", "version": "1.0.0"}
        assert "structuredContent" not in old.call_tool("add", {"a": 1, "b": 1}).raw  # 2024-11-05 has none
    with Client(server, era="legacy", revision="1999-01-01") as unknown:
        assert unknown.protocol_version == "2025-11-25"  # the server's newest legacy revision, as negotiated


# -- progress and logs ------------------------------------------------------------------------------------


@pytest.mark.parametrize("era", ERAS)
def test_progress_is_collected_in_order_or_handed_to_a_callback(server, era):
    seen = []
    with Client(server, era=era) as client:
        quiet = client.call_tool("count", {"to": 3})
        assert quiet.progress == [] and quiet.notifications == []  # not asked for: never sent
        loud = client.call_tool("count", {"to": 3}, progress=seen.append)
    message = [f"at {n}" for n in (1, 2, 3)]
    assert seen == loud.progress == [Progress(n, 3, text) for n, text in zip((1, 2, 3), message)]
    assert [n["method"] for n in loud.notifications] == ["notifications/progress"] * 3


def test_progress_that_does_not_increase_is_never_sent(server):
    with Client(server) as client:
        assert [p.progress for p in client.call_tool("wobbly", progress=True).progress] == [1, 3, 4]


def test_the_client_shows_what_was_sent_even_when_the_core_is_wrong(server, monkeypatch):
    # A client that sorted or de-duplicated progress would hide the regression this simulates: a Flight
    # that forgot its rule that progress only increases.
    from mcpserver._context import Flight

    def careless_send(self, message, progress=None):
        self._emit(message)
        return True

    monkeypatch.setattr(Flight, "send", careless_send)
    with Client(server) as client:
        assert [p.progress for p in client.call_tool("wobbly", progress=True).progress] == [1, 3, 2, 4]


def test_a_legacy_session_hears_log_records_at_its_level(server):
    with Client(server, era="legacy") as client:
        said = client.call_tool("chatty")
        assert said.logs == [LogRecord("warning", {"disk": "full"}, "storage"),
                             LogRecord("error", "from Python logging", "tests.chatty")]  # debug is below info
        client.set_log_level("debug")
        assert client.call_tool("chatty").logs[0] == LogRecord("debug", "a detail", None)
    with Client(server) as modern:
        assert modern.call_tool("chatty").logs == []  # 2026-07-28 has no notifications/message


def test_a_legacy_session_hears_list_changes(server):
    with Client(server, era="legacy") as client:
        server.tool(lambda: "new", name="fresh")
        assert client.notifications == [{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}]
        assert "fresh" in [tool["name"] for tool in client.list_tools()]


# -- input from the client --------------------------------------------------------------------------------


@pytest.mark.parametrize("era", ERAS)
def test_the_same_test_code_answers_input_in_either_era(server, era):
    asked = []

    def on_elicit(params):
        asked.append(params["message"])
        return accept(name="Ada")

    with Client(server, era=era, on_elicit=on_elicit, on_sample=lambda params: sampled("hi there"),
                on_roots=lambda params: roots("file:///work")) as client:
        result = client.call_tool("everything")
    assert result.text == "Ada / hi there / ['file:///work']" and asked == ["Name?"]
    assert [a["method"] for a in result.asked] == ["elicitation/create", "sampling/createMessage", "roots/list"]
    # MRTR runs the tool again with each round's answers; a legacy session's tool waits for them instead.
    assert server.runs == (["everything"] * 4 if era == "modern" else ["everything"])


@pytest.mark.parametrize("era", ERAS)
def test_canned_answers_are_given_in_turn_and_running_out_is_said(server, era):
    with Client(server, era=era, answers={"elicitation/create": [accept(ok=True), decline()]}) as client:
        assert client.call_tool("confirm", {"what": "delete"}).text == "delete: accept True"
        assert client.call_tool("confirm", {"what": "wipe"}).text == "wipe: decline None"
        with pytest.raises(InputNotAnswered, match="every canned answer is used"):
            client.call_tool("confirm", {"what": "again"})
    with Client(server, era=era, answers={"elicitation/create": accept(ok=False)}) as client:
        assert [client.call_tool("confirm", {"what": w}).text for w in "ab"] == ["a: accept False", "b: accept False"]


def test_a_capability_the_test_did_not_give_gets_the_real_refusal(server):
    with Client(server) as modern, pytest.raises(ClientError) as raised:
        modern.call_tool("confirm", {"what": "x"})
    assert raised.value.code == -32021 and raised.value.data == {"requiredCapabilities": {"elicitation": {}}}
    with Client(server, era="legacy") as legacy:
        refused = legacy.call_tool("confirm", {"what": "x"})
        assert refused.is_error and "Missing required client capability: elicitation" in refused.text
    for era in ERAS:
        with Client(server, era=era) as client:
            assert client.call_tool("where").text == "nowhere"  # the tool's default, when it has one
    assert server.runs == ["x", "x"]  # the legacy tool ran up to its question; the modern one too, once


def test_a_declared_capability_without_an_answer_is_said_plainly(server):
    with Client(server, capabilities={"elicitation": {}}) as client, pytest.raises(InputNotAnswered, match="on_elicit"):
        client.call_tool("confirm", {"what": "x"})


@pytest.mark.parametrize("era", ERAS)
def test_a_failing_callback_fails_the_test_and_stops_the_tool(server, era):
    def broken(params):
        raise AssertionError("the test did not expect a question")

    with Client(server, era=era, on_elicit=broken) as client:
        with pytest.raises(AssertionError, match="did not expect"):
            client.call_tool("confirm", {"what": "x"})
        assert client.call_tool("greet", {"name": "Ada"}).text == "Hello, Ada."  # the client goes on


def test_prompts_and_resources_ask_too():
    from mcptest import EXAMPLES

    answers = {"elicitation/create": [accept(language="Go"), accept(passphrase="open sesame")]}
    with Client(os.path.join(EXAMPLES, "interactive.py"), answers=answers) as client:
        assert client.get_prompt("review").text.startswith("Review this Go code")
        assert client.read_resource("secrets://vault").text == "The treasure is under the old oak."


# -- cancellation and time limits -------------------------------------------------------------------------


@pytest.mark.parametrize("era", ERAS)
def test_a_started_call_can_be_cancelled_and_the_tool_stops(server, era):
    with Client(server, era=era) as client:
        call = client.start_tool("endless", progress=True)
        assert [p.progress for p in call.wait_for_progress(3)][:3] == [1, 2, 3]
        call.cancel("enough")
        with pytest.raises(RequestCancelled):
            call.result(timeout=10)
        assert server.stopped.is_set()  # its loop had 200 s to go: it stopped at the cancel
        assert call.done() and client.call_tool("greet", {"name": "Ada"}).text == "Hello, Ada."


def test_cancel_after_and_a_timeout_cancel_the_call(server):
    with Client(server) as client:
        with pytest.raises(RequestCancelled):
            client.call_tool("endless", cancel_after=0.1)
        assert server.stopped.wait(5)
        server.stopped.clear()
        with pytest.raises(TimeoutError, match=r"did not end within 0\.2 s"):
            client.call_tool("endless", timeout=0.2)
        assert server.stopped.is_set()  # cancelled, not left running
        assert client.call_tool("greet", {"name": "Ada"}, cancel_after=10).text == "Hello, Ada."


def test_a_legacy_tool_waiting_for_an_answer_is_cancelled_while_it_waits(server):
    asked, answer_now = threading.Event(), threading.Event()

    def on_elicit(params):  # the user takes their time; the test cancels meanwhile
        asked.set()
        answer_now.wait(10)
        return accept(ok=True)

    with Client(server, era="legacy", on_elicit=on_elicit) as client:
        call = client.start_tool("confirm", {"what": "x"})
        assert asked.wait(10)
        call.cancel()
        answer_now.set()
        with pytest.raises(RequestCancelled):
            call.result(timeout=10)
        assert server.runs == ["x"]  # it waited for the answer, then stopped: it never ran again


def test_closing_the_client_cancels_what_still_runs(server):
    client = Client(server)
    call = client.start_tool("endless", progress=True)
    call.wait_for_progress(1)
    client.close()
    assert server.stopped.wait(5)
    with pytest.raises(RequestCancelled):
        call.result(timeout=10)
    with pytest.raises(RuntimeError, match="closed"):
        client.call_tool("greet", {"name": "Ada"})


# -- tasks ------------------------------------------------------------------------------------------------


@pytest.fixture
def tasks():
    server = Server("tasks", state_key="test-key")

    @server.tool(task="optional")
    def wait(seconds: float, ctx: Context) -> str:
        ctx.start_task()
        answer = ctx.elicit("Go on?", FORM)
        ctx.sleep(seconds)
        return f"waited {seconds:g}: {answer['action']}"

    @server.tool(task="required")
    def named(ctx: Context) -> str:
        answer = ctx.elicit("Name?", key="name")  # before the task starts: MRTR
        ctx.start_task()
        return f"hello {answer['content']['name']}"

    @server.tool(task="optional")
    def broken(ctx: Context) -> str:
        ctx.start_task()
        raise ProtocolError("an internal fault")

    return server


def test_a_task_is_polled_to_its_end_with_its_input_answered_by_the_same_callbacks(tasks):
    with Client(tasks, on_elicit=lambda params: accept(ok=True, name="Ada")) as client:
        done = client.call_tool("wait", {"seconds": 0.05}, task=True)
        assert done.text == "waited 0.05: accept" and done.task_id and done.asked[0]["params"]["message"] == "Go on?"
        plain = client.call_tool("wait", {"seconds": 0}, task=False)  # "optional" without the extension: plain
        assert plain.text == "waited 0: accept" and plain.task_id is None
        assert client.call_tool("named", task=True).text == "hello Ada"
        with pytest.raises(ClientError) as raised:
            client.call_tool("named")
        assert raised.value.code == -32021
        with pytest.raises(ClientError, match="an internal fault") as failed:
            client.call_tool("broken", task=True)
        assert failed.value.code == -32603


def test_a_task_is_cancelled_with_tasks_cancel(tasks):
    with Client(tasks, on_elicit=lambda params: accept(ok=True)) as client:
        call = client.start_tool("wait", {"seconds": 60}, task=True)
        deadline = time.monotonic() + 10
        while call.task_id is None and time.monotonic() < deadline:
            time.sleep(0.01)
        call.cancel()
        with pytest.raises(RequestCancelled, match=f"task {call.task_id} was cancelled"):
            call.result(timeout=10)
    with pytest.raises(ValueError, match="legacy"):
        Client(tasks, era="legacy").call_tool("wait", {"seconds": 0}, task=True)


# -- the rest ---------------------------------------------------------------------------------------------


def test_an_async_tool_works_even_from_a_test_that_runs_an_event_loop(server):
    with Client(server) as client:
        assert client.call_tool("shout", {"text": "hi"}).text == "HI"

        async def an_async_test():
            return client.call_tool("shout", {"text": "from a loop"}).text

        assert asyncio.run(an_async_test()) == "FROM A LOOP"


def test_the_principal_is_who_the_transport_would_have_authenticated(server):
    with Client(server, principal=Principal(subject="ada")) as client:
        assert client.call_tool("whoami").text == "ada"
    with Client(server) as anonymous:
        assert anonymous.call_tool("whoami").text == "nobody"


def test_content_helpers_and_inputs_are_what_the_wire_expects():
    assert accept(ok=True) == {"action": "accept", "content": {"ok": True}} and decline() == {"action": "decline"}
    assert sampled("x")["content"] == content.text("x") and roots("file:///a") == {"roots": [{"uri": "file:///a"}]}
    assert inputs.elicit("x")["method"] == "elicitation/create"


README = os.path.join(ROOT, "README.md")


@pytest.mark.skipif(not os.path.exists(README), reason="README.md is not part of the lab images' suites")
def test_the_readme_quick_start_test_passes_as_written(tmp_path):
    with open(README, encoding="utf-8") as file:
        blocks = dict(re.findall(r"```python\n# (\S+\.py)\n(.*?)```", file.read(), re.S))
    assert {"hello.py", "test_hello.py"} <= set(blocks), "the quick start lost its server or its test"
    for name in ("hello.py", "test_hello.py"):
        (tmp_path / name).write_text(blocks[name], encoding="utf-8")
    package = os.path.dirname(os.path.dirname(mcpserver.__file__))  # the copy under test, installed or not
    # pytest itself may come from PYTHONPATH (the lab mounts it so in every cell): kept, after these two.
    path = [str(tmp_path), package, os.path.dirname(os.path.dirname(pytest.__file__)), os.environ.get("PYTHONPATH", "")]
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error",
                           "test_hello.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in path if p)))
    assert done.returncode == 0 and " passed" in done.stdout, done.stdout + done.stderr


def test_start_tool_gives_a_running_call_and_the_old_name_still_reads_with_a_warning():
    import warnings

    import mcpserver
    from mcpserver import testing

    assert "RunningCall" in testing.__all__ and "Call" not in testing.__all__
    assert testing.RunningCall is not mcpserver.Call  # one name, one thing: mcpserver.Call is the middleware's
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert testing.Call is testing.RunningCall
    assert [warning.category for warning in caught] == [DeprecationWarning]
    with pytest.raises(AttributeError, match="no attribute 'Cal'"):
        testing.Cal  # noqa: B018
