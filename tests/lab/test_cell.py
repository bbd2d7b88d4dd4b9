"""Whole cell runs against the fake engine (fake_engine.py): the pipeline's own logic in milliseconds.
What the fake stands for is tested against the real engine in test_engine.py."""

from __future__ import annotations

import io
import json
import shlex
import shutil
import threading
from pathlib import Path

import pytest

from matrix import cli, report
from matrix.bases import bootstrap_tag
from matrix.build import plan_build
from matrix.lab import Lab, Options
from matrix.model import Cell, CellResult, Environment, Outcome, Suite
from matrix.outcomes import exit_code
from matrix.plan import Selection, select
from matrix.progress import Progress
from matrix.schedule import run_matrix
from matrix.table import parse_cells
from matrix.wheels import FORMAT, MANIFEST

from .conftest import FIXTURES, LAB_ROOT
from .fake_engine import FakeEngine, suite_of

TABLE = {
    "schema": 1,
    "cell": [
        {"name": "fx-bookworm", "family": "debian", "release": "bookworm", "python": "3.11",
         "base": "debian:bookworm", "python_from": "distro"},
        {"name": "fx-official", "family": "debian", "release": "bookworm-slim", "python": "3.12",
         "base": "python:3.12-slim-bookworm", "python_from": "official"},
    ],
}  # fmt: skip
CELLS = parse_cells(TABLE)
BOOKWORM, OFFICIAL = CELLS
(NO_SUCH_HOST,) = parse_cells({"schema": 1, "cell": [{"name": "fx-host-py3.99", "family": "host", "release": "host",
                                                       "python": "3.99", "python_from": "host"}]})  # fmt: skip
IN_CONTAINER = (Suite.UNIT, Suite.HTTP, Suite.PAYLOAD)


def a_lab(tmp_path: Path, engine: FakeEngine, **options: object) -> Lab:
    root = tmp_path / "tree"
    if not root.exists():
        shutil.copytree(FIXTURES / "tree", root)
        shutil.copytree(LAB_ROOT / "images", root / "images")
        for suite in ("http", "payload", "hostile", "install"):
            shutil.copytree(root / "tests/unit", root / "tests" / suite)
    for name in ("py3.11", "py3.12", "pypy3.11", "py3.14"):  # as PytestFolders leaves them: nothing is downloaded
        folder = tmp_path / "cache/pytest" / name
        folder.mkdir(parents=True, exist_ok=True)
        manifest = {"format": FORMAT, "wheels": ["pytest-8-py3-none-any.whl", "pip-25-py3-none-any.whl"],
                    "pip": "pip-25-py3-none-any.whl"}  # fmt: skip
        (folder / MANIFEST).write_text(json.dumps(manifest))
    settings: dict[str, object] = {"root": root, "cache": tmp_path / "cache", "results": tmp_path / "results",
                                   "jobs": 2, "selection": Selection(suites=IN_CONTAINER), **options}  # fmt: skip
    chosen = Options(**settings)  # type: ignore[arg-type]
    return Lab(chosen, Progress([c.name for c in CELLS], stream=io.StringIO(), live=False), engine)


def run(lab: Lab, cells: tuple[Cell, ...] = (BOOKWORM,)) -> dict[str, CellResult]:
    return {r.cell: r for r in run_matrix(lab, cells)}


def outcomes(result: CellResult) -> dict[str, str]:
    """The outcome of every suite that was selected."""
    return {s.suite.value: s.outcome.value for s in result.suites if s.outcome is not Outcome.NOT_RUN}


def test_a_passing_cell_records_its_python_and_leaves_nothing(tmp_path: Path) -> None:
    engine = FakeEngine(present=["debian:bookworm"])
    lab = a_lab(tmp_path, engine)
    result = run(lab)["fx-bookworm"]
    assert result.outcome is Outcome.PASSED, result
    assert outcomes(result) == {"unit": "passed", "http": "passed", "payload": "passed"}
    assert result.python_version == "3.11.2"
    assert all(s.produced_by == lab.run_id for s in result.suites if s.outcome is Outcome.PASSED)
    assert engine.live == {}, "containers left behind"
    again = run(a_lab(tmp_path, FakeEngine(present=["debian:bookworm", *engine.built])))["fx-bookworm"]
    unit = again.suite(Suite.UNIT)
    assert unit is not None and unit.cached and unit.produced_by == lab.run_id  # provenance of the reuse


def test_a_build_failure_is_an_error_with_the_log_tail(tmp_path: Path) -> None:
    engine = FakeEngine(present=["debian:bookworm"], broken_stages=["runtime"])
    result = run(a_lab(tmp_path, engine))["fx-bookworm"]
    assert result.outcome is Outcome.ERROR
    assert result.message.startswith("docker build of the runtime stage failed (exit 1)")
    assert "deliberately broken build" in result.log_tail
    assert engine.live == {}


def test_a_suite_timeout_is_a_timeout_and_the_others_still_run(tmp_path: Path) -> None:
    engine = FakeEngine(present=["debian:bookworm"], suites={"http": "hang"})
    result = run(a_lab(tmp_path, engine, timeout=0.2))["fx-bookworm"]
    assert result.outcome is Outcome.TIMEOUT
    assert outcomes(result) == {"unit": "passed", "http": "timeout", "payload": "passed"}
    http = result.suite(Suite.HTTP)
    assert http is not None and http.message == "did not finish within 0s; the harness stopped it"


def test_a_suite_killed_by_a_signal_is_an_error_not_a_timeout(tmp_path: Path) -> None:
    engine = FakeEngine(present=["debian:bookworm"], suites={"unit": "killed", "payload": "oom"})
    result = run(a_lab(tmp_path, engine))["fx-bookworm"]
    unit, payload = result.suite(Suite.UNIT), result.suite(Suite.PAYLOAD)
    assert unit is not None and unit.outcome is Outcome.ERROR
    assert unit.message.startswith("killed by signal 9 (SIGKILL)")
    assert payload is not None and payload.message.startswith("killed: out of memory (limit 4g)")


def test_an_unavailable_base_is_unavailable_with_the_reason(tmp_path: Path) -> None:
    results = run(a_lab(tmp_path, FakeEngine()), (OFFICIAL,))
    official = results["fx-official"]
    assert official.outcome is Outcome.UNAVAILABLE
    assert official.message.startswith("python:3.12-slim-bookworm: not present, no registry reachable")
    assert "official images cannot be bootstrapped here" in official.message
    assert exit_code(list(results.values())) == 3


def test_an_interrupt_keeps_what_finished_and_cancels_the_rest(tmp_path: Path) -> None:
    engine = FakeEngine(present=["debian:bookworm"], suites={"http": "hang"})
    lab = a_lab(tmp_path, engine, jobs=1)
    threading.Thread(target=lambda: engine.started.wait(10) and lab.interrupt("the run was interrupted by SIGINT"),
                     daemon=True).start()  # fmt: skip
    results = run(lab, (BOOKWORM, OFFICIAL, NO_SUCH_HOST))
    bookworm = results["fx-bookworm"]
    assert outcomes(bookworm) == {"unit": "passed", "http": "cancelled", "payload": "cancelled"}
    assert bookworm.outcome is Outcome.CANCELLED
    for name in ("fx-official", "fx-host-py3.99"):  # known before the interrupt: they stay so, with why
        assert results[name].outcome is Outcome.UNAVAILABLE, results[name]
    assert results["fx-host-py3.99"].message == "no python3.99 on PATH or in pyenv"
    assert lab.interrupted.is_set() and engine.live == {}
    assert exit_code(list(results.values()), interrupted=True) == 130


def test_kept_containers_are_typed_records_and_survive_cleanup(tmp_path: Path) -> None:
    engine = FakeEngine(present=["debian:bookworm"], suites={"unit": "fail"})
    lab = a_lab(tmp_path, engine, keep=True)
    result = run(lab)["fx-bookworm"]
    assert result.outcome is Outcome.FAILED
    kept, rerun = lab.kept  # the suite ran twice (--retries 1): each failed run's container is kept apart
    assert (kept.cell, kept.suite, kept.outcome) == ("fx-bookworm", Suite.UNIT, Outcome.FAILED)
    assert rerun.cell == "fx-bookworm-run2" and rerun.container != kept.container
    assert list(engine.live) == [kept.container, rerun.container]
    assert f"docker start -ai {kept.container}" in kept.advice()


def test_a_suite_that_fails_then_passes_is_flaky_and_not_remembered_as_a_pass(tmp_path: Path) -> None:
    engine = FakeEngine(present=["debian:bookworm"], suites={"http": "flaky"})
    result = run(a_lab(tmp_path, engine))["fx-bookworm"]
    assert result.outcome is Outcome.FLAKY and outcomes(result)["http"] == "flaky"
    http = result.suite(Suite.HTTP)
    assert http is not None and [e.outcome for e in http.earlier] == [Outcome.FAILED]
    assert http.earlier[0].failures[0].test_id.endswith("test_b")
    names = [s.name for s in engine.runs if suite_of(s) == "http"]
    assert len(names) == 2 and names[1].endswith("-fx-bookworm-run2-http")
    assert exit_code([result]) == 0 and exit_code([result], strict=True) == 1
    again = FakeEngine(present=["debian:bookworm", *engine.built], suites={"http": "flaky"})
    rerun = run(a_lab(tmp_path, again))["fx-bookworm"].suite(Suite.HTTP)
    assert rerun is not None and not rerun.cached and rerun.outcome is Outcome.FLAKY  # a flaky pass is no pass


def test_without_retries_a_failure_is_run_once(tmp_path: Path) -> None:
    engine = FakeEngine(present=["debian:bookworm"], suites={"http": "flaky"})
    result = run(a_lab(tmp_path, engine, retries=0))["fx-bookworm"]
    assert outcomes(result)["http"] == "failed"
    assert len([s for s in engine.runs if suite_of(s) == "http"]) == 1


@pytest.mark.parametrize("cell", [BOOKWORM])
def test_the_build_plan_of_the_fixture_tree_has_the_recipe_and_tail(tmp_path: Path, cell: Cell) -> None:
    a_lab(tmp_path, FakeEngine())
    plan = plan_build(cell, tmp_path / "tree", "debian:bookworm", "sha256:1")
    assert plan.dockerfile.startswith(b"# The python stage") and b"FROM user AS runtime" in plan.dockerfile


def test_each_suite_is_measured_and_one_over_its_budget_fails_saying_so(tmp_path: Path) -> None:
    engine = FakeEngine(present=["debian:bookworm"])
    engine.usage["payload"] = b"memory 1900000000 memory/memory.max_usage_in_bytes\ncpu_ns 7000000000 cpuacct/x\n"
    lab = a_lab(tmp_path, engine)
    result = run(lab)["fx-bookworm"]
    unit, payload = result.suite(Suite.UNIT), result.suite(Suite.PAYLOAD)
    assert unit is not None and unit.outcome is Outcome.PASSED
    assert (unit.usage.peak_memory, unit.usage.cpu_time) == (104857600, 2.5)
    assert "cgroup (memory/memory.max_usage_in_bytes, cpuacct/cpuacct.usage)" in unit.usage.measured_by
    assert payload is not None and payload.outcome is Outcome.FAILED and result.outcome is Outcome.FAILED
    assert "peak memory 1,900 MB is over the payload suite's CPython budget of 60 x 5 MB (300 MB)" in payload.message
    assert len(payload.earlier) == 1  # run again, as any failure is, and over again
    again = run(a_lab(tmp_path, FakeEngine(present=["debian:bookworm", *engine.built])))["fx-bookworm"]
    assert again.suite(Suite.UNIT).cached and not again.suite(Suite.PAYLOAD).cached  # type: ignore[union-attr]


def test_what_a_run_writes_into_the_checkout_is_ignored_by_git(tmp_path: Path) -> None:
    import subprocess

    root = tmp_path / "tree"
    lab = a_lab(tmp_path, FakeEngine(present=["debian:bookworm"]), cache=root / ".cache/lab",
                results=root / "matrix/results")  # fmt: skip
    for name in ("py3.11",):  # a_lab made the pytest folders under tmp_path/cache: where the defaults put them
        shutil.copytree(tmp_path / "cache/pytest" / name, root / ".cache/lab/pytest" / name)
    shutil.copy(LAB_ROOT / ".gitignore", root / ".gitignore")
    git = ["git", "-C", str(root), "-c", "user.name=lab", "-c", "user.email=lab@localhost"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "before"]):
        subprocess.run([*git, *args], capture_output=True, check=True)
    from matrix import cli, records, report

    results = run_matrix(lab, (BOOKWORM,))
    report.write_reports(results, cli.environment(lab, engine_version="fake"), lab.options.results / lab.run_id)
    report.point(lab.options.results / records.LATEST, lab.options.results / lab.run_id)
    written = [p for p in (root / ".cache").rglob("*") if p.is_file()] + list((root / "matrix/results").rglob("*"))
    assert written, "the run wrote nothing where the defaults put it"
    left = subprocess.run([*git, "status", "--porcelain", "--untracked-files=all"], capture_output=True, text=True,
                          check=True).stdout  # fmt: skip
    assert left == "", left
    # The defaults are where this test put them, and the lab's other folders are ignored too.
    assert cli.build_parser().get_default("results") == LAB_ROOT / "matrix/results"
    assert Options().cache == LAB_ROOT / ".cache/lab"
    others = [".venv-lab/bin/python", ".cache/conformance/node", ".cache/lab/host/py3.11/bin/python"]
    ignored = subprocess.run(["git", "-C", str(LAB_ROOT), "check-ignore", *others], capture_output=True, text=True)
    assert ignored.stdout.split() == others


def test_a_suite_that_did_not_pass_says_the_line_that_reruns_only_it_in_only_its_cell(tmp_path: Path) -> None:
    bootstrap = {"method": "mmdebstrap", "suite": "bookworm", "mirror_env": "LAB_DEBIAN_MIRROR"}
    (i386,) = parse_cells({"schema": 1, "cell": [{**TABLE["cell"][0], "name": "fx-bookworm-i386",  # type: ignore[dict-item]
                                                  "arch": "i386", "bootstrap": bootstrap}]})  # fmt: skip
    engine = FakeEngine(present=["debian:bookworm", bootstrap_tag(i386, "")], suites={"http": "fail"})
    lab = a_lab(tmp_path, engine, retries=0)
    results = run(lab, (BOOKWORM, i386))
    result = results["fx-bookworm-i386"]
    assert outcomes(result) == {"unit": "passed", "http": "failed", "payload": "passed"}, result.message
    assert [s.suite for s in result.suites if s.reproduce] == [Suite.HTTP]
    table = report.to_table(list(results.values()), suites=IN_CONTAINER)
    markdown = report.to_markdown(list(results.values()), Environment(), suites=IN_CONTAINER)
    for cell in (BOOKWORM, i386):
        (line,) = [x.strip() for x in table.splitlines() if f"--cell {cell.name} " in x]
        assert line in markdown
        argv = shlex.split(line, comments=True)  # as a shell runs it pasted: what follows the # is a comment
        assert argv[:2] == ["python", "scripts/run_matrix.py"]
        selection = cli.selection_of(cli.build_parser().parse_args(argv[2:]))
        assert selection is not None
        assert select((BOOKWORM, i386), selection) == (cell,)
        assert selection.suites_for(cell.name) == (Suite.HTTP,)
        test_image = next(s.image for s in engine.runs if s.name.endswith(f"-{cell.name}-http"))
        shell = line.partition("  # by hand: ")[2]
        platform = "--platform linux/386 " if cell.arch else ""
        assert shell.startswith(f"docker run --rm -it {platform}--network none --user mcp --mount type=volume,"
                                "source=mcplab-pytest-py3.11-"), shell
        assert shell.endswith(f",target=/opt/pytest,readonly -e MCPLAB_CELL={cell.name} --entrypoint /bin/sh "
                              f"{test_image}"), shell  # as the lab runs it: the host-only tests left out


class RemoteFakeEngine(FakeEngine):
    """An engine elsewhere: this machine's binfmt_misc says nothing of its kernel, so nothing is checked here."""

    def endpoint(self) -> str:
        return "tcp://127.0.0.2:2375"


def test_an_emulated_cell_runs_its_declared_part_unless_suites_are_asked_for_and_each_gets_its_slowdown(
    tmp_path: Path,
) -> None:
    from matrix import budgets

    bootstrap = {"method": "mmdebstrap", "suite": "bookworm", "mirror_env": "LAB_DEBIAN_MIRROR"}
    (s390x,) = parse_cells({"schema": 1, "cell": [{**TABLE["cell"][0], "name": "fx-bookworm-s390x",  # type: ignore[dict-item]
                                                   "arch": "s390x", "bootstrap": bootstrap}]})  # fmt: skip
    every = (*IN_CONTAINER, Suite.HOSTILE, Suite.INSTALL)
    engine = RemoteFakeEngine(present=[bootstrap_tag(s390x, "")])
    result = run(a_lab(tmp_path, engine, selection=Selection(suites=every)), (s390x,))["fx-bookworm-s390x"]
    assert outcomes(result) == {"unit": "passed", "http": "passed", "payload": "passed", "hostile": "passed"}
    assert result.suite(Suite.INSTALL).message == "not run under emulation on s390x unless asked for (--suite all)"
    unit = result.suite(Suite.UNIT)
    assert unit is not None and unit.scope == budgets.UNDER_EMULATION[Suite.UNIT]
    assert result.suite(Suite.PAYLOAD).scope == ()  # type: ignore[union-attr]  # whole
    assert "what the emulated cells ran" in report.to_markdown([result], Environment()).lower()
    asked = run(a_lab(tmp_path, engine, selection=Selection(suites=every, asked=True)), (s390x,))["fx-bookworm-s390x"]
    assert "install" in outcomes(asked) and asked.suite(Suite.UNIT).scope == ()  # type: ignore[union-attr]
    first, again = [s.args for s in engine.runs if s.name.endswith("-fx-bookworm-s390x-unit")]
    assert "tests/unit/test_nesting.py" in first and "tests/unit" not in first
    assert "tests/unit" in again and "tests/unit/test_nesting.py" not in again
    budget = budgets.budget_for(Suite.PAYLOAD, budgets.CPYTHON, "s390x")
    native = budgets.budget_for(Suite.PAYLOAD, budgets.CPYTHON)
    assert budget.slowdown == budgets.SLOWDOWN["s390x"] > 1.0 == native.slowdown
    assert (budget.cpu, budget.memory) == (native.cpu * budget.slowdown, native.memory * budgets.EMULATED_MEMORY)
    assert budgets.budget_for(Suite.UNIT, budgets.CPYTHON, "i386") == budgets.DEFAULT  # native on x86_64


def test_a_cell_records_where_its_time_went_and_the_report_sums_it(tmp_path: Path) -> None:
    engine = FakeEngine(present=["debian:bookworm"])
    lab = a_lab(tmp_path, engine)
    result = run(lab)["fx-bookworm"]
    names = [phase.name for phase in result.phases]
    assert names == ["base", "build python", "build runtime", "build test", "build install", "pytest folder",
                     "suite unit", "suite http", "suite payload", "interpreter facts"]
    assert 0 <= result.started < 5 and all(phase.seconds >= 0 for phase in result.phases)
    assert sum(phase.seconds for phase in result.phases) == pytest.approx(result.duration, abs=0.05)
    markdown = report.to_markdown([result], Environment(duration=12.0, measuring=3.0))
    assert "Where the time went: 12 s wall:" in markdown
    assert "| suite unit | 1 |" in markdown and "| `fx-bookworm` |" in markdown


def test_a_cell_records_the_digest_of_the_tarball_its_base_was_made_from(tmp_path: Path) -> None:
    from matrix.bootstrap import ROOTFS_LABEL

    engine = FakeEngine(present=["debian:bookworm"])
    engine.labels["debian:bookworm"] = {ROOTFS_LABEL: "ab" * 32}
    result = run(a_lab(tmp_path, engine))["fx-bookworm"]
    assert (result.base_image, result.base_sha256) == ("debian:bookworm", "ab" * 32)
    markdown = report.to_markdown([result], Environment())
    assert f"- debian:bookworm: sha256 {'ab' * 32} (its tarball)" in markdown
    assert f"tarball sha256 {'ab' * 32}" in report.to_html([result], Environment())
