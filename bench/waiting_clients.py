"""What waiting clients cost the built-in HTTP server: threads, RSS and a normal client's latency while
hundreds of connections idle, trickle a body that never comes, or hold subscriptions/listen streams.

    python bench/waiting_clients.py [--slow 500] [--listen 500] [--idle 200] [--requests 1000]

It starts `python -m mcpserver --http` on server/examples/notes.py with its default limits, measures a
normal client's lock-step tools/list round trips alone, then opens the waiting connections (listen
streams from 20 loopback addresses, 127.0.0.20 on, so the per-peer bound holds as it would for 20
clients), measures again, and prints one JSON object. Only the standard library; only loopback.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))

from mcptest import mcp_headers, request  # noqa: E402

NOTES = os.path.join(ROOT, "server", "examples", "notes.py")
SLOW_HEAD = (b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
             b"Content-Length: 1000\r\n\r\n")


def start(server_dir: str) -> tuple[subprocess.Popen[str], int]:
    env = dict(os.environ, PYTHONPATH=server_dir)
    process = subprocess.Popen([sys.executable, "-m", "mcpserver", "--http", "--port", "0", "--log-level", "warning",
                                NOTES], env=env, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    match = re.search(r":(\d+)/mcp", process.stderr.readline())
    assert match, "the server did not say where it listens"
    return process, int(match.group(1))


def raw(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode()
    head = "".join(f"{k}: {v}\r\n" for k, v in mcp_headers(message).items())
    return f"POST /mcp HTTP/1.1\r\nHost: localhost\r\n{head}Content-Length: {len(body)}\r\n\r\n".encode() + body


def round_trips(port: int, count: int) -> dict[str, float]:
    """`count` lock-step tools/list requests on one keep-alive connection: p50 and p99 in microseconds."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    data = raw(request("tools/list"))
    times = []
    for _ in range(count):
        started = time.perf_counter()
        sock.sendall(data)
        answer = b""
        while b"\r\n\r\n" not in answer or len(answer.split(b"\r\n\r\n", 1)[1]) < _length(answer):
            answer += sock.recv(65536)
        assert answer.startswith(b"HTTP/1.1 200 "), answer[:100]
        times.append(time.perf_counter() - started)
    sock.close()
    times.sort()
    return {"p50_us": round(times[len(times) // 2] * 1e6, 1), "p99_us": round(times[int(len(times) * 0.99)] * 1e6, 1)}


def _length(answer: bytes) -> int:
    head = answer.split(b"\r\n\r\n", 1)[0].lower()
    return int(head.split(b"content-length: ", 1)[1].split(b"\r\n", 1)[0])


def process_figures(pid: int) -> dict[str, int]:
    with open(f"/proc/{pid}/status") as status:
        fields = dict(line.split(":", 1) for line in status)
    return {"threads": int(fields["Threads"]), "rss_kib": int(fields["VmRSS"].split()[0]),
            "fds": len(os.listdir(f"/proc/{pid}/fd"))}


def open_waiting(port: int, slow: int, listen: int, idle: int) -> list[socket.socket]:
    held = []
    for _ in range(slow):
        sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        sock.sendall(SLOW_HEAD)
        held.append(sock)
    for _ in range(idle):
        held.append(socket.create_connection(("127.0.0.1", port), timeout=30))
    for number in range(listen):
        source = f"127.0.0.{20 + number % 20}"
        sock = socket.create_connection(("127.0.0.1", port), timeout=30, source_address=(source, 0))
        message = request("subscriptions/listen", f"l{number}", notifications={"resourcesListChanged": True})
        sock.sendall(raw(message))
        answer = b""
        while b"acknowledged" not in answer:
            chunk = sock.recv(65536)
            assert chunk and not answer.startswith(b"HTTP/1.1 5"), answer[:200]
            answer += chunk
        held.append(sock)
    return held


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--slow", type=int, default=500)
    parser.add_argument("--listen", type=int, default=500)
    parser.add_argument("--idle", type=int, default=200)
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--server-dir", default=os.path.join(ROOT, "server"))
    args = parser.parse_args()
    process, port = start(args.server_dir)
    try:
        round_trips(port, 100)  # warm-up
        alone = {**round_trips(port, args.requests), **process_figures(process.pid)}
        held = open_waiting(port, args.slow, args.listen, args.idle)
        time.sleep(0.5)
        beside = {**round_trips(port, args.requests), **process_figures(process.pid)}
        for sock in held:
            sock.close()
    finally:
        process.terminate()
        process.wait(15)
    print(json.dumps({"waiting": {"slow_bodies": args.slow, "listen_streams": args.listen, "idle": args.idle},
                      "alone": alone, "beside_them": beside}, indent=1))


if __name__ == "__main__":
    main()
