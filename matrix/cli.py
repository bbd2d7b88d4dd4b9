"""scripts/run_matrix.py's command line: parse arguments, then run one of three pipelines.

  list     load -> select -> shard -> availability -> print (text, --json, or --github-matrix)
  run      load -> select -> shard -> run cells -> write reports -> print table -> exit code
  merge    read results of shards -> merge -> write reports -> print table -> exit code

Every LabError is caught here, once, and becomes its exit code with its message.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from types import FrameType

from . import report
from .cells import CELLS_TOML, load_cells
from .errors import LabError, NothingToRun, UsageError
from .model import Cell, CellResult, Environment, Outcome
from .pipeline import (
    DEFAULT_TIMEOUT,
    LAB_ROOT,
    Lab,
    Options,
    availability,
    base_plans,
    environment,
    run_matrix,
)
from .plan import (
    Selection,
    exit_code,
    github_matrix,
    merge_results,
    order_results,
    parse_jobs,
    parse_shard,
    parse_suites,
    select,
    shard,
    split_values,
)
from .progress import Progress


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{message}. Run with --help for the options.")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="run_matrix.py",
        description="Build the lab's images and run every suite in every cell; write a results matrix.",
    )
    sel = p.add_argument_group("selection (values may be repeated or comma-separated; globs allowed)")
    sel.add_argument("--distro", action="append", default=[], help="family: debian, ubuntu, alpine, host")
    sel.add_argument("--python", action="append", default=[], help="Python X.Y, e.g. 3.11")
    sel.add_argument("--cell", action="append", default=[], help="cell name, e.g. 'debian-*'")
    sel.add_argument("--suite", action="append", default=[], help="unit, http, payload, images")
    sel.add_argument("--shard", help="K/N: run a deterministic share of the selected cells")
    out = p.add_argument_group("listing")
    out.add_argument("--list", action="store_true", help="print the cells and their availability here")
    out.add_argument("--json", action="store_true", help="with --list: print the cells as JSON")
    out.add_argument("--github-matrix", action="store_true", help="print a GitHub Actions {'include': [...]}")
    run = p.add_argument_group("running")
    run.add_argument("--jobs", default="auto", help="cells at a time: a number or 'auto' (default)")
    run.add_argument("--fail-fast", action="store_true", help="stop at the first cell that does not pass")
    run.add_argument("--keep", action="store_true", help="leave a failed suite's container for debugging")
    run.add_argument("--strict", action="store_true", help="also fail when a cell is unavailable")
    run.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per suite (default %(default)s)")
    run.add_argument(
        "--no-cache",
        action="store_true",
        help="run every suite, even one that passed before with exactly the same inputs",
    )
    run.add_argument("--merge", nargs="+", metavar="DIR", help="join the results.json of shards into one report")
    paths = p.add_argument_group("paths (for tests and odd layouts)")
    paths.add_argument("--cells", type=Path, default=CELLS_TOML, help="the cell table (default matrix/cells.toml)")
    paths.add_argument("--root", type=Path, default=LAB_ROOT, help="source tree with server/, tests/, images/")
    paths.add_argument("--cache", type=Path, default=Path(os.environ.get("LAB_CACHE", LAB_ROOT / ".cache" / "lab")))
    paths.add_argument("--results", type=Path, default=LAB_ROOT / "matrix" / "results", help="where reports go")
    return p


def jobs_auto() -> int:
    # Cells spend most of their time waiting on the engine and the network, not on this host's CPU.
    return 2 * (os.cpu_count() or 1)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(list(sys.argv[1:] if argv is None else argv))
    except LabError as exc:
        print(f"run_matrix: {exc.message}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:  # `--list | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error when Python flushes
        return 0


def _main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if args.merge:
        return _merge(args)
    cells = load_cells(args.cells)
    selection = Selection(
        distros=split_values(args.distro),
        pythons=split_values(args.python),
        cells=split_values(args.cell),
        suites=parse_suites(args.suite),
    )
    which = parse_shard(args.shard) if args.shard else None
    chosen = shard(select(cells, selection), which)
    if args.github_matrix:
        print(github_matrix(chosen))
        return 0
    if args.list:
        return _list(chosen, as_json=args.json)
    if args.json:
        raise UsageError("--json goes with --list.")
    if not chosen:
        raise UsageError(f"shard {which} of this selection is empty; use fewer shards.")
    options = Options(
        selection=selection,
        jobs=parse_jobs(args.jobs, jobs_auto()),
        fail_fast=args.fail_fast,
        keep=args.keep,
        strict=args.strict,
        timeout=args.timeout,
        root=args.root.resolve(),
        cache=args.cache.resolve(),
        results=args.results.resolve(),
        shard=which,
        use_cache=not args.no_cache,
    )
    return _run(chosen, options)


def _list(cells: Sequence[Cell], *, as_json: bool) -> int:
    from .engine import Engine

    env = dict(os.environ)
    plans = base_plans(cells, Engine(), env)
    rows = []
    for cell in cells:
        ok, how = availability(cell, plans, env)
        rows.append((cell, ok, how))
    if as_json:
        data = [
            {
                "name": c.name, "family": c.family.value, "release": c.release, "python": c.python,
                "base": c.base, "python_from": c.python_from.value, "suites": list(c.suites),
                "available": ok, "detail": how,
            }
            for c, ok, how in rows
        ]  # fmt: skip
        print(json.dumps(data, indent=2))
        return 0
    width = max(len(c.name) for c in cells)
    for cell, ok, how in rows:
        print(f"{cell.name:<{width}}  {'available  ' if ok else 'unavailable'}  {how}")
    return 0


def _sigterm(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _run(cells: Sequence[Cell], options: Options) -> int:
    previous = signal.signal(signal.SIGTERM, _sigterm)
    try:
        with Progress([c.name for c in cells]) as progress:
            lab = Lab(options, progress)
            environ = environment(lab.engine, options.root, options.shard)
            environ = replace(environ, extra={"run_id": lab.run_id, "logs": str(lab.logdir)})
            suites = options.selection.suites

            def partial(results: list[CellResult]) -> None:
                report.write_reports(results, environ, options.results, suites=suites, summary=False)

            results, interrupted = run_matrix(lab, cells, on_result=partial)
        report.write_reports(results, environ, options.results, suites=suites)
    finally:
        signal.signal(signal.SIGTERM, previous)
    print(report.to_table(results, suites=options.selection.suites), end="")
    for message in lab.kept:
        print(message)
    print(f"reports: {', '.join(str(options.results / n) for n in report.REPORT_FILES)}")
    if interrupted:
        print(
            "run_matrix: interrupted; what finished is in the reports, the rest is marked cancelled.",
            file=sys.stderr,
        )
        return 130
    code = exit_code(results, strict=options.strict)
    if code == 3:
        reasons = "; ".join(f"{r.cell}: {r.message}" for r in results if r.outcome is Outcome.UNAVAILABLE)
        raise NothingToRun(f"no selected cell can run here ({reasons}).")
    return code


def _merge(args: argparse.Namespace) -> int:
    groups = []
    envs: list[Environment] = []
    suites: tuple[str, ...] = ()
    for directory in args.merge:
        results, env, shard_suites = report.read_results(Path(directory))
        groups.append(results)
        envs.append(env)
        suites = suites or shard_suites
    cells = load_cells(args.cells)
    merged = order_results(merge_results(groups), cells)
    first = envs[0]
    environ = Environment(
        engine=first.engine,
        kernel=first.kernel,
        commit=first.commit,
        date=first.date,
        host=first.host,
        shard=f"merged {len(envs)} shards",
        extra={f"shard {e.shard or i + 1}": f"{e.host}, engine {e.engine}, {e.date}" for i, e in enumerate(envs)},
    )
    report.write_reports(merged, environ, args.results.resolve(), suites=suites)
    print(report.to_table(merged, suites=suites), end="")
    code = exit_code(merged, strict=args.strict)
    if code == 3:
        raise NothingToRun("none of the merged cells could run.")
    return code
