"""scripts/run_matrix.py's command line: parse arguments, then run one of three pipelines.

  list     load -> select -> shard -> availability -> print (text, --json, or --github-matrix)
  run      load -> select -> shard -> engine check -> run cells -> write reports -> print table -> exit code
  merge    read results of shards -> check they are one plan's -> merge -> write reports -> exit code

Every LabError is caught here, once, and becomes its exit code with its message; the last line printed
is always the exit code and what it means, or for a command that ran no cell, what it did instead (`make`
reports every failure as 2, and prints its own error after this line).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import FrameType

from . import LAB_ROOT, history, publish, records, report, skips
from .arches import ARCHES, native
from .budgets import UNDER_EMULATION
from .build import Unbuildable
from .cell import availability, base_plans
from .compare import SinceLastFull, since_last_full
from .engine import Engine
from .errors import LabError, NothingToRun, UsageError
from .exits import Exit
from .lab import DEFAULT_TIMEOUT, KEEP_RUNS, Lab, Options, environment
from .model import SUITES, Cell, CellResult, Environment, Family, Implementation, Outcome, Suite
from .outcomes import exit_code
from .plan import (
    Selection,
    check_shards,
    github_matrix,
    merge_results,
    order_results,
    parse_jobs,
    parse_shard,
    parse_suites,
    plan_digest,
    rerun_plan,
    select,
    shard,
    split_values,
)
from .progress import Progress
from .schedule import run_matrix
from .table import CELLS_TOML, load_cells

RUN_FOLDER = re.compile(r"^\d{14}-[0-9a-f]{6}$")  # lab.Lab.run_id


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{message}. Run with --help for the options.")


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, got {text}")
    return value


def _count(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number, 0 or more")
    return int(text)


def _epilog() -> str:
    codes = "\n".join(f"  {code.value:<4} {code.meaning}" for code in Exit)
    return (f"exit codes:\n{codes}\n`make matrix` exits 2 on any failure (make's rule), and make's own error is "
            "its last line; the script's own code is the line `run_matrix: exit N: ...` just above it. CI should call "
            "this script to get the code.")  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="run_matrix.py",
        description="Build the lab's images and run every suite in every cell; write a results matrix.",
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _selection_options(p.add_argument_group("selection (values may be repeated or comma-separated; globs allowed)"))
    out = p.add_argument_group("listing (these run nothing)")
    out.add_argument("--list", action="store_true",
                     help="print the cells and whether they can run here, checked as a run first checks")  # fmt: skip
    out.add_argument("--json", action="store_true", help="with --list: print the cells as JSON")
    out.add_argument("--github-matrix", action="store_true", help="print a GitHub Actions {'include': [...]}")
    out.add_argument("--shards", type=int, metavar="N", default=0,
                     help="with --github-matrix: N jobs of one --shard K/N each, not a job per cell")  # fmt: skip
    out.add_argument("--base", metavar="CELL", help="make (or find) CELL's base image and print its reference")
    _running_options(p.add_argument_group("running"))
    paths = p.add_argument_group("paths (for tests and odd layouts)")
    paths.add_argument("--cells", type=Path, default=CELLS_TOML, help="the cell table (default matrix/cells.toml)")
    paths.add_argument("--root", type=Path, default=LAB_ROOT, help="source tree with server/, tests/, images/")
    paths.add_argument("--cache", type=Path, default=Path(os.environ.get("LAB_CACHE", LAB_ROOT / ".cache" / "lab")),
                       help="the lab's own files: logs, pytest folders, built wheels, remembered passes and facts "
                            "(default .cache/lab, or $LAB_CACHE)")  # fmt: skip
    paths.add_argument("--results", type=Path, default=LAB_ROOT / "matrix" / "results",
                       help="reports go to RESULTS/<run id>/, with RESULTS/latest pointing at the newest")  # fmt: skip
    return p


def _selection_options(sel: argparse._ArgumentGroup) -> None:
    sel.add_argument("--distro", action="append", default=[], help="family: " + ", ".join(f.value for f in Family))
    sel.add_argument("--python", action="append", default=[],
                     help="the Python X.Y a cell implements, e.g. 3.11: PyPy's 3.11 cells match too; name the "
                          "interpreter (pypy3.11, py3.14t) or add --implementation to tell them apart")  # fmt: skip
    sel.add_argument("--implementation", action="append", default=[],
                     help="interpreter: " + ", ".join(i.value for i in Implementation))  # fmt: skip
    sel.add_argument("--cell", action="append", default=[], help="cell name, e.g. 'debian-*'")
    sel.add_argument("--arch", action="append", default=[],
                     help="architecture, by Debian's name: " + ", ".join(ARCHES) + f" (this machine's: {native()}); "
                          "'all' for every one, the opt-in ones too (riscv64, ppc64el, armhf: emulated, long)",
                     )  # fmt: skip
    sel.add_argument("--suite", action="append", default=[],
                     help=", ".join(s.value for s in SUITES) + "; 'all' for every one. A suite named here runs whole "
                          "in an emulated cell too, which otherwise runs a declared part of "
                          + ", ".join(s.value for s in UNDER_EMULATION) + " (matrix/budgets.py)")  # fmt: skip
    sel.add_argument("--rerun-failed", action="store_true",
                     help="only the suites that failed, errored, timed out, were flaky or were cancelled in the "
                          "latest run (RESULTS/latest), in their cells")  # fmt: skip
    sel.add_argument("--shard", help="K/N: run a deterministic share of the selected cells")
    sel.add_argument("--durations", type=Path, metavar="RESULTS",
                     help="with --shard: balance shards by the cell durations of an earlier run's results")  # fmt: skip
    sel.add_argument("--available-only", action="store_true",
                     help="leave out the cells this kind of machine cannot run (CI's matrix and shards)")  # fmt: skip


def _running_options(run: argparse._ArgumentGroup) -> None:
    run.add_argument("--jobs", default="auto", help="cells at a time: a number or 'auto' (default)")
    run.add_argument("--fail-fast", action="store_true", help="stop at the first cell that does not pass")
    run.add_argument("--keep", action="store_true", help="leave a failed suite's container for debugging")
    run.add_argument("--strict", action="store_true", help="also fail when a cell is flaky or unavailable")
    run.add_argument("--retries", type=_count, default=1, metavar="N",
                     help="run a suite that failed, errored or timed out again up to N times (default %(default)s); "
                          "one that then passes is flaky, not passed")  # fmt: skip
    run.add_argument("--timeout", type=_positive, default=DEFAULT_TIMEOUT,
                     help="seconds per suite, more than 0 (default %(default)s)")  # fmt: skip
    run.add_argument("--no-cache", action="store_true",
                     help="run every suite, even one that passed before with exactly the same inputs, and build "
                          "again what a build said cannot be built here")  # fmt: skip
    run.add_argument("--registry", metavar="HOST:PORT/PREFIX", default=os.environ.get("LAB_REGISTRY", ""),
                     help="push built images and passed-suite records there; pull instead of building")  # fmt: skip
    run.add_argument("--cache-dir", type=Path, metavar="DIR",
                     help="the same with `docker save` archives in a folder (e.g. a CI cache)")  # fmt: skip
    run.add_argument("--merge", nargs="+", metavar="DIR", help="join the results of every shard of a run into one")
    run.add_argument("--publish", action="store_true",
                     help="after a whole run that passed, of a tree without uncommitted changes, write its summary "
                          "into README.md, its report to docs/matrix.md and its grid to docs/img/report.png, each "
                          "naming the commit and the run (make matrix-publish)")  # fmt: skip


def needs_host_tools(argv: Sequence[str]) -> bool:
    """Whether the command runs cells (and so needs pytest, testinfra and packaging on the host); listing,
    merging, --base and --help run on a bare standard-library Python (as CI's listing and merging jobs do)."""
    light = {"--list", "--github-matrix", "--merge", "--base", "--help", "-h"}
    return not any(arg.split("=", 1)[0] in light for arg in argv)


def jobs_auto() -> int:
    # Cells spend most of their time waiting (on the engine, the network, and in their suites: a cold run's suites
    # took 7,650 s of wall time and 1,867 s of CPU), so more of them run at once than there are CPUs; at 4 per CPU
    # a loaded 2-core machine ran out of CPU and PyPy's unit suite out of time.
    return 3 * (os.cpu_count() or 1)


@dataclass(frozen=True)
class Ended:
    """How a command ended: its exit code and, for one that ran no cell, what it did instead of a verdict."""

    code: Exit
    instead: str = ""


def main(argv: Sequence[str] | None = None) -> int:
    try:
        ended = _main(list(sys.argv[1:] if argv is None else argv))
    except LabError as exc:
        print(f"run_matrix: {exc.message}", file=sys.stderr)
        ended = Ended(exc.exit_code)
    except BrokenPipeError:  # `--list | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error when Python flushes
        return 0
    said = ended.instead or ended.code.meaning
    print(f"run_matrix: exit {ended.code.value}: {said}", file=sys.stderr)
    return ended.code.value


def _main(argv: list[str]) -> Ended:
    args = build_parser().parse_args(argv)
    if args.merge:
        return Ended(_merge(args))
    cells = load_cells(args.cells)
    selection = selection_of(args)
    if selection is None:
        latest = args.results / "latest"
        return Ended(Exit.PASSED, f"nothing to rerun: no suite failed, errored, timed out or was flaky in {latest}")
    which = parse_shard(args.shard) if args.shard else None
    if args.durations and not which:
        raise UsageError("--durations goes with --shard.")
    if args.base:
        _base(cells, args.base)
        return Ended(Exit.PASSED, "the base is there; no cell was run")
    selected = select(cells, selection)
    if args.available_only:
        selected = _available(selected, args)
    chosen = shard(selected, which, _durations(args.durations) if args.durations else None)
    if args.github_matrix or args.list:
        _list(chosen, args) if args.list else print(github_matrix(chosen, shards=args.shards))
        return Ended(Exit.PASSED, "a listing; no cell was run")
    if args.json or args.shards:
        raise UsageError("--json goes with --list, --shards with --github-matrix.")
    if not chosen:
        raise UsageError(f"shard {which} of this selection is empty; use fewer shards.")
    options = Options(table=cells, publish=args.publish,
        selection=selection, jobs=parse_jobs(args.jobs, jobs_auto()), fail_fast=args.fail_fast, keep=args.keep,
        strict=args.strict, timeout=args.timeout, root=args.root.resolve(), cache=args.cache.resolve(),
        results=args.results.resolve(), shard=which, plan=plan_digest(selected, selection, which.count if which else 1),
        use_cache=not args.no_cache, registry=args.registry, retries=args.retries,
        cache_dir=args.cache_dir.resolve() if args.cache_dir else None, durations=_earlier_durations(args.results),
    )  # fmt: skip
    return _run(chosen, options)


def selection_of(args: argparse.Namespace) -> Selection | None:
    """What the selectors ask for; None when --rerun-failed finds nothing to run again."""
    only: tuple[tuple[str, tuple[Suite, ...]], ...] = ()
    if args.rerun_failed:
        try:
            latest, _, _ = records.read_results(args.results)
        except (LabError, OSError) as exc:
            raise UsageError(f"--rerun-failed reruns what the latest run in {args.results} did not pass; "
                             f"there is none to read ({exc}).") from exc  # fmt: skip
        only = rerun_plan(latest)
        if not only:
            return None
    return Selection(
        distros=split_values(args.distro), pythons=split_values(args.python),
        implementations=split_values(args.implementation), cells=split_values(args.cell),
        arches=split_values(args.arch),
        suites=parse_suites(args.suite), only=only, asked=bool(args.suite),
    )  # fmt: skip


def _earlier_durations(results: Path) -> dict[str, float]:
    """How long each cell took in the latest complete run written to RESULTS (else the latest run), if any:
    the scheduler starts the longest first. Nothing (a first run, an unreadable report) leaves the
    scheduler's own order."""
    for name in (records.LATEST_FULL, records.LATEST):
        try:
            return _durations(results / name)
        except (LabError, OSError, KeyError, TypeError, ValueError):
            continue
    return {}


def _durations(path: Path) -> dict[str, float]:
    results, _, _ = records.read_results(path if path.is_dir() else path.parent)
    return {r.cell: r.duration for r in results if r.duration}


def _rows(cells: Sequence[Cell], args: argparse.Namespace) -> list[tuple[Cell, str, str]]:
    """Each cell, available, unavailable or unchecked, and how or why: what a run checks before starting it."""
    env, engine = dict(os.environ), Engine()
    plans = base_plans(cells, engine, env)
    unbuildable = Unbuildable(args.cache / "unbuildable")
    return [(cell, *availability(cell, plans, env, engine=engine, root=args.root, unbuildable=unbuildable))
            for cell in cells]  # fmt: skip


def _list(cells: Sequence[Cell], args: argparse.Namespace) -> None:
    rows = _rows(cells, args)
    if args.json:
        data = [
            {
                "name": c.name, "family": c.family.value, "release": c.release, "python": c.python,
                "arch": c.arch or native(), "opt_in": c.opt_in,
                "base": c.base, "python_from": c.python_from.value, "suites": [s.value for s in c.suites],
                "available": state != "unavailable", "checked": state != "unchecked", "detail": how,
            }
            for c, state, how in rows
        ]  # fmt: skip
        print(json.dumps(data, indent=2))
        return
    width = max(len(c.name) for c in cells)
    for cell, state, how in rows:
        print(f"{cell.name:<{width}}  {cell.arch or native():<7}  {state:<11}  {how}")


def _available(cells: Sequence[Cell], args: argparse.Namespace) -> tuple[Cell, ...]:
    """The cells this kind of machine can run (or may: unchecked ones stay). Every machine of one kind (a CI
    runner label) gets the same answer, so each shard of a run filters alike and the shards still partition
    one plan."""
    if any(c.family.in_container for c in cells):
        Engine().version()  # a dead engine must not shrink the matrix to nothing in silence
    return tuple(cell for cell, state, _ in _rows(cells, args) if state != "unavailable")


def _base(cells: Sequence[Cell], name: str) -> None:
    """Make or find one cell's base and print its reference (docs/guides/embedding.md builds FROM it)."""
    cell = next((c for c in cells if c.name == name and c.family.in_container), None)
    if cell is None:
        raise UsageError(f"--base takes a container cell's name; {name!r} is not one. See --list.")
    engine = Engine()
    engine.version()
    plans = base_plans([cell], engine, dict(os.environ))
    with Progress([cell.name], live=False) as progress:
        lab = Lab(Options(), progress, engine)
        try:
            base = lab.bases.obtain(plans[cell.name])
        finally:
            lab.cleanup()
    print(base.image)


def _run(cells: Sequence[Cell], options: Options) -> Ended:
    engine = Engine()
    engine_version = ""
    if any(c.family.in_container for c in cells) or engine.asked_for():
        engine_version = engine.version()  # EngineError (exit 3): a dead engine is never a pass
    last_full = _last_full(options.results)
    with Progress([c.name for c in cells]) as progress:
        lab = Lab(options, progress, engine)
        folder = options.results / lab.run_id
        previous = {sig: signal.signal(sig, _interrupt_handler(lab)) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            def partial(results: list[CellResult]) -> None:
                env = environment(lab, engine_version=engine_version, partial="the run is still going")
                report.write_reports(results, env, folder, suites=options.selection.suites, summary=False,
                                     table=options.table)  # fmt: skip
                report.point(options.results / records.LATEST, folder)

            results = run_matrix(lab, cells, on_result=partial)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    since = since_last_full(results, *last_full) if last_full else None
    env = _finish(lab, results, engine_version=engine_version, since=since)
    nowhere = len(skips.ran_nowhere(results)) if skips.judged(env) else 0
    code = exit_code(results, strict=options.strict, interrupted=lab.interrupted.is_set(), ran_nowhere=nowhere)
    if options.publish:
        code = _publish(lab, results, env, code)
    if code is Exit.NOTHING_RAN:
        reasons = "; ".join(f"{r.cell}: {r.message}" for r in results if r.outcome is Outcome.UNAVAILABLE)
        raise NothingToRun(f"no selected cell can run here ({reasons}).")
    # The last line a CI log's tail shows: which cells did not pass and why, beside what the code means.
    said = "; ".join(filter(None, [report.verdict(results), f"{nowhere} tests ran in no cell" if nowhere else ""]))
    return Ended(code, f"{code.meaning}: {said}" if code is Exit.FAILED and said else "")


def _publish(lab: Lab, results: Sequence[CellResult], env: Environment, code: Exit) -> Exit:
    """--publish: the run's reports where the repository shows them, or why not (which fails a run that passed)."""
    why = publish.refusal(env, code)
    if why:
        print(f"run_matrix: not published: {why}", file=sys.stderr)
        return Exit.USAGE if code is Exit.PASSED else code
    options = lab.options
    written = publish.publish(options.root, options.results / lab.run_id, results, env, options.table, lab.processes)
    print(f"published {publish.named(env)}: " + ", ".join(str(p.relative_to(options.root)) for p in written))
    return code


def _last_full(results: Path) -> tuple[tuple[CellResult, ...], Environment] | None:
    """The records of the latest complete run in RESULTS, read before this run may replace it."""
    try:
        found, env, _ = records.read_results(results / records.LATEST_FULL)
    except (LabError, OSError, KeyError, TypeError, ValueError):
        return None
    return found, env


def _finish(lab: Lab, results: Sequence[CellResult], *, engine_version: str, since: SinceLastFull | None
            ) -> Environment:  # fmt: skip
    """Write the reports, move the links, print the table and where the reports are; returns what the reports say
    of the run."""
    options = lab.options
    folder = options.results / lab.run_id
    why_partial = f"interrupted ({lab.stop_reason})" if lab.interrupted.is_set() else lab.stop_reason
    env = environment(lab, engine_version=engine_version, partial=why_partial)
    line = history.entry(results, run_id=lab.run_id, date=env.date, commit=env.commit)
    flakes = history.rates(history.append(options.results, line))
    report.write_reports(results, env, folder, suites=options.selection.suites, since=since, flakes=flakes,
                         table=options.table)  # fmt: skip
    report.point(options.results / records.LATEST, folder)
    selection = options.selection
    # A whole run: every cell but the opt-in ones (or more, with --arch all), every suite, not cut short, not a shard.
    if not selection.subset and not why_partial and not options.shard:
        report.point(options.results / records.LATEST_FULL, folder)
    _prune_reports(options.results)
    print(report.to_table(results, suites=selection.suites, since=since, flakes=flakes, env=env), end="")
    for kept in lab.kept:
        print(kept.advice())
    print(f"reports: {folder} ({', '.join(report.REPORT_FILES)}); {options.results / records.LATEST} points there")
    return env


def _prune_reports(results: Path) -> None:
    """Keep the newest KEEP_RUNS run folders, and whatever `latest` and `latest-full` point at."""
    keep = {os.path.realpath(results / name) for name in (records.LATEST, records.LATEST_FULL)}
    runs = sorted(p for p in results.iterdir() if RUN_FOLDER.match(p.name) and not p.is_symlink())
    for old in runs[:-KEEP_RUNS]:
        if os.path.realpath(old) not in keep:
            shutil.rmtree(old, ignore_errors=True)


def _interrupt_handler(lab: Lab):  # type: ignore[no-untyped-def]
    """SIGINT and SIGTERM stop the run, also when the shell started it with SIGINT ignored (a background
    job): the handler is installed explicitly instead of relying on Python's default KeyboardInterrupt."""

    def handler(signum: int, frame: FrameType | None) -> None:
        lab.interrupt(f"the run was interrupted by {signal.Signals(signum).name}")

    return handler


def _merge(args: argparse.Namespace) -> Exit:
    groups, envs = [], []
    suites: tuple[Suite, ...] = ()
    for directory in args.merge:
        results, env, shard_suites = records.read_results(Path(directory))
        groups.append(results)
        envs.append((directory, env))
        suites = suites or shard_suites
    check_shards(envs)
    table = load_cells(args.cells)
    merged = order_results(merge_results(groups), table)
    first = envs[0][1]
    shards = {f"shard {e.shard}": f"{e.host}, engine {e.engine}, {e.date}, run {e.run_id}" for _, e in envs}
    environ = replace(first, shard=f"merged {len(envs)} shards", run_id="", extra=shards)
    out = args.results.resolve()
    report.write_reports(merged, environ, out, suites=suites, table=table)
    print(report.to_table(merged, suites=suites, env=environ), end="")
    nowhere = len(skips.ran_nowhere(merged)) if skips.judged(environ) else 0
    code = exit_code(merged, strict=args.strict, ran_nowhere=nowhere)
    if code is Exit.NOTHING_RAN:
        raise NothingToRun("none of the merged cells could run.")
    return code

