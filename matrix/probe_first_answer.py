"""Runs inside a cell, on the cell's own interpreter (Python 3.9 or newer, any implementation, standard library
only): the time from spawning `python -m mcpserver TARGET` to its first tools/call answer, as an MCP client
that spawns a server per conversation feels it, side by side with the same interpreter answering from a
bare json line loop (the least any Python server can do).

    python probe_first_answer.py RUNS TARGET     # prints {"server": [ms, ...], "bare": [ms, ...]}

Each kind starts once to warm the page cache, then RUNS times, alternating, so background load hits both
alike. The lab passes this file's text with `-c` (matrix/startup.py).
"""

import json
import subprocess
import sys
import time

REQUEST = json.dumps({
    "jsonrpc": "2.0", "id": 1, "method": "tools/call",
    "params": {"name": "echo", "arguments": {"text": "first"}, "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}}},
}).encode() + b"\n"
# bench/ceiling_stdio.py's loop, cut to the one tool asked for.
BARE = """import json, sys
for line in sys.stdin.buffer:
    message = json.loads(line)
    text = message["params"]["arguments"]["text"]
    answer = {"jsonrpc": "2.0", "id": message["id"], "result": {"content": [{"type": "text", "text": text}]}}
    sys.stdout.buffer.write(json.dumps(answer).encode() + b"\\n")
    sys.stdout.buffer.flush()
"""


def first_answer_ms(argv: list[str]) -> float:
    started = time.perf_counter()
    process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert process.stdin is not None and process.stdout is not None
    try:
        process.stdin.write(REQUEST)
        process.stdin.flush()
        answer = process.stdout.readline()
        elapsed = time.perf_counter() - started
    finally:
        process.stdin.close()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        process.stdout.close()
    try:
        text = json.loads(answer)["result"]["content"][0]["text"]
    except (ValueError, KeyError, IndexError, TypeError):
        text = None
    if text != "first":
        raise SystemExit(f"{' '.join(argv[:4])} did not answer the tools/call: {answer[:300]!r}")
    return round(elapsed * 1000, 2)


def main() -> None:
    runs, target = int(sys.argv[1]), sys.argv[2]
    kinds = {"server": [sys.executable, "-m", "mcpserver", target], "bare": [sys.executable, "-c", BARE]}
    samples: dict[str, list[float]] = {kind: [] for kind in kinds}
    for argv in kinds.values():
        first_answer_ms(argv)
    for _ in range(runs):
        for kind, argv in kinds.items():
            samples[kind].append(first_answer_ms(argv))
    print(json.dumps(samples))


if __name__ == "__main__":
    main()
