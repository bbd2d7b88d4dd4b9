"""What PyPy's nursery size costs mcpserver: throughput and memory at each PYPY_GC_NURSERY, side by side.

PyPy sizes its young generation from the cache size /proc/cpuinfo reports (half of it, above 2 MiB; 1 MiB
when it is smaller or unknown), so the same server gets a 1 MiB nursery on one machine and 240 MiB on
another whose CPU reports 480 MiB. This runs, under one PyPy, every size in --sizes in rounds whose order
rotates, and for each:

  stdio   pipelined echo requests per second (the bench's stdio row)
  http    keep-alive sequential echo requests per second (the bench's HTTP row)
  memory  the HTTP server's peak RSS (VmHWM) after three 5 MB exchanges each way, and its growth over them
          (the payload suite's budget test)

The size is given explicitly (PYPY_GC_NURSERY=...), which `python -m mcpserver` never overrides, so each
row is that size whatever this machine's CPU reports. Ratios are to --reference, in the same round.

    python bench/pypy_nursery.py --python pypy3 [--rounds 5] [--sizes 1MB,4MB,16MB,240MB] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from typing import Any

import clients
import measure
import systems

sys.path.insert(0, os.path.join(systems.ROOT, "tests", "payload"))
from payloads import SHAPES, SIZES, payload  # the payload suite's own three 5 MB texts


def _exchanges(running: systems.Running) -> tuple[int, int]:
    """(peak RSS before, after) the payload suite's three 5 MB echoes each way on one keep-alive connection,
    in KiB."""
    client = clients.HttpClient("127.0.0.1", running.port)
    try:
        client.send(client.request_bytes(clients.encode(clients.call(1, "echo", text="warm")), name="echo"))
        before = systems.peak_rss_kib(running.process.pid)
        for request_id, shape in enumerate(SHAPES, 2):
            body = clients.encode(clients.call(request_id, "echo", text=payload(shape, SIZES["5MB"])))
            response = client.send(client.request_bytes(body, name="echo"))
            if response.status != 200:
                raise clients.WrongAnswer(f"HTTP {response.status}")
        return before, systems.peak_rss_kib(running.process.pid)
    finally:
        client.close()


def one(python: str, size: str, log_dir: str, pipelined: int, sequential: int) -> dict[str, float]:
    os.environ["PYPY_GC_NURSERY"] = size  # systems.environment() passes it on to the servers
    stdio = systems.start(systems.System("ours", "mcpserver", "stdio", (python, "-m", "mcpserver", systems.DEMO)),
                          log_dir)
    try:
        session = measure.StdioSession(stdio)
        measure.warm_up(session, 200)
        stdio_rps = measure.stdio_pipelined(session, pipelined)["rps"]
    finally:
        systems.stop(stdio)
    http = systems.start(systems.System("ours", "mcpserver", "http", (
        python, "-m", "mcpserver", "--http", "--port", "0", "--log-level", "warning", systems.DEMO)), log_dir)
    try:
        http_rps = measure.http_sequential(http, sequential)["rps"]
        before, after = _exchanges(http)
    finally:
        systems.stop(http)
    return {"stdio_rps": stdio_rps, "http_rps": http_rps, "peak_mib": after / 1024,
            "grown_mib": (after - before) / 1024}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", default="pypy3", help="the PyPy to run the servers with")
    parser.add_argument("--sizes", default="1MB,4MB,16MB,64MB,240MB")
    parser.add_argument("--reference", default="4MB")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--pipelined", type=int, default=20000)
    parser.add_argument("--sequential", type=int, default=3000)
    parser.add_argument("--json", help="write the raw rounds here")
    args = parser.parse_args()
    sizes = args.sizes.split(",")
    if args.reference not in sizes:
        parser.error(f"--reference {args.reference} is not one of --sizes")
    log_dir = tempfile.mkdtemp(prefix="pypy-nursery-")
    rounds: list[dict[str, dict[str, float]]] = []
    for number in range(args.rounds):
        order = sizes[number % len(sizes):] + sizes[:number % len(sizes)]
        rounds.append({size: one(args.python, size, log_dir, args.pipelined, args.sequential) for size in order})
        print(f"round {number + 1}: " + ", ".join(f"{size} {r['stdio_rps']:.0f}/{r['http_rps']:.0f} req/s "
                                                 f"{r['grown_mib']:.0f} MiB" for size, r in rounds[-1].items()),
              file=sys.stderr)
    print(f"| PYPY_GC_NURSERY | stdio pipelined ÷ {args.reference} | HTTP keep-alive ÷ {args.reference} "
          "| HTTP peak RSS (MiB) | grown over 3 x 5 MB (MiB) |")
    print("|---|---:|---:|---:|---:|")
    def ratio(size: str, key: str) -> float:
        return statistics.median(r[size][key] / r[args.reference][key] for r in rounds)

    def median(size: str, key: str) -> float:
        return statistics.median(r[size][key] for r in rounds)

    for size in sizes:
        print(f"| {size} | {ratio(size, 'stdio_rps'):.3f} | {ratio(size, 'http_rps'):.3f} "
              f"| {median(size, 'peak_mib'):.0f} | {median(size, 'grown_mib'):.0f} |")
    if args.json:
        record: dict[str, Any] = {"python": args.python, "rounds": rounds, "load": os.getloadavg()}
        with open(args.json, "w") as out:
            json.dump(record, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
