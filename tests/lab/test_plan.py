"""Selection, sharding, outcome and exit-code rules: pure data, no engine."""

from __future__ import annotations

import json

import pytest

from matrix.errors import UsageError
from matrix.model import Cell, CellResult, Environment, Family, Outcome, PythonFrom, Suite
from matrix.plan import (
    Selection,
    Shard,
    check_shards,
    github_matrix,
    merge_results,
    order_results,
    parse_jobs,
    parse_shard,
    parse_suites,
    pick_next,
    plan_digest,
    select,
    shard,
    split_values,
)
from matrix.table import load_cells

CELLS = load_cells()


def names(cells: tuple[Cell, ...]) -> list[str]:
    return [c.name for c in cells]


def test_no_selector_selects_everything_in_table_order() -> None:
    assert select(CELLS, Selection()) == tuple(c for c in CELLS if not c.opt_in)


def test_arch_selects_by_debians_name_and_the_machines_own_for_cells_that_name_none() -> None:
    assert {c.arch for c in select(CELLS, Selection(arches=("s390x",)))} == {"s390x"}
    own = select(CELLS, Selection(arches=("amd64",)), native="amd64")
    assert own and all(c.arch in ("", "amd64") for c in own)
    on_arm = select(CELLS, Selection(arches=("arm64",), distros=("ubuntu", "alpine")), native="arm64")
    assert names(on_arm) == ["ubuntu-22.04-py3.10", "ubuntu-24.04-py3.12", "ubuntu-26.04-py3.14",
                             "ubuntu-24.04-py3.12-arm64", "alpine-3.23-py3.12", "alpine-3.23-py3.12-arm64",
                             "alpine-official-py3.13", "alpine-official-py3.14"]
    with pytest.raises(UsageError, match=r"--arch mips matches no cell\. Known arch values: all, amd64"):
        select(CELLS, Selection(arches=("mips",)), native="amd64")


def test_opt_in_cells_run_only_when_their_arch_or_their_name_is_asked_for() -> None:
    opt_in = {c.name for c in CELLS if c.opt_in}
    assert opt_in == {"debian-trixie-py3.13-riscv64", "debian-bookworm-py3.11-ppc64el", "debian-trixie-py3.13-armhf"}
    every_run = set(names(select(CELLS, Selection())))  # i386, arm64 and s390x are in every run
    assert {"debian-bookworm-py3.11-i386", "debian-trixie-py3.13-arm64", "debian-bookworm-py3.11-s390x"} <= every_run
    assert not opt_in & set(names(select(CELLS, Selection(cells=("debian-*",)))))
    assert not opt_in & set(names(select(CELLS, Selection(arches=("*",)))))
    assert opt_in <= set(names(select(CELLS, Selection(arches=("all",)))))
    assert names(select(CELLS, Selection(arches=("riscv64",)))) == ["debian-trixie-py3.13-riscv64"]
    assert names(select(CELLS, Selection(cells=("debian-trixie-py3.13-armhf",)))) == ["debian-trixie-py3.13-armhf"]


def test_distro_selects_a_family() -> None:
    chosen = select(CELLS, Selection(distros=("alpine",)))
    assert chosen and all(c.family is Family.ALPINE for c in chosen)


def test_python_accepts_plain_and_prefixed_versions() -> None:
    assert names(select(CELLS, Selection(pythons=("3.15",)))) == names(select(CELLS, Selection(pythons=("py3.15",))))
    assert {c.python for c in select(CELLS, Selection(pythons=("3.1?",)))} >= {"3.10", "3.15"}


def test_cell_globs_and_selectors_intersect() -> None:
    chosen = select(CELLS, Selection(cells=("debian-*",), pythons=("3.11", "3.13")))
    assert names(chosen) == ["debian-bookworm-py3.11", "debian-trixie-py3.13", "debian-trixie-pypy3.11",
                             "debian-sid-pypy3.11", "debian-trixie-pypy3.11-cache480m",
                             "debian-trixie-pypy3.11-cache512k", "debian-sid-pypy3.11-cache480m",
                             "debian-sid-pypy3.11-cache512k", "debian-sid-py3.13t", "debian-bookworm-py3.11-i386",
                             "debian-trixie-py3.13-arm64", "debian-bookworm-py3.11-s390x"]


@pytest.mark.parametrize(("python", "expected"), [
    ("pypy*", ["debian-trixie-pypy3.11", "debian-sid-pypy3.11", "debian-trixie-pypy3.11-cache480m",
               "debian-trixie-pypy3.11-cache512k", "debian-sid-pypy3.11-cache480m", "debian-sid-pypy3.11-cache512k"]),
    ("3.14t", ["debian-sid-py3.14t"]),
    ("py3.13t", ["debian-sid-py3.13t"]),
    ("python3.9", ["debian-bullseye-py3.9", "host-py3.9"]),
])
def test_python_selects_by_version_or_by_interpreter(python: str, expected: list[str]) -> None:
    assert names(select(CELLS, Selection(pythons=(python,)))) == expected


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


def test_a_cell_that_runs_none_of_the_selected_suites_is_not_selected() -> None:
    chosen = select(CELLS, Selection(cells=("debian-trixie-pypy3.11*",), suites=(Suite.HTTP,)))
    assert names(chosen) == ["debian-trixie-pypy3.11"]  # its cache cells run only payload: they errored, empty
    assert "debian-trixie-pypy3.11-cache480m" in names(select(CELLS, Selection(cells=("debian-trixie-pypy3.11*",))))
    with pytest.raises(UsageError, match=r"none of the cells selected \(host-py3\.9, .* runs images"):
        select(CELLS, Selection(distros=("host",), suites=(Suite.IMAGES,)))


def test_suites_parse_in_report_order_and_refuse_unknown_ones() -> None:
    assert parse_suites(["payload,unit"]) == (Suite.UNIT, Suite.PAYLOAD)
    assert parse_suites([]) == (Suite.UNIT, Suite.HTTP, Suite.PAYLOAD, Suite.HOSTILE, Suite.INSTALL, Suite.IMAGES,
                                Suite.CONFORMANCE)
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


def test_github_matrix_is_one_job_per_cell() -> None:
    chosen = select(CELLS, Selection(distros=("debian",)))
    data = json.loads(github_matrix(chosen))
    assert [j["cell"] for j in data["include"]] == names(chosen)
    assert all(j["container"] for j in data["include"])


def cell(outcome: Outcome, name: str = "c") -> CellResult:
    return CellResult(cell=name, outcome=outcome)


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


def test_while_bases_are_made_host_cells_take_at_most_half_the_slots() -> None:
    hosts = [c for c in CELLS if c.family is Family.HOST]
    bookworm = CELLS[1]
    coming = [*hosts, bookworm]  # bookworm's base is still being made; the host cells are ready at once

    def ready(cell: Cell) -> bool:
        return cell.family is Family.HOST

    assert pick_next(coming, ready, anything_running=True, running=hosts[:2], slots=6) is hosts[0]
    assert pick_next(coming, ready, anything_running=True, running=hosts[:3], slots=6) is None  # 3 of 6: wait
    assert pick_next(coming, lambda c: True, anything_running=True, running=hosts[:3], slots=6) is bookworm
    assert pick_next(hosts, ready, anything_running=True, running=hosts[:3], slots=6) is hosts[0]  # none coming


def test_a_cell_that_compiles_its_python_starts_first_once_its_base_is_there() -> None:
    # The trixie base serves both; the musl cell's builder stage takes minutes, so it takes the first slot.
    trixie = next(c for c in CELLS if c.name == "debian-trixie-py3.13")
    musl = next(c for c in CELLS if c.python_from is PythonFrom.BUILDER)
    host = next(c for c in CELLS if c.family is Family.HOST)
    assert pick_next([host, trixie, musl], lambda c: True, anything_running=True) is musl
    assert pick_next([host, trixie, musl], lambda c: c is not musl, anything_running=True) is trixie
    pypy = next(c for c in CELLS if c.name == "debian-trixie-pypy3.11")
    assert pick_next([host, trixie, pypy], lambda c: True, anything_running=True) is pypy  # slower suites


def test_with_an_earlier_runs_durations_the_longest_cell_starts_first() -> None:
    bookworm, host = CELLS[1], next(c for c in CELLS if c.family is Family.HOST)
    musl = next(c for c in CELLS if c.python_from is PythonFrom.BUILDER)
    durations = {bookworm.name: 290.0, musl.name: 120.0, host.name: 100.0}
    assert pick_next([host, musl, bookworm], lambda c: True, anything_running=True, durations=durations) is bookworm
    # A cell the earlier run did not have may be long: it goes first.
    assert pick_next([host, musl], lambda c: True, anything_running=True, durations={host.name: 1.0}) is musl


def test_shards_balanced_by_earlier_durations_finish_close_together() -> None:
    # Round-robin in table order puts the long container cells together; the durations of an earlier run
    # (longest first, to the least loaded shard) even them out.
    durations = {c.name: (300.0 if c.compiles_python else 120.0 if c.family.in_container else 20.0) for c in CELLS}
    durations.pop("host-py3.15")  # a cell the earlier run did not have counts as the median

    def spread(shares: list[tuple[Cell, ...]]) -> float:
        loads = [sum(durations.get(c.name, 120.0) for c in share) for share in shares]
        return max(loads) - min(loads)

    for count in (2, 3, 4):
        balanced = [shard(CELLS, Shard(index=k, count=count), durations) for k in range(1, count + 1)]
        naive = [shard(CELLS, Shard(index=k, count=count)) for k in range(1, count + 1)]
        assert sorted(c.name for share in balanced for c in share) == sorted(names(CELLS))
        assert spread(balanced) <= spread(naive)
        assert spread(balanced) <= 300.0  # within the longest single cell
        assert balanced[0] == shard(CELLS, Shard(index=1, count=count), durations)  # deterministic


def env(shard_: str, commit: str = "abc", plan: str = "p1", dirty: tuple[str, ...] = ()) -> Environment:
    return Environment(shard=shard_, commit=commit, plan=plan, dirty=dirty)


def test_merge_checks_every_shard_of_one_plan_is_there_once() -> None:
    check_shards([("a", env("1/2")), ("b", env("2/2"))])  # fine
    cases = [
        ([("a", env("1/3")), ("b", env("2/3"))], "shard 3/3 missing"),
        ([("a", env("1/2")), ("b", env("1/2"))], "shard 2/2 missing; shard 1/2 given more than once"),
        ([("a", env("1/2")), ("b", env("2/2", commit="def"))], "they test different commits (abc, def)"),
        ([("a", env("1/2")), ("b", env("2/2", dirty=("x.py",)))], "different commits (abc, abc (dirty))"),
        ([("a", env("1/2")), ("b", env("2/2", plan="p2"))], "different plans"),
        ([("a", env("1/2")), ("b", env("2/3"))], "not shards of one --shard K/N run"),
        ([("a", env("")), ("b", env(""))], "a: not a shard"),
    ]
    for envs, message in cases:
        with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")) as caught:
            check_shards(envs)
        assert caught.value.exit_code == 2


def test_the_plan_digest_moves_with_the_table_the_selection_and_n() -> None:
    debian = select(CELLS, Selection(distros=("debian",)))
    base = plan_digest(debian, Selection(distros=("debian",)), 2)
    assert base == plan_digest(debian, Selection(distros=("debian",)), 2)
    assert base != plan_digest(debian, Selection(distros=("debian",)), 3)
    assert base != plan_digest(debian[1:], Selection(distros=("debian",)), 2)
    assert base != plan_digest(debian, Selection(distros=("debian",), suites=(Suite.UNIT,)), 2)


def test_rerun_plan_takes_what_did_not_pass_and_whole_cells_that_never_got_to_a_suite() -> None:
    from matrix.model import SUITES, SuiteResult
    from matrix.plan import rerun_plan

    def suites(**outcomes: Outcome) -> tuple[SuiteResult, ...]:
        return tuple(SuiteResult(suite=Suite(s), outcome=o) for s, o in outcomes.items())

    results = [
        CellResult(cell="a", outcome=Outcome.FLAKY, suites=suites(unit=Outcome.PASSED, http=Outcome.FLAKY)),
        CellResult(cell="b", outcome=Outcome.PASSED, suites=suites(unit=Outcome.PASSED)),
        CellResult(cell="c", outcome=Outcome.ERROR, message="build failed"),
        CellResult(cell="d", outcome=Outcome.UNAVAILABLE, message="no base"),
        CellResult(cell="e", outcome=Outcome.CANCELLED, suites=suites(unit=Outcome.PASSED, http=Outcome.CANCELLED)),
        CellResult(cell="f", outcome=Outcome.TIMEOUT, suites=suites(unit=Outcome.TIMEOUT, http=Outcome.NOT_RUN)),
    ]
    plan = dict(rerun_plan(results))
    assert plan == {"a": (Suite.HTTP,), "c": SUITES, "e": (Suite.HTTP,), "f": (Suite.UNIT,)}
    chosen = Selection(only=tuple(plan.items()), suites=(Suite.UNIT, Suite.HTTP))
    assert chosen.suites_for("a") == (Suite.HTTP,) and chosen.suites_for("b") == ()
    assert chosen.suites_for("c") == (Suite.UNIT, Suite.HTTP)
