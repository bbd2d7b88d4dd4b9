"""Reading pytest's JUnit XML."""

from __future__ import annotations

from matrix.junit import parse

from .test_report import JUNIT_ONE_FAILURE


def test_counts_and_failing_ids() -> None:
    counts = parse(JUNIT_ONE_FAILURE)
    assert (counts.tests, counts.passed, counts.failed, counts.errors, counts.skipped) == (3, 1, 1, 0, 1)
    (failure,) = counts.failures
    assert failure.test_id == "tests/unit/test_proto.py::TestTools::test_add[2-3]"
    assert failure.message == "assert 6 == 5"
    assert failure.details == "long traceback"


def test_errors_count_apart_from_failures() -> None:
    text = (
        '<testsuite><testcase classname="tests.http.test_x" name="test_y">'
        '<error message="fixture broke"/></testcase></testsuite>'
    )
    counts = parse(text)
    assert (counts.failed, counts.errors) == (0, 1)
    assert counts.failures[0].test_id == "tests/http/test_x.py::test_y"
