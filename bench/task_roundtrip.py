"""A task's round trip through a live server: tools/call (the extension declared) answered with a task,
then tasks/get polled until it is completed, over stdio and over HTTP, with the memory and the SQLite
store. The tool returns at once, so what is measured is the extension's own cost: creating and
announcing the task, running it on a task thread, storing its result, and the polls.

    python3 bench/task_roundtrip.py                  # prints a Markdown table
    python3 bench/task_roundtrip.py --tasks 200 --json
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Callable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVER = '''
from mcpserver import Context, Server
server = Server("bench-tasks")

@server.tool(task="optional")
def quick(n: int, ctx: Context) -> str:
    return f"done {n}"
'''
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}


def message(request_id: int, method: str, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": {"_meta": META, **params}}


def environment(**extra: str) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=os.path.join(ROOT, "server"), MCPSERVER_STATE_KEY="bench", **extra)


class Stdio:
    def __init__(self, target: str, store: list[str]):
        self.process = subprocess.Popen([sys.executable, "-m", "mcpserver", *store, target], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=environment())

    def ask(self, sent: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(sent).encode() + b"\n")
        self.process.stdin.flush()
        return json.loads(self.process.stdout.readline())  # type: ignore[no-any-return]

    def close(self) -> None:
        self.process.kill()
        self.process.wait()


class Http:
    """A live HTTP server (`python -m mcpserver --http`) and one keep-alive connection to it."""

    def __init__(self, target: str, store: list[str], **env: str):
        self.process = subprocess.Popen([sys.executable, "-m", "mcpserver", "--http", "--port", "0", *store, target],
                                        stderr=subprocess.PIPE, text=True, env=environment(**env))
        assert self.process.stderr is not None
        port = int(re.search(r":(\d+)/mcp", self.process.stderr.readline()).group(1))  # type: ignore[union-attr]
        threading.Thread(target=self.process.stderr.read, daemon=True).start()  # its log must not fill the pipe
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def ask(self, sent: dict[str, Any]) -> dict[str, Any]:
        params = sent["params"]
        return self.post(json.dumps(sent).encode(), sent["method"], params.get("name") or params.get("taskId"))

    def post(self, body: bytes, method: str, name: str) -> dict[str, Any]:
        """`body`, already encoded (so a bench can leave the client's encoding out of what it times)."""
        self.connection.request("POST", "/mcp", body=body, headers={
            "Content-Type": "application/json", "Accept": "application/json", "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": method, "Mcp-Name": name})
        return json.loads(self.connection.getresponse().read())  # type: ignore[no-any-return]

    def close(self) -> None:
        self.connection.close()
        self.process.kill()
        self.process.wait()


def round_trip(client: Any, n: int) -> tuple[float, int]:
    """Seconds from the call to the completed task, and how many polls it took."""
    started = time.perf_counter()
    created = client.ask(message(n, "tools/call", name="quick", arguments={"n": n}))["result"]
    assert created["resultType"] == "task", created
    polls = 0
    while True:
        polls += 1
        task = client.ask(message(n, "tasks/get", taskId=created["taskId"]))["result"]
        if task["status"] == "completed":
            assert task["result"]["content"][0]["text"] == f"done {n}"
            return time.perf_counter() - started, polls
        time.sleep(0.001)


def measure(make: Callable[[], Any], tasks: int) -> dict[str, float]:
    client = make()
    try:
        for n in range(10):  # warm-up
            round_trip(client, n)
        times, polls = zip(*(round_trip(client, n) for n in range(100, 100 + tasks)))
    finally:
        client.close()
    ordered = sorted(times)
    return {"p50_ms": statistics.median(times) * 1000, "p90_ms": ordered[int(len(ordered) * 0.9)] * 1000,
            "polls": statistics.mean(polls)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        target = os.path.join(folder, "bench_tasks.py")
        with open(target, "w") as file:
            file.write(SERVER)
        results = {}
        for transport, kind in (("stdio", Stdio), ("HTTP", Http)):
            for store_name, store in (("memory", []), ("SQLite", ["--task-store", os.path.join(folder, "t.db")])):
                results[f"{transport}, {store_name}"] = measure(lambda k=kind, s=store: k(target, s), args.tasks)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print("| transport, store | round trip p50 | p90 | polls per task |\n|---|---:|---:|---:|")
    for key, value in results.items():
        print(f"| {key} | {value['p50_ms']:.2f} ms | {value['p90_ms']:.2f} ms | {value['polls']:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
