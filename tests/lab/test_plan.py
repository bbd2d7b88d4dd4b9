"""Selection, sharding, outcome and exit-code rules: pure data, no engine."""

from __future__ import annotations

import json

import pytest

from matrix.cells import load_cells
from matrix.errors import UsageError
from matrix.model import Cell, CellResult, Family, Outcome, PythonFrom, SuiteResult
from matrix.plan import (
    Selection,
    Shard,
    cell_outcome,
    exit_code,
    github_matrix,
    merge_results,
    order_results,
    parse_jobs,
    parse_shard,
    parse_suites,
    pick_next,
    pytest_outcome,
    select,
    shard,
    should_stop,
    split_values,
)

CELLS = load_cells()


def names(cells: tuple[Cell, ...]) -> list[str]:
    return [c.name for c in cells]


def test_no_selector_selects_everything_in_table_order() -> None:
    assert select(CELLS, Selection()) == CELLS


def test_distro_selects_a_family() -> None:
    chosen = select(CELLS, Selection(distros=("alpine",)))
    assert chosen and all(c.family is Family.ALPINE for c in chosen)


def test_python_accepts_plain_and_prefixed_versions() -> None:
    assert names(select(CELLS, Selection(pythons=("3.15",)))) == names(select(CELLS, Selection(pythons=("py3.15",))))
    assert {c.python for c in select(CELLS, Selection(pythons=("3.1?",)))} >= {"3.10", "3.15"}


def test_cell_globs_and_selectors_intersect() -> None:
    chosen = select(CELLS, Selection(cells=("debian-*",), pythons=("3.11", "3.13")))
    assert names(chosen) == ["debian-bookworm-py3.11", "debian-trixie-py3.13"]


@pytest.mark.parametrize(
    ("selection", "lists"),
    [
        (Selection(distros=("gentoo",)), "Known distro values: alpine, debian, host, musl-busybox, ubuntu."),
        (Selection(pythons=("2.7",)), "Known python values: 3.9, 3.10,"),
        (Selection(cells=("nope-*",)), "Known cell values: debian-bullseye-py3.9,"),
    ],
)
def test_a_selector_that_matches_nothing_lists_what_exists(selection: Selection, lists: str) -> None:
    with pytest.raises(UsageError) as caught:
        select(CELLS, selection)
    assert lists in caught.value.message
    assert caught.value.exit_code == 2


def test_selectors_that_match_apart_but_not_together_are_an_error() -> None:
    with pytest.raises(UsageError, match="no cell matches all"):
        select(CELLS, Selection(distros=("alpine",), pythons=("3.9",)))


def test_suites_parse_in_report_order_and_refuse_unknown_ones() -> None:
    assert parse_suites(["payload,unit"]) == ("unit", "payload")
    assert parse_suites([]) == ("unit", "http", "payload", "images")
    with pytest.raises(UsageError, match="unknown suite lint"):
        parse_suites(["unit,lint"])


def test_split_values_takes_repeats_and_commas() -> None:
    assert split_values(["a,b", " c ", ""]) == ("a", "b", "c")


@pytest.mark.parametrize("raw", ["0/2", "3/2", "1", "a/b", "1/0"])
def test_bad_shards_are_usage_errors(raw: str) -> None:
    with pytest.raises(UsageError):
        parse_shard(raw)


def test_jobs() -> None:
    assert parse_jobs("auto", 2) == 2
    assert parse_jobs("3", 2) == 3
    with pytest.raises(UsageError):
        parse_jobs("0", 2)


@pytest.mark.parametrize("count", [1, 2, 3, 4, 7, 30])
def test_shards_partition_the_selection(count: int) -> None:
    shares = [shard(CELLS, Shard(index=k, count=count)) for k in range(1, count + 1)]
    flat = [c for share in shares for c in share]
    assert sorted(names(tuple(flat))) == sorted(names(CELLS))  # every cell once, none twice
    assert max(map(len, shares)) - min(map(len, shares)) <= 1  # balanced
    assert shard(CELLS, Shard(index=1, count=count)) == shares[0]  # deterministic


def test_shards_mix_families() -> None:
    first, second = (shard(CELLS, Shard(index=k, count=2)) for k in (1, 2))
    assert {c.family for c in first} & {c.family for c in second} >= {Family.DEBIAN, Family.HOST}


def suite(outcome: Outcome, name: str = "unit") -> SuiteResult:
    return SuiteResult(suite=name, outcome=outcome)


@pytest.mark.parametrize(
    ("outcomes", "expected"),
    [
        ([Outcome.PASSED, Outcome.PASSED], Outcome.PASSED),
        ([Outcome.PASSED, Outcome.NOT_RUN], Outcome.PASSED),
        ([Outcome.PASSED, Outcome.FAILED], Outcome.FAILED),
        ([Outcome.FAILED, Outcome.TIMEOUT], Outcome.TIMEOUT),
        ([Outcome.TIMEOUT, Outcome.ERROR], Outcome.ERROR),
        ([Outcome.PASSED, Outcome.CANCELLED], Outcome.CANCELLED),
        ([Outcome.NOT_RUN], Outcome.ERROR),
        ([], Outcome.ERROR),
    ],
)
def test_cell_outcome_shows_the_most_urgent(outcomes: list[Outcome], expected: Outcome) -> None:
    assert cell_outcome([suite(o) for o in outcomes]) is expected


@pytest.mark.parametrize(
    ("code", "failed", "errors", "tests", "expected"),
    [
        (0, 0, 0, 31, Outcome.PASSED),
        (1, 2, 0, 31, Outcome.FAILED),
        (1, 0, 1, 31, Outcome.FAILED),  # an error in a fixture is still a verdict on a test
        (5, 0, 0, 0, Outcome.ERROR),  # no tests collected is no verdict
        (0, 0, 0, 0, Outcome.ERROR),
        (2, 0, 0, 3, Outcome.ERROR),  # interrupted
        (4, 0, 0, 0, Outcome.ERROR),  # usage error, e.g. the suite directory is missing
        (1, 0, 0, 5, Outcome.ERROR),  # exit 1 without a failing test: something else broke
    ],
)
def test_pytest_outcome(code: int, failed: int, errors: int, tests: int, expected: Outcome) -> None:
    assert pytest_outcome(code, failed, errors, tests) is expected


def cell(outcome: Outcome, name: str = "c") -> CellResult:
    return CellResult(cell=name, outcome=outcome)


@pytest.mark.parametrize(
    ("outcomes", "strict", "expected"),
    [
        ([Outcome.PASSED, Outcome.UNAVAILABLE], False, 0),
        ([Outcome.PASSED, Outcome.UNAVAILABLE], True, 1),
        ([Outcome.PASSED, Outcome.FAILED], False, 1),
        ([Outcome.PASSED, Outcome.ERROR], False, 1),
        ([Outcome.PASSED, Outcome.TIMEOUT], False, 1),
        ([Outcome.PASSED, Outcome.CANCELLED], False, 1),
        ([Outcome.UNAVAILABLE, Outcome.UNAVAILABLE], False, 3),
        ([Outcome.UNAVAILABLE], True, 3),
        ([], False, 3),
    ],
)
def test_exit_codes(outcomes: list[Outcome], strict: bool, expected: int) -> None:
    assert exit_code([cell(o, f"c{i}") for i, o in enumerate(outcomes)], strict=strict) == expected


def test_fail_fast_stops_on_bad_outcomes_only() -> None:
    assert should_stop(cell(Outcome.FAILED), fail_fast=True)
    assert should_stop(cell(Outcome.TIMEOUT), fail_fast=True)
    assert not should_stop(cell(Outcome.UNAVAILABLE), fail_fast=True)
    assert not should_stop(cell(Outcome.FAILED), fail_fast=False)


def test_github_matrix_is_one_job_per_cell() -> None:
    chosen = select(CELLS, Selection(distros=("debian",)))
    data = json.loads(github_matrix(chosen))
    assert [j["cell"] for j in data["include"]] == names(chosen)
    assert all(j["container"] for j in data["include"])


def test_merge_refuses_overlapping_shards_and_orders_by_table() -> None:
    a, b = cell(Outcome.PASSED, "host-py3.9"), cell(Outcome.FAILED, "debian-bullseye-py3.9")
    merged = order_results(merge_results([[a], [b]]), CELLS)
    assert [r.cell for r in merged] == ["debian-bullseye-py3.9", "host-py3.9"]
    with pytest.raises(UsageError, match="more than one"):
        merge_results([[a], [a]])


def test_host_cells_have_no_image_suite() -> None:
    host = Cell(name="h", family=Family.HOST, release="host", python="3.11", python_from=PythonFrom.HOST)
    assert "images" not in host.suites


def test_scheduler_prefers_ready_container_cells_and_never_idles() -> None:
    bookworm, host = CELLS[1], next(c for c in CELLS if c.family is Family.HOST)
    assert bookworm.family is Family.DEBIAN
    # Both ready: the longer container cell first.
    assert pick_next([host, bookworm], lambda c: True, anything_running=True) is bookworm
    # The base is still being made: the host cell runs meanwhile.
    assert pick_next([bookworm, host], lambda c: c is host, anything_running=True) is host
    # Nothing ready while others run: wait for a slot's work instead of blocking a slot on a base.
    assert pick_next([bookworm], lambda c: False, anything_running=True) is None
    # Nothing ready and nothing running: start it anyway (it waits for its base in its slot).
    assert pick_next([bookworm], lambda c: False, anything_running=False) is bookworm
    assert pick_next([], lambda c: True, anything_running=False) is None


def test_a_cell_that_compiles_its_python_starts_first_once_its_base_is_there() -> None:
    # The trixie base serves both; the musl cell's builder stage takes minutes, so it takes the first slot.
    trixie = next(c for c in CELLS if c.name == "debian-trixie-py3.13")
    musl = next(c for c in CELLS if c.python_from is PythonFrom.BUILDER)
    host = next(c for c in CELLS if c.family is Family.HOST)
    assert pick_next([host, trixie, musl], lambda c: True, anything_running=True) is musl
    assert pick_next([host, trixie, musl], lambda c: c is not musl, anything_running=True) is trixie
