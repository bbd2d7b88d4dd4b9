"""Hostile JSON over stdio: inputs that once cost far more than linear time, or could not be answered.

Each case feeds one hostile line to a real server, then a normal request, and expects both answered:
the hostile one with a clear error, well inside a timeout that the old quadratic code missed by minutes.
"""

import json

import pytest
from mcptest import DEMO, call, line, responses, run_once

NORMAL = call("echo", id="after", text="still here")


def answers_to(hostile: bytes, timeout: float = 60) -> list:
    done = run_once(DEMO, hostile + b"\n" + line(NORMAL), timeout=timeout)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert b"Traceback" not in done.stderr, done.stderr.decode()[-2000:]
    answers = responses(done.stdout)  # in completion order: ids pair them
    after = [a for a in answers if a.get("id") == "after"]
    assert len(after) == 1 and after[0]["result"]["content"][0]["text"] == "still here", answers
    return [a for a in answers if a.get("id") != "after"]


def test_an_unclosed_string_after_deep_brackets_is_answered_in_linear_time():
    # The depth pre-check's string regex once rescanned from every quote: 1 MB took about 50 minutes.
    hostile = ("[" * 65 + '"' + '\\"' * 500_000).encode()
    [answer] = answers_to(hostile)
    assert answer["error"]["code"] == -32700 and "id" not in answer


@pytest.mark.parametrize("ending", ["", "\\", '\\"', "\\\\"])
def test_every_way_a_string_can_end_unclosed_is_a_parse_error(ending):
    [answer] = answers_to(("[" * 70 + '"abc' + ending).encode())
    assert answer["error"]["code"] == -32700


def test_a_number_too_large_for_a_float_is_refused_not_sent_back_as_infinity():
    message = json.dumps(call("echo", id=7, text="x")).replace('"x"', "1e999")
    [answer] = answers_to(message.encode())
    assert answer["error"]["code"] == -32700
    assert "out of range" in answer["error"]["message"]


def test_an_integer_with_a_million_digits_is_refused_at_once():
    # Decimal-to-int conversion is quadratic; Pythons without a digit limit would spend minutes here.
    message = json.dumps(call("echo", id=7, text="x")).replace('"x"', "7" * 1_000_000)
    [answer] = answers_to(message.encode(), timeout=30)
    assert answer["error"]["code"] == -32700
