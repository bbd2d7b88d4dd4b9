"""Read pytest's JUnit XML into counts and failures, and write the merged junit.xml of a whole run."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass

from .model import CellResult, Outcome, Skip, SuiteResult, TestFailure

MESSAGE_LIMIT = 2000  # characters of a failure's message kept in results (the full text is in junit.xml)
DETAILS_LIMIT = 8000
# A stress repetition's id: the concurrency tests' MCPSERVER_STRESS mode parametrizes them as [stressN].
STRESS_ID = re.compile(r"\[(?:[^\]]*-)?stress\d+(?:-[^\]]*)?\]$")


@dataclass(frozen=True, kw_only=True)
class JunitCounts:
    tests: int
    failed: int
    errors: int
    skipped: int
    failures: tuple[TestFailure, ...]
    skips: tuple[Skip, ...] = ()
    repetitions: int = 0

    @property
    def passed(self) -> int:
        return self.tests - self.failed - self.errors - self.skipped


def _suites(root: ET.Element) -> list[ET.Element]:
    return [root] if root.tag == "testsuite" else list(root.iter("testsuite"))


def test_id(case: ET.Element) -> str:
    """pytest's node id as far as JUnit keeps it: tests/unit/test_x.py::TestY::test_z."""
    classname, name = case.get("classname", ""), case.get("name", "")
    if not classname:
        return name
    parts = classname.split(".")
    # classname is the dotted module path plus any classes; classes start with a capital by convention.
    split = next((i for i, p in enumerate(parts) if p[:1].isupper()), len(parts))
    module = "/".join(parts[:split]) + ".py"
    return "::".join([module, *parts[split:], name])


def parse(text: str) -> JunitCounts:
    """Counts from the testcases themselves (pytest's totals omit nothing, but other writers vary)."""
    root = ET.fromstring(text)
    tests = failed = errors = skipped = repetitions = 0
    failures: list[TestFailure] = []
    skips: list[Skip] = []
    for suite in _suites(root):
        for case in suite.iter("testcase"):
            tests += 1
            repetitions += bool(STRESS_ID.search(case.get("name", "")))
            failure = case.find("failure")
            error = case.find("error")
            if failure is not None or error is not None:
                node = failure if failure is not None else error
                assert node is not None
                if failure is not None:
                    failed += 1
                else:
                    errors += 1
                failures.append(
                    TestFailure(
                        test_id=test_id(case),
                        message=(node.get("message") or "").strip()[:MESSAGE_LIMIT],
                        details=(node.text or "").strip()[-DETAILS_LIMIT:],
                    )
                )
            elif (skip := case.find("skipped")) is not None:
                skipped += 1
                reason = (skip.get("message") or skip.text or "").strip()[:MESSAGE_LIMIT]
                skips.append(Skip(test_id=test_id(case), reason=reason))
    return JunitCounts(tests=tests, failed=failed, errors=errors, skipped=skipped, failures=tuple(failures),
                       skips=tuple(skips), repetitions=repetitions)  # fmt: skip


def _suite_named(results: Sequence[CellResult], name: str) -> tuple[CellResult | None, SuiteResult | None]:
    """The cell and the suite of a <testsuite name="CELL/SUITE"> (or name="CELL")."""
    cell, _, suite = name.rpartition("/") if "/" in name else (name, "", "")
    found = next((r for r in results if r.cell == cell), None)
    return found, next((s for s in found.suites if s.suite.value == suite), None) if found else None


def _properties(element: ET.Element, cell: CellResult | None, suite: SuiteResult | None) -> None:
    """What CI tools show beside a suite: the architecture and what its interpreter saw of it, and for a suite
    that did not pass, the line that reproduces it."""
    facts = {"arch": cell.arch, "machine": cell.machine, "byteorder": cell.byteorder,
             "maxsize": str(cell.maxsize or "")} if cell else {}  # fmt: skip
    facts["reproduce"] = suite.reproduce if suite else ""
    properties = ET.Element("properties")
    for key, value in facts.items():
        if value:
            ET.SubElement(properties, "property", name=key, value=value)
    if len(properties):
        element.insert(0, properties)


def merged(results: Sequence[CellResult]) -> bytes:
    """One <testsuites> with a <testsuite name="CELL/SUITE"> per suite that was meant to run.

    Suites that gave no JUnit (error, timeout, unavailable, cancelled) appear as one testcase carrying
    an <error> or <skipped>, so CI tools that read only junit.xml still see them.
    """
    out = ET.Element("testsuites", name="mcpserver lab matrix")
    for result in results:
        suites = result.suites or ()
        if not suites:
            # A cell that never reached its suites: one testcase that says why.
            skipped = result.outcome in (Outcome.UNAVAILABLE, Outcome.CANCELLED)
            element = ET.SubElement(out, "testsuite", name=result.cell, tests="1")
            element.set("skipped" if skipped else "errors", "1")
            case = ET.SubElement(element, "testcase", classname=result.cell, name="cell")
            if skipped:
                ET.SubElement(case, "skipped", message=f"{result.outcome.value}: {result.message}")
            else:
                ET.SubElement(case, "error", message=f"{result.outcome.value}: {result.message}").text = result.log_tail
            continue
        for suite in suites:
            if suite.outcome is Outcome.NOT_RUN:
                continue
            name = f"{result.cell}/{suite.suite.value}"
            if suite.junit_xml:
                try:
                    root = ET.fromstring(suite.junit_xml)
                except ET.ParseError:
                    root = None
                if root is not None:
                    for found in _suites(root):
                        found.set("name", name)
                        out.append(found)
                    continue
            element = ET.SubElement(out, "testsuite", name=name, tests="1")
            case = ET.SubElement(element, "testcase", classname=result.cell, name=suite.suite.value)
            if suite.outcome in (Outcome.UNAVAILABLE, Outcome.CANCELLED):
                element.set("skipped", "1")
                ET.SubElement(case, "skipped", message=f"{suite.outcome.value}: {suite.message}")
            else:
                element.set("errors", "1")
                ET.SubElement(case, "error", message=f"{suite.outcome.value}: {suite.message}").text = suite.log_tail
    for element in out:
        _properties(element, *_suite_named(results, element.get("name", "")))
    ET.indent(out)
    data: bytes = ET.tostring(out, encoding="utf-8", xml_declaration=True)
    return data
