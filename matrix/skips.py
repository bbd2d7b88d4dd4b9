"""A skip is not a pass: the tests no cell ran, and the tests only the host runs. Pure: records in, findings out.

A test every cell that collected it skipped ran nowhere, so a whole run that has one fails (outcomes.exit_code) and
names it; a run of some cells only names it, since the cells it leaves out may be where the test runs. Tests that only
make sense on the host (the README, docs/, mypy, a browser) are not collected in cells at all: tests/conftest.py
leaves out those marked `host_only` wherever the lab runs them, and each suite's JUnit XML names what it left out
(HOST_ONLY properties), so the report can name them once.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass

from .junit import STRESS_ID, test_id
from .model import CellResult, Environment, Outcome, Suite

HOST_ONLY = "mcplab-host-only"  # a JUnit property per test left out as host-only: "NODE ID: reason"
# The project's own tests. The official conformance suite's scenarios are its own: one it runs but that exercises
# nothing against the server is reported "not exercised" (a skip) by scripts/conformance.py, and is its authors' to
# change, not a test of ours that no cell ran.
OWN = frozenset(s for s in Suite if s is not Suite.CONFORMANCE)


@dataclass(frozen=True, kw_only=True)
class RanNowhere:
    """A test skipped in every cell that collected it: which cells, and what they said."""

    test_id: str
    cells: tuple[str, ...]
    reasons: tuple[str, ...]  # each distinct reason given

    @property
    def text(self) -> str:
        said = "; ".join(self.reasons) or "no reason given"
        return f"{self.test_id}: skipped in all {len(self.cells)} cells that collected it ({said})"


def judged(env: Environment) -> bool:
    """Whether a run's report is of the whole matrix, so a test no cell ran fails it: not limited to some cells or
    suites, not cut short, and not one shard (the shards' merged report is judged)."""
    return not env.subset and not env.partial and (not env.shard or env.shard.startswith("merged"))


def _cases(junit_xml: str) -> list[ET.Element]:
    try:
        root = ET.fromstring(junit_xml)
    except ET.ParseError:
        return []
    return list(root.iter("testcase"))


def _base_id(case: ET.Element) -> str:
    """A test's id without a stress repetition's [stressN-seedS]: every repetition is the same test. A module skipped
    whole (pytest.importorskip at its top) is one case named by its dotted path: its file's path then."""
    if not case.get("classname"):
        return case.get("name", "").replace(".", "/") + ".py"
    return STRESS_ID.sub("", test_id(case))


def ran_nowhere(results: Sequence[CellResult]) -> list[RanNowhere]:
    """Every test that some cell collected and no cell ran, in id order."""
    ran: set[str] = set()
    skipped: dict[str, dict[str, str]] = {}  # test id -> cell -> reason
    for result in results:
        if result.outcome is Outcome.UNAVAILABLE:
            continue
        for suite in (s for s in result.suites if s.suite in OWN):
            for case in _cases(suite.junit_xml) if suite.junit_xml else ():
                found = case.find("skipped")
                if found is None:
                    ran |= {_base_id(case), _base_id(case).partition("::")[0]}  # the test, and so its module
                else:
                    reason = (found.get("message") or found.text or "").strip()
                    skipped.setdefault(_base_id(case), {})[result.cell] = reason
    return [RanNowhere(test_id=name, cells=tuple(sorted(by_cell)), reasons=tuple(dict.fromkeys(by_cell.values())))
            for name, by_cell in sorted(skipped.items()) if name not in ran]  # fmt: skip


def host_only(results: Sequence[CellResult]) -> dict[str, str]:
    """The tests the cells left out as host-only, each once, with its reason (from the suites' JUnit properties)."""
    found: dict[str, str] = {}
    for result in results:
        for suite in result.suites:
            if not suite.junit_xml:
                continue
            try:
                root = ET.fromstring(suite.junit_xml)
            except ET.ParseError:
                continue
            for prop in root.iter("property"):
                if prop.get("name") == HOST_ONLY:
                    name, _, reason = (prop.get("value") or "").partition(": ")
                    found.setdefault(name, reason)
    return dict(sorted(found.items()))
