"""Tool code and clients abusing a stdio server: each case is answered, and the server goes on serving."""

import json
import os

import pytest
from mcptest import SLOW_TOOLS, StdioServer, call, line, request, responses, run_once

TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hostile_tools.py")
NORMAL = call("tags", id="after", tags=["still", "here"])


def answers_after(*messages, timeout: float = 60) -> list:
    """Send the messages then a normal request; every message is answered and the normal one last."""
    done = run_once(TOOLS, b"".join(line(m) for m in messages) + line(NORMAL), timeout=timeout)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    answers = responses(done.stdout)  # in completion order: ids pair them
    after = [a for a in answers if a.get("id") == "after"]
    assert len(after) == 1 and after[0]["result"]["structuredContent"] == 2, answers
    return sorted((a for a in answers if a.get("id") != "after"), key=lambda a: str(a.get("id")))


def text(answer) -> str:
    return answer["result"]["content"][0]["text"]


def test_unique_items_is_linear_in_the_number_of_tags():
    # Every pair was compared: 8,000 tags (71 KB) took 22 s of one core; 200,000 would take hours.
    [answer] = answers_after(call("tags", id=1, tags=[f"tag-{i}" for i in range(200_000)]))
    assert answer["result"]["structuredContent"] == 200_000


def test_duplicates_are_found_by_json_equality():
    for duplicated, count in (([1, 1.0], None), ([{"a": [1, {"b": 2}]}, {"a": [1.0, {"b": 2}]}], None),
                              ([True, 1], 2), ([0, False], 2), (["1", 1], 2)):
        done = run_once(TOOLS, line(call("unique_any", id=1, items=duplicated)))
        [answer] = responses(done.stdout)
        if count is None:
            assert answer["result"]["isError"] is True and "duplicates an earlier item" in text(answer)
        else:
            assert answer["result"].get("isError") is not True, answer


def test_a_huge_integer_against_a_fractional_multiple_of_is_checked_exactly():
    # value / 0.5 overflowed a float: an uncaught OverflowError, answered -32603.
    huge = "9" * 400
    [answer] = answers_after(json.loads(json.dumps(call("halves", id=1, n=0)).replace('"n": 0', '"n": ' + huge)))
    assert text(answer) == huge


@pytest.mark.parametrize("kind", ["KeyboardInterrupt", "SystemExit", "CancelledError", "GeneratorExit",
                                  "BaseException"])
def test_a_base_exception_from_a_tool_is_its_failure_not_the_servers(kind):
    [answer] = answers_after(call("raise_base", id=1, kind=kind))
    assert answer["result"]["isError"] is True and kind in text(answer)


def test_an_async_tool_cancelled_from_inside_is_a_failed_call():
    [answer] = answers_after(call("async_cancelled", id=1))
    assert answer["result"]["isError"] is True and "CancelledError" in text(answer)


def test_a_tool_reading_stdin_gets_nothing_and_eats_no_request():
    with StdioServer(TOOLS) as server:
        assert text(server.ask(call("read_stdin", id=1))) == ""
        assert server.ask(NORMAL)["id"] == "after"


def test_a_child_inheriting_stdin_eats_no_request():
    with StdioServer(TOOLS) as server:
        server.send(line(call("child_reads_stdin", id=1)))
        server.wait_for_stderr("child_reads_stdin: starting cat")
        server.send(line(NORMAL))  # with fd 0 shared, cat read this line and waited for more
        first, second = sorted((server.receive(), server.receive()), key=lambda a: str(a["id"]))
        assert text(first) == "" and second["id"] == "after"


def test_a_progress_bar_without_newlines_costs_linear_time():
    # The log writer re-split its whole pending buffer on every write: 40,000 updates took 8 s.
    [answer] = answers_after(call("progress_bar", id=1, updates=400_000), timeout=60)
    assert text(answer) == "drawn"


@pytest.mark.parametrize("message", [{"id": [], "method": "prompts/get"}, {"jsonrpc": "2.0", "id": 1, "method": {}},
                                     {"jsonrpc": "2.0", "id": {"a": 1}, "method": "tools/call", "params": {}},
                                     {"jsonrpc": "2.0", "method": "notifications/cancelled",
                                      "params": {"requestId": [1]}}])
def test_an_id_or_method_of_the_wrong_type_leaves_the_reader_alive(message):
    """Found by make fuzz: an unhashable id or method killed the reader (requests after it never answered)."""
    answers = answers_after(message)
    assert all(answer["error"]["code"] == -32600 for answer in answers), answers


def test_a_uri_against_a_template_of_three_reserved_expansions_costs_linear_time():
    """Found by make fuzz: the template's regular expression backtracked cubically on a URI that does not
    fit (200,000 characters: hours of one core, holding the GIL). Matching is linear now, splits unchanged."""
    read = request("resources/read", id=1, uri="repo://" + "a/" * 100_000 + "\n")  # the line break fits no value
    fits = request("resources/read", id=2, uri="repo://ada/notes/docs/readme.md")
    missing, found = answers_after(read, fits, timeout=60)
    assert missing["error"]["code"] == -32602
    assert found["result"]["contents"][0]["text"] == "ada/notes docs readme.md"


@pytest.mark.parametrize("kind", ["structured_nan", "structured_deep", "deep", "set"])
def test_a_result_json_cannot_carry_is_the_tools_failure(kind):
    """Found by make fuzz: NaN in ToolResult.structured, or nesting past the stack, answered -32603."""
    [answer] = answers_after(call("returns", id=1, kind=kind))
    assert answer["result"]["isError"] is True and "cannot be sent as JSON" in text(answer), answer


@pytest.mark.parametrize("tool", ["echo_text", "raw_cat"])
def test_a_lone_surrogate_for_a_programs_argv_or_raw_stdin_is_refused_clearly(tool):
    """Found by make fuzz: "\\ud800" cannot be UTF-8, and the run died with UnicodeEncodeError."""
    [answer] = answers_after(call(tool, id=1, text="a\ud800b"))
    assert answer["result"]["isError"] is True and "lone surrogate" in text(answer), answer


def test_a_lone_surrogate_in_json_on_stdin_reaches_the_program_escaped():
    [answer] = answers_after(call("json_cat", id=1, text="a\ud800b"))
    assert answer["result"]["structuredContent"] == {"text": "a\ud800b"}, answer


# --- every slot taken: reading goes on (issue 23, item 3) -----------------------------------------------


def cancel(request_id):
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id}}


def test_cancels_get_through_while_every_slot_is_taken(tmp_path):
    """17 long calls fill the 16 slots and queue one; the 17 cancels behind them are read and acted on at
    once. Before, the reader waited on the 17th call, so no cancel was read until a call ended by itself
    (the pid call below then waited past its 30 s)."""
    never = str(tmp_path / "never-released")
    with StdioServer(SLOW_TOOLS) as server:
        server.send(b"".join(line(call("held", id=f"long-{n}", path=never)) for n in range(17)))
        server.send(b"".join(line(cancel(f"long-{n}")) for n in reversed(range(17))))  # the queued one first
        assert server.ask(call("pid", id="quick"), timeout=30)["id"] == "quick"
        code, rest = server.close(timeout=30)
    assert code == 0 and responses(rest) == [], "a cancelled call was answered"
    assert server.stderr.count("held: started") <= 16, "the queued call ran although it was cancelled first"


def test_a_queued_call_runs_when_a_slot_frees_and_answers_in_turn(tmp_path):
    release = tmp_path / "release"
    with StdioServer(SLOW_TOOLS, "--max-concurrent", "2") as server:
        server.send(b"".join(line(call("held", id=f"h{n}", path=str(release))) for n in range(3)))
        server.wait_for_stderr("held: started")
        assert server.ask(request("tools/list", id="list"))["id"] == "list"  # the reader goes on
        release.touch()
        answered = sorted(server.receive(60)["id"] for _ in range(3))
        assert answered == ["h0", "h1", "h2"]
        assert server.close()[0] == 0
