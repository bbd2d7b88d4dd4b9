"""Deeply nested JSON must get a clean error, never a crashed process (issue: musl's 128 KiB thread stacks).

Each check runs in a child process, in a thread whose stack is as small as musl's default, so a
regression shows as a failed test (the child dies with SIGSEGV) on any libc, not a dead test run.
"""

import json
import subprocess
import sys
import textwrap

from mcptest import META

MUSL_THREAD_STACK = 128 * 1024

CHILD = textwrap.dedent("""
    import json, sys, threading
    from mcpserver import Server
    from mcpserver.protocol import Refusal, Request, dispatch, encode, parse

    server = Server("nesting")
    server.tool(lambda value=None: value, name="echo_any")
    payloads = json.loads(sys.stdin.read())
    answers = []

    def work():
        for payload in payloads:
            message = parse(payload.encode())
            reply = message.reply if isinstance(message, Refusal) else dispatch(message, server)
            answers.append(json.loads(encode(reply.response)))

    threading.stack_size(STACK)
    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    print(json.dumps(answers))
""").replace("STACK", str(MUSL_THREAD_STACK))


def answer_in_small_thread(*payloads):
    child = subprocess.run([sys.executable, "-c", CHILD], input=json.dumps(payloads), capture_output=True,
                           text=True, timeout=60)
    assert child.returncode == 0, f"the process died (status {child.returncode}): {child.stderr[-2000:]}"
    return json.loads(child.stdout)


def nested_call(depth, opener="[", closer="]", innermost=""):
    value = opener * depth + innermost + closer * depth
    head = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"_meta": META, "name": "echo_any", "arguments": {"value": "HOLE"}}})
    return head.replace('"HOLE"', value)


def test_hostile_nesting_is_a_parse_error_not_a_crash():
    answers = answer_in_small_thread("[" * 2000 + "]" * 2000, '{"a":' * 100_000 + "1" + "}" * 100_000,
                                     nested_call(5000))
    for answer in answers:
        assert answer["error"]["code"] == -32700
        assert "nested" in answer["error"]["message"]


def test_the_deepest_accepted_message_is_served_in_a_small_stack():
    from mcpserver._json import MAX_JSON_DEPTH

    deepest = MAX_JSON_DEPTH - 4  # the envelope takes four levels: message, params, arguments, value
    answers = answer_in_small_thread(nested_call(deepest), nested_call(deepest, '{"k":', "}", "1"))
    for answer in answers:
        assert answer["result"]["resultType"] == "complete", answer
    assert answers[0]["result"]["structuredContent"] == json.loads("[" * deepest + "]" * deepest)


def test_brackets_inside_strings_do_not_count():
    text = "[" * 10_000 + '"' + "{" * 10_000
    answers = answer_in_small_thread(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                                 "params": {"_meta": META, "name": "echo_any",
                                                            "arguments": {"value": text}}}))
    assert answers[0]["result"]["content"][0]["text"] == text
