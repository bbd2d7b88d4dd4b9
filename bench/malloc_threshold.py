"""What the pinned mmap threshold costs a message: two live HTTP servers side by side, one pinning glibc's
threshold as mcpserver does (_malloc.LARGE_BYTES), one told the old 256 KiB through MALLOC_MMAP_THRESHOLD_
(which the server then leaves alone). Each echoes messages of a few sizes on a keep-alive connection, in
interleaved rounds; the table gives the median time of a round trip and the ratio, taken within each round.

    python3 bench/malloc_threshold.py
    python3 bench/malloc_threshold.py --rounds 9 --requests 200 --sizes 32,100,200,500
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "server"))
from mcpserver._malloc import LARGE_BYTES  # noqa: E402
from task_roundtrip import Http  # noqa: E402  (bench/ is on sys.path: this script's folder)

OLD_THRESHOLD = 256 * 1024
SERVER = '''
from mcpserver import Server
server = Server("bench-threshold")

@server.tool()
def echo(text: str) -> str:
    return text
'''


def echo(server: Http, body: bytes, size: int) -> None:
    answer = server.post(body, "tools/call", "echo")
    assert len(answer["result"]["content"][0]["text"]) == size, answer


def message(size: int) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}},
        "name": "echo", "arguments": {"text": "x" * size}}}).encode()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--requests", type=int, default=100, help="per size, server and round")
    parser.add_argument("--sizes", default="32,100,200,500", help="KiB, comma-separated")
    args = parser.parse_args()
    sizes = [int(kib) * 1024 for kib in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as folder:
        target = os.path.join(folder, "bench_threshold.py")
        with open(target, "w") as file:
            file.write(SERVER)
        servers = {"pinned": Http(target, []), "256 KiB": Http(target, [], MALLOC_MMAP_THRESHOLD_=str(OLD_THRESHOLD))}
        try:
            for server in servers.values():  # a message over LARGE_BYTES: the threshold is pinned from here on
                echo(server, message(2 * LARGE_BYTES), 2 * LARGE_BYTES)
            times: dict[tuple[int, str], list[float]] = {}
            ratios: dict[int, list[float]] = {size: [] for size in sizes}
            for r in range(args.rounds):
                for size in sizes:
                    body = message(size)
                    order = list(servers) if r % 2 == 0 else list(reversed(servers))
                    medians = {}
                    for name in order:
                        server = servers[name]
                        echo(server, body, size)  # its threshold pinned (a large message), buffers warm
                        took = []
                        for _ in range(args.requests):
                            started = time.perf_counter()
                            echo(server, body, size)
                            took.append(time.perf_counter() - started)
                        medians[name] = statistics.median(took)
                        times.setdefault((size, name), []).append(medians[name])
                    ratios[size].append(medians["pinned"] / medians["256 KiB"])
        finally:
            for server in servers.values():
                server.close()
    print(f"pinned at {LARGE_BYTES // 1024} KiB against {OLD_THRESHOLD // 1024} KiB, {args.rounds} rounds of "
          f"{args.requests} echoes, load {os.getloadavg()[0]:.1f}\n")
    print("| message | pinned, p50 | 256 KiB, p50 | ratio, median (min-max) |\n|---:|---:|---:|---:|")
    for size in sizes:
        mine, old = (statistics.median(times[(size, name)]) * 1000 for name in servers)
        spread = ratios[size]
        print(f"| {size // 1024} KiB | {mine:.2f} ms | {old:.2f} ms | {statistics.median(spread):.2f}x "
              f"({min(spread):.2f}-{max(spread):.2f}) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
