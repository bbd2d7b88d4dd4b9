"""scripts/conformance.py says what the suite really ran: real scenarios of the pinned suite against real servers,
read back through the script's JUnit as the lab reads it (matrix/junit.py). A scenario whose checks all skipped
is "not exercised", never a pass; an unscored one that passed is a pass, not a skip; a failed check fails."""

import importlib.util
import os
import sys

import pytest
from mcptest import DEMO, EXAMPLES, ROOT, HttpServer

EVERYTHING = os.path.join(EXAMPLES, "everything.py")


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


script = load("scripts/conformance.py", "conformance_script")


@pytest.fixture(scope="module")
def suite():
    return script.install()


def lab_reads(scenarios, tmp_path):
    """The script's JUnit, as the lab parses it."""
    if sys.version_info < (3, 10):
        pytest.skip("the lab's matrix/junit.py needs Python 3.10 or newer")
    path = tmp_path / "junit.xml"
    script.write_junit(str(path), "http://test", scenarios)
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    from matrix import junit

    return junit.parse(path.read_text())


def by_name(scenarios):
    return {s.name: s for s in scenarios}


def test_a_scenario_whose_checks_all_skip_is_not_exercised_and_never_a_pass(suite, tmp_path):
    node, entry = suite
    with HttpServer(EVERYTHING) as server:
        ran = by_name(script.run_set(node, entry, server.url, "tasks", [
            ["--spec-version", "2026-07-28", "--scenario", name, "--force"]
            for name in ("tasks-status-notifications", "tasks-required-task-error")]))
    stub, real = ran["tasks-status-notifications"], ran["tasks-required-task-error"]
    assert (stub.passed, stub.failed, stub.skipped, stub.verdict) == (0, 0, 1, "not exercised")
    assert not stub.fails_the_run  # the suite's stub (pending its subscriptions/listen rewrite), not our server
    assert real.verdict == "passed" and real.passed >= 3 and not real.scored  # an extension's: unscored, passed
    counts = lab_reads([stub, real], tmp_path)
    assert (counts.tests, counts.passed, counts.skipped, counts.failed) == (2, 1, 1, 0)
    assert counts.skips[0].test_id == "conformance.py::tasks-status-notifications"
    assert counts.skips[0].reason.startswith("not exercised: no check of its own passed, failed or warned")


def test_the_skills_scenarios_against_a_server_without_skills_exercise_nothing_and_fail_the_run(suite, tmp_path):
    node, entry = suite
    with HttpServer(DEMO) as server:
        ran = script.run_set(node, entry, server.url, "skills", dict(script.SETS)["skills"])
    assert [s.name for s in ran] == script.SKILLS
    for scenario in ran:
        assert scenario.verdict == "not exercised" and scenario.skipped > 0 and scenario.passed == 1  # the wire check
        assert scenario.fails_the_run  # the fixture must serve skills: a skip here is a fixture that lost them
    counts = lab_reads(ran, tmp_path)
    assert counts.failed == 3 and "0 failed, " in counts.failures[0].message


def test_the_skills_scenarios_pass_every_check_against_the_fixture(suite):
    node, entry = suite
    with HttpServer(EVERYTHING) as server:
        ran = script.run_set(node, entry, server.url, "skills", dict(script.SETS)["skills"])
    assert [(s.name, s.verdict, s.failed, s.skipped, s.warnings) for s in ran] == [
        (name, "passed", 0, 0, 0) for name in script.SKILLS]
