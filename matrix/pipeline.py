"""The run as a pipeline of steps: facts -> base plans -> (bases, pytest folders) -> cells -> records.

`run_cell` is one cell in, one record out; it never raises: whatever breaks becomes the cell's outcome.
`run_matrix` runs cells in parallel, stops on request (fail-fast, Ctrl-C, SIGTERM) and on the way out
removes every container this run labelled, whatever happened.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import functools
import os
import platform
import secrets
import shutil
import subprocess
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path

from . import host as hostcells
from .bases import Bases, BaseStep, gather_facts, plan_base
from .build import Builder, BuildFailure, plan_build
from .engine import RUN_LABEL, Engine, tail
from .memo import SuiteMemo, files_digest, memo_key
from .model import Cell, CellResult, Environment, Family, Outcome, SuiteResult
from .plan import Selection, Shard, cell_outcome, pick_next, should_stop
from .progress import Progress
from .run import pytest_volume, run_image_checks, run_in_container, run_on_host
from .wheels import PytestFolders

LAB_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TIMEOUT = 600.0  # seconds per suite
KEEP_LOG_RUNS = 20  # the newest runs' log folders are kept under .cache/lab/logs


def prune_logs(logs: Path, *, keep: int) -> None:
    """Run ids sort by time; drop all but the newest `keep` log folders."""
    runs = sorted(p for p in logs.iterdir() if p.is_dir())
    for old in runs[:-keep]:
        shutil.rmtree(old, ignore_errors=True)


@dataclass(frozen=True, kw_only=True)
class Options:
    selection: Selection = field(default_factory=Selection)
    jobs: int = 2
    fail_fast: bool = False
    keep: bool = False
    strict: bool = False
    timeout: float = DEFAULT_TIMEOUT
    root: Path = LAB_ROOT  # the source tree: server/, tests/, images/
    cache: Path = LAB_ROOT / ".cache" / "lab"
    results: Path = LAB_ROOT / "matrix" / "results"
    shard: Shard | None = None
    use_cache: bool = True  # report an identical earlier pass instead of running the suite again


class Lab:
    """What one run shares between its steps and threads."""

    def __init__(self, options: Options, progress: Progress, engine: Engine | None = None) -> None:
        self.options = options
        self.progress = progress
        self.engine = engine or Engine()
        self.run_id = time.strftime("%Y%m%d%H%M%S") + "-" + secrets.token_hex(3)
        self.workdir = options.cache / "tmp" / self.run_id
        self.logdir = options.cache / "logs" / self.run_id
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.logdir.mkdir(parents=True, exist_ok=True)
        prune_logs(self.logdir.parent, keep=KEEP_LOG_RUNS)
        self.bases = Bases(self.engine, self.workdir, self.logdir, options.cache)
        self.builder = Builder(self.engine, self.logdir, self.run_id)
        self.pytest = PytestFolders(options.cache / "pytest")
        self.memo = SuiteMemo(options.cache / "passed", enabled=options.use_cache)
        self.stop = threading.Event()
        self.stop_reason = ""
        self.kept: list[str] = []
        self._lock = threading.Lock()

    def remembered(self, key: str, run: Callable[[], SuiteResult]) -> SuiteResult:
        """An identical earlier pass (see memo.py), or run the suite and remember it if it passes."""
        hit = self.memo.get(key)
        if hit is not None:
            return hit
        result = run()
        self.memo.put(key, result)
        return result

    def request_stop(self, reason: str) -> None:
        with self._lock:
            if not self.stop.is_set():
                self.stop_reason = reason
                self.stop.set()

    def keep(self, message: str) -> None:
        with self._lock:
            self.kept.append(message)

    def cleanup(self) -> int:
        """Remove this run's containers and temporary folders; returns how many containers went."""
        self.stop.set()
        self.engine.kill_all()
        removed = 0
        if shutil.which(self.engine.docker) and not self.options.keep:
            removed = self.engine.remove_containers(f"{RUN_LABEL}={self.run_id}")
        elif self.options.keep:
            # Keep only the failed suites' containers the user asked for; remove any others.
            keep = {k.split()[1] for k in self.kept if k.startswith("kept ")}
            ids = self.engine.containers(f"{RUN_LABEL}={self.run_id}")
            names = self.engine.run(["inspect", "--format", "{{.Name}}", *ids]).output.split() if ids else []
            doomed = [i for i, n in zip(ids, names) if n.lstrip("/") not in keep]
            if doomed:
                self.engine.run(["rm", "-f", "-v", *doomed])
            removed = len(doomed)
        shutil.rmtree(self.workdir, ignore_errors=True)
        return removed


def environment(engine: Engine, root: Path, shard: Shard | None) -> Environment:
    commit = ""
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
    return Environment(
        engine=engine.server_version() if shutil.which(engine.docker) else "",
        kernel=platform.release(),
        commit=commit,
        date=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        host=f"{platform.system()} {platform.machine()} Python {platform.python_version()}",
        shard=str(shard) if shard else "",
    )


# --- availability (for --list, and the first step of a run) -------------------------------------------


def base_plans(cells: Sequence[Cell], engine: Engine, env: Mapping[str, str]) -> dict[str, tuple[BaseStep, ...]]:
    containers = tuple(c for c in cells if c.family.in_container)
    if not containers:
        return {}
    facts = gather_facts(engine, containers, env)
    return {c.name: plan_base(c, facts) for c in containers}


def availability(cell: Cell, plans: Mapping[str, tuple[BaseStep, ...]], env: Mapping[str, str]) -> tuple[bool, str]:
    """(available, how or why not) for --list, without building anything."""
    if cell.family is Family.HOST:
        found = hostcells.find_interpreter(cell.python, env)
        return (True, found) if found else (False, f"no python{cell.python} on PATH or in pyenv")
    steps = plans[cell.name]
    first = steps[0]
    if first.action == "unavailable":
        return False, first.reason
    how = " else ".join(s.action for s in steps if s.action != "unavailable")
    return True, f"{how} ({first.reason})"


# --- one cell -----------------------------------------------------------------------------------------


def _not_run(suites: Sequence[str], chosen: Sequence[str]) -> list[SuiteResult]:
    return [SuiteResult(suite=s, outcome=Outcome.NOT_RUN) for s in suites if s not in chosen]


def run_cell(lab: Lab, cell: Cell, steps: tuple[BaseStep, ...]) -> CellResult:
    started = time.monotonic()

    def say(phase: str, done: bool = False) -> None:
        lab.progress.update(cell.name, phase, done=done)

    chosen = [s for s in cell.suites if s in lab.options.selection.suites]
    record = CellResult(cell=cell.name, outcome=Outcome.ERROR, family=cell.family.value, python=cell.python)
    try:
        if lab.stop.is_set():
            result = replace(record, outcome=Outcome.CANCELLED, message=f"not run: {lab.stop_reason}")
        elif cell.family is Family.HOST:
            result = _run_host_cell(lab, cell, chosen, record, say)
        else:
            result = _run_container_cell(lab, cell, steps, chosen, record, say)
    except Exception as exc:  # a harness bug must become this cell's error, not end the run
        result = replace(
            record,
            outcome=Outcome.ERROR,
            message=f"harness error: {exc}",
            log_tail=tail(traceback.format_exc()),
        )
    result = replace(result, duration=time.monotonic() - started)
    say(result.outcome.value, done=True)
    return result


def _run_suites(
    lab: Lab, cell: Cell, chosen: Sequence[str], say: Callable[..., None], one: Callable[[str], SuiteResult]
) -> list[SuiteResult]:
    results = []
    for suite in chosen:
        if lab.stop.is_set():
            results.append(SuiteResult(suite=suite, outcome=Outcome.CANCELLED, message=f"not run: {lab.stop_reason}"))
            continue
        if suite != "images" and not (lab.options.root / "tests" / suite).is_dir():
            message = f"tests/{suite} does not exist in {lab.options.root}; nothing to run"
            results.append(SuiteResult(suite=suite, outcome=Outcome.ERROR, message=message))
            continue
        say(f"suite {suite}")
        results.append(one(suite))
    return results


def _run_host_cell(
    lab: Lab, cell: Cell, chosen: Sequence[str], record: CellResult, say: Callable[..., None]
) -> CellResult:
    say("finding interpreter")
    interpreter = hostcells.find_interpreter(cell.python)
    if not interpreter:
        return replace(record, outcome=Outcome.UNAVAILABLE, message=f"no python{cell.python} on PATH or in pyenv")
    say("pytest folder")
    folder = lab.pytest.folder(cell.python)
    venv_python = hostcells.prepare_venv(interpreter, cell.python, lab.options.root, lab.options.cache / "host")

    root = lab.options.root
    inputs = files_digest(
        [root / "server/mcpserver", root / "server/examples", root / "pyproject.toml"]
        + [p for p in sorted((root / "tests").glob("*")) if p.is_file()]
    )
    wheels = ",".join(lab.pytest.wheels(folder))

    def one(suite: str) -> SuiteResult:
        key = memo_key("host", interpreter, cell.python, inputs, files_digest([root / "tests" / suite]), wheels)
        return lab.remembered(
            key,
            lambda: run_on_host(
                venv_python=venv_python, pytest_folder=folder, root=root, cell=cell.name, suite=suite,
                timeout=lab.options.timeout, logdir=lab.logdir, workdir=lab.workdir, tracker=lab.engine,
            ),
        )  # fmt: skip

    suites = _run_suites(lab, cell, chosen, say, one)
    suites += _not_run(cell.suites, chosen)
    return replace(record, outcome=cell_outcome(suites), suites=_ordered(suites, cell), base=f"host {interpreter}")


def _ordered(suites: Sequence[SuiteResult], cell: Cell) -> tuple[SuiteResult, ...]:
    order = {s: i for i, s in enumerate(cell.suites)}
    return tuple(sorted(suites, key=lambda s: order.get(s.suite, 99)))


def _run_container_cell(
    lab: Lab,
    cell: Cell,
    steps: tuple[BaseStep, ...],
    chosen: Sequence[str],
    record: CellResult,
    say: Callable[..., None],
) -> CellResult:
    say("base")
    base = lab.bases.obtain(steps)
    if base.unavailable:
        return replace(record, outcome=Outcome.UNAVAILABLE, message=base.unavailable)
    if base.error:
        return replace(record, outcome=Outcome.ERROR, message=f"base: {base.error}", log_tail=base.log_tail)
    plan = plan_build(cell, lab.options.root, base.image, lab.engine.image_id(base.image))
    built = lab.builder.build(plan, on_stage=lambda stage: say(f"build {stage}"))
    if isinstance(built, BuildFailure):
        return replace(record, outcome=Outcome.ERROR, message=built.message, log_tail=built.log_tail, base=base.how)
    needs_pytest = any(s != "images" for s in chosen)
    volume = ""
    if needs_pytest:
        say("pytest folder")
        folder = lab.pytest.folder(cell.python)
        volume = pytest_volume(lab.engine, cell.python, folder, lab.pytest.wheels(folder), built.test)

    def one(suite: str) -> SuiteResult:
        if suite == "images":
            key = memo_key(
                "images", lab.engine.image_id(built.runtime), lab.engine.image_id(built.python),
                files_digest([LAB_ROOT / "tests" / "images"]), cell.python, cell.python_from.value,
                cell.family.value,
            )  # fmt: skip
            return lab.remembered(
                key,
                lambda: run_image_checks(
                    run_id=lab.run_id, cell=cell.name, family=cell.family.value, python=cell.python,
                    python_from=cell.python_from.value,
                    runtime_image=built.runtime, python_image=built.python, timeout=lab.options.timeout,
                    logdir=lab.logdir, workdir=lab.workdir, tracker=lab.engine,
                ),
            )  # fmt: skip
        key = memo_key("container", lab.engine.image_id(built.test), suite, volume)
        return lab.remembered(key, lambda: in_container(suite))

    def in_container(suite: str) -> SuiteResult:
        result, kept = run_in_container(
            lab.engine, run_id=lab.run_id, cell=cell.name, suite=suite, image=built.test, volume=volume,
            timeout=lab.options.timeout, logdir=lab.logdir, keep=lab.options.keep,
        )  # fmt: skip
        if kept:
            lab.keep(
                f"kept {kept} ({cell.name} {suite} {result.outcome.value}): "
                f"`docker start -ai {kept}` runs the "
                f"suite again in it; `docker run --rm -it --network none --mount type=volume,source={volume},"
                f"target=/opt/pytest,readonly --entrypoint /bin/sh {built.test}` opens a shell in the same "
                f"image; `docker rm -f {kept}` when done."
            )
        return result

    suites = _run_suites(lab, cell, chosen, say, one)
    suites += _not_run(cell.suites, chosen)
    return replace(
        record,
        outcome=cell_outcome(suites),
        suites=_ordered(suites, cell),
        image=built.runtime,
        base=base.how,
    )


# --- the whole run ---------------------------------------------------------------------------------------


def cancelled(cell: Cell, why: str) -> CellResult:
    return CellResult(
        cell=cell.name, outcome=Outcome.CANCELLED, message=why, family=cell.family.value, python=cell.python
    )


def run_matrix(
    lab: Lab,
    cells: Sequence[Cell],
    *,
    on_result: Callable[[list[CellResult]], None] | None = None,
) -> tuple[list[CellResult], bool]:
    """Run every cell; returns the records in table order and whether the run was interrupted.

    KeyboardInterrupt (Ctrl-C, or SIGTERM mapped to it by the CLI) stops the run: the processes this run
    started are killed and its containers removed at once, so the worker threads return quickly; cells
    that had not finished come back cancelled.
    """
    env = dict(os.environ)
    results: dict[str, CellResult] = {}
    interrupted = False
    try:
        lab.progress.say(f"run {lab.run_id}: {len(cells)} cells, {lab.options.jobs} at a time; logs in {lab.logdir}")
        if on_result:
            # A results.json from the first second on: a crash of the harness still leaves one.
            on_result(_with_pending(cells, results, "not started yet"))
        plans = base_plans(cells, lab.engine, env)
        # Bases and pytest folders are fetched side by side in the background while cells that need
        # nothing fetched start at once; a cell whose base is still coming waits for it in Bases.
        prefetch = _start_prefetch(lab, _prefetch_work(lab, cells, plans))
        with prefetch, cf.ThreadPoolExecutor(max_workers=lab.options.jobs, thread_name_prefix="cell") as pool:
            waiting = list(cells)
            running: dict[cf.Future[CellResult], Cell] = {}

            def is_ready(cell: Cell) -> bool:
                steps = plans.get(cell.name)
                return steps is None or steps[0].action in ("present", "unavailable") or lab.bases.done(steps)

            try:
                while waiting or running:
                    # Fill free slots as cells become ready: host cells run while bases are bootstrapped,
                    # container cells take the next free slots as soon as their base exists.
                    while len(running) < lab.options.jobs and waiting:
                        pick = pick_next(waiting, is_ready, anything_running=bool(running))
                        if pick is None:
                            break
                        waiting.remove(pick)
                        running[pool.submit(run_cell, lab, pick, plans.get(pick.name, ()))] = pick
                    done, _ = cf.wait(running, timeout=0.5, return_when=cf.FIRST_COMPLETED)
                    for future in done:
                        del running[future]
                        result = future.result()
                        results[result.cell] = result
                        if should_stop(result, fail_fast=lab.options.fail_fast):
                            why = f"{result.cell} came out {result.outcome.value}"
                            lab.request_stop(f"--fail-fast stopped the run after {why}")
                    if done and on_result:
                        on_result(_with_pending(cells, results, "not finished yet"))
            except KeyboardInterrupt:
                # Kill what the workers wait on first, or leaving the pools would wait for them.
                lab.request_stop("the run was interrupted")
                lab.engine.kill_all()
                pool.shutdown(wait=False, cancel_futures=True)
                prefetch.shutdown(wait=False, cancel_futures=True)
                raise
    except KeyboardInterrupt:
        interrupted = True
        lab.request_stop("the run was interrupted")
        lab.progress.say("interrupted: stopping everything this run started, then writing what finished")
        lab.cleanup()
    finally:
        lab.cleanup()
    final = _with_pending(cells, results, f"not finished: {lab.stop_reason or 'the run stopped'}")
    return final, interrupted


def _start_prefetch(lab: Lab, work: Sequence[Callable[[], object]]) -> cf.ThreadPoolExecutor:
    pool = cf.ThreadPoolExecutor(max_workers=max(1, min(8, len(work))), thread_name_prefix="prefetch")
    for item in work:
        pool.submit(item)
    return pool


def _with_pending(cells: Sequence[Cell], results: Mapping[str, CellResult], why: str) -> list[CellResult]:
    return [results.get(c.name) or cancelled(c, why) for c in cells]


def _prefetch_work(
    lab: Lab, cells: Sequence[Cell], plans: Mapping[str, tuple[BaseStep, ...]]
) -> list[Callable[[], object]]:
    """Bases and pytest folders first, all at once: they are network- and disk-bound (debootstrap, pip),
    so running them side by side beats queueing them behind --jobs."""
    distinct_bases: dict[tuple[BaseStep, ...], list[str]] = {}
    for cell in cells:
        if cell.name in plans:
            distinct_bases.setdefault(plans[cell.name], []).append(cell.name)
    work: list[Callable[[], object]] = []
    for steps, names in distinct_bases.items():
        if steps[0].action in ("present", "unavailable"):
            continue

        def get_base(steps: tuple[BaseStep, ...] = steps, names: list[str] = names) -> object:
            for name in names:
                lab.progress.update(name, f"base: {steps[0].action} {steps[0].image}")
            return lab.bases.obtain(steps)

        work.append(get_base)
    for python in sorted(
        {c.python for c in cells if c.family is not Family.HOST or hostcells.find_interpreter(c.python)}
    ):
        work.append(functools.partial(_try_pytest_folder, lab, python))
    return work


def _try_pytest_folder(lab: Lab, python: str) -> None:
    # A failure here is reported by the cell that needs the folder, with the cell's other details.
    with contextlib.suppress(Exception):
        lab.pytest.folder(python)
