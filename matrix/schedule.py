"""The scheduler: cells in parallel up to --jobs, bases and pytest folders fetched in the background, a
stop on request (fail-fast: running cells finish; interrupt: their processes are killed and the workers
return at once), and on the way out every container this run labelled removed, whatever happened.

What finished is kept: after an interrupt, suites that completed keep their results, cells already known
unavailable stay unavailable, and only unfinished work is `cancelled`.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import functools
import os
import time
from collections.abc import Callable, Mapping, Sequence

from . import arches
from . import host as hostcells
from .bases import BaseStep
from .build import plan_build
from .cell import base_plans, known_unavailable, run_cell
from .lab import INTERRUPT_GRACE, Lab, stores
from .model import Cell, CellResult, Family, Implementation, Outcome
from .outcomes import should_stop
from .plan import pick_next
from .startup import measure_all

OnResult = Callable[[list[CellResult]], None]


def run_matrix(lab: Lab, cells: Sequence[Cell], *, on_result: OnResult | None = None) -> list[CellResult]:
    """Run every cell; returns the records in table order (lab.interrupted says whether it was cut short)."""
    results: dict[str, CellResult] = {}
    plans: dict[str, tuple[BaseStep, ...]] = {}
    known: dict[str, str] = {}  # cell -> why it cannot run here, known before it starts
    lab.progress.say(f"run {lab.run_id}: {len(cells)} cells, {lab.options.jobs} at a time; logs in {lab.logdir}")
    try:
        if on_result:
            # A results.json from the first second on: a crash of the harness still leaves one.
            on_result(_with_pending(cells, results, known, "not started yet"))
        env = dict(os.environ)
        plans.update(base_plans(cells, lab.engine, env, store=bool(stores(lab.options))))
        if lab.interrupted.is_set():  # cut short while planning: what it found is not to be trusted
            plans.clear()
        for cell in cells:
            known[cell.name] = known_unavailable(cell, plans, env, engine=lab.engine, root=lab.options.root,
                                                 unbuildable=lab.builder.unbuildable)  # fmt: skip
        _schedule(lab, cells, plans, results, known, on_result)
        if not lab.stop.is_set():
            _first_answers(lab, cells, results, known, on_result)
    finally:
        removed = lab.cleanup()
        if lab.interrupted.is_set():
            lab.progress.say(f"interrupted: stopped what this run started ({removed} containers removed)")
    return _with_pending(cells, results, known, f"not finished: {lab.stop_reason or 'the run stopped'}")


def _schedule(lab: Lab, cells: Sequence[Cell], plans: Mapping[str, tuple[BaseStep, ...]],
              results: dict[str, CellResult], known: Mapping[str, str], on_result: OnResult | None
              ) -> None:  # fmt: skip
    # Bases and pytest folders are fetched side by side in the background while cells that need nothing
    # fetched start at once; a cell whose base is still coming waits for it in Bases.
    prefetch = _start_prefetch(_prefetch_work(lab, cells, plans))
    pool = cf.ThreadPoolExecutor(max_workers=lab.options.jobs, thread_name_prefix="cell")
    waiting = list(cells)
    tools = lab.tools()
    running: dict[cf.Future[CellResult], Cell] = {}
    interrupted_at = 0.0

    def is_ready(cell: Cell) -> bool:
        steps = plans.get(cell.name)
        if cell.name in lab.compiling:  # built in the background (_compile): ready once its images are
            return False
        return steps is None or not steps[0].action.makes or lab.bases.done(steps)

    try:
        while (waiting and not lab.stop.is_set()) or running:
            while len(running) < lab.options.jobs and waiting and not lab.stop.is_set():
                pick = pick_next(waiting, is_ready, anything_running=bool(running), durations=lab.options.durations,
                                 running=list(running.values()), slots=lab.options.jobs)  # fmt: skip
                if pick is None:
                    break
                waiting.remove(pick)
                running[pool.submit(run_cell, tools, pick, plans.get(pick.name, ()))] = pick
            done, _ = cf.wait(running, timeout=0.5, return_when=cf.FIRST_COMPLETED)
            for future in done:
                result = future.result()
                del running[future]
                results[result.cell] = result
                if should_stop(result, fail_fast=lab.options.fail_fast):
                    lab.request_stop(f"--fail-fast stopped the run after {result.cell} came out {result.outcome.value}")
            if done and on_result:
                on_result(_with_pending(cells, results, known, "not finished yet"))
            if lab.interrupted.is_set():
                interrupted_at = interrupted_at or time.monotonic()
                lab.processes.kill_all()  # anything a worker started after the signal
                if time.monotonic() - interrupted_at > INTERRUPT_GRACE:
                    break  # a worker stuck outside a tracked process: its cell comes back cancelled
    finally:
        wait = not lab.interrupted.is_set()
        prefetch.shutdown(wait=wait, cancel_futures=True)
        pool.shutdown(wait=wait, cancel_futures=True)


def _first_answers(lab: Lab, cells: Sequence[Cell], results: dict[str, CellResult], known: Mapping[str, str],
                   on_result: OnResult | None) -> None:  # fmt: skip
    """Measured after every cell finished, one at a time: nothing else competes for the CPU."""

    def say(name: str) -> None:
        lab.progress.update(name, "measuring the first answer")

    began = time.monotonic()
    ordered = [results[c.name] for c in cells if c.name in results]
    memo = lab.options.cache / "first-answer" if lab.options.use_cache else None
    for measured in measure_all(lab.engine, ordered, lab.startup_targets, run_id=lab.run_id, memo=memo, on_cell=say,
                                stop=lab.stop):  # fmt: skip
        results[measured.cell] = measured
        lab.progress.update(measured.cell, measured.outcome.value, done=True)
    lab.measuring = time.monotonic() - began
    if on_result:
        on_result(_with_pending(cells, results, known, "not finished yet"))


def _start_prefetch(work: Sequence[Callable[[], object]]) -> cf.ThreadPoolExecutor:
    # All at once: each is a download, a bootstrap or a build waiting for its base, none holds a job slot.
    pool = cf.ThreadPoolExecutor(max_workers=max(1, len(work)), thread_name_prefix="prefetch")
    for item in work:
        pool.submit(item)
    return pool


def _with_pending(cells: Sequence[Cell], results: Mapping[str, CellResult], known: Mapping[str, str],
                  why: str) -> list[CellResult]:  # fmt: skip
    """Every cell's record: its result, else unavailable when that was known before it started (`known`),
    else cancelled with `why`."""
    out = []
    for cell in cells:
        found = results.get(cell.name)
        if found is None:
            reason = known.get(cell.name, "")
            outcome = Outcome.UNAVAILABLE if reason else Outcome.CANCELLED
            found = CellResult(cell=cell.name, outcome=outcome, message=reason or why, family=cell.family.value,
                               python=cell.python, arch=cell.arch or arches.native(), release=cell.release,
                               interpreter=cell.slug)  # fmt: skip
        out.append(found)
    return out


def _prefetch_work(lab: Lab, cells: Sequence[Cell], plans: Mapping[str, tuple[BaseStep, ...]]
                   ) -> list[Callable[[], object]]:  # fmt: skip
    """Bases and pytest folders first, all at once: they are network- and disk-bound (mmdebstrap, pip),
    so running them side by side beats queueing them behind --jobs."""
    distinct_bases: dict[tuple[BaseStep, ...], list[str]] = {}
    for cell in cells:
        if cell.name in plans:
            distinct_bases.setdefault(plans[cell.name], []).append(cell.name)
    work: list[Callable[[], object]] = []
    for steps, names in distinct_bases.items():
        if not steps[0].action.makes:
            continue

        def get_base(steps: tuple[BaseStep, ...] = steps, names: list[str] = names) -> object:
            for name in names:
                lab.progress.update(name, f"base: {steps[0].action.value} {steps[0].image}")
            with contextlib.suppress(Exception):  # the cell that needs it reports what broke
                return lab.bases.obtain(steps)
            return None

        work.append(get_base)
    compiled = [cell for cell in cells if cell.compiles_python and not cell.like and plans.get(cell.name)]
    lab.compiling.update(cell.name for cell in compiled)
    work += [functools.partial(_compile, lab, cell, plans[cell.name]) for cell in compiled]
    pythons = {(c.python, c.implementation) for c in cells
               if c.family is not Family.HOST or hostcells.find_interpreter(c.python)}  # fmt: skip
    work += [functools.partial(_try_pytest_folder, lab, *python) for python in sorted(pythons)]
    return work


def _compile(lab: Lab, cell: Cell, steps: tuple[BaseStep, ...]) -> None:
    """A cell that compiles its Python has its images built as soon as its base is there, job slot or none: the
    compile is a cold run's longest step. The cell, when it starts, finds them built or waits for the build (the
    builder builds a tag once). What breaks is the cell's to report."""
    try:
        base = lab.bases.obtain(steps)
        if lab.stop.is_set() or known_unavailable(cell, {cell.name: steps}, dict(os.environ), engine=lab.engine,
                                                  root=lab.options.root, unbuildable=lab.builder.unbuildable):
            return
        lab.progress.update(cell.name, "build (in the background)")
        lab.builder.build(plan_build(cell, lab.options.root, base.image, lab.engine.image_id(base.image) or ""))
    except Exception:  # the cell, which runs the same build again, reports it
        return
    finally:
        lab.compiling.discard(cell.name)


def _try_pytest_folder(lab: Lab, python: str, implementation: Implementation) -> None:
    # A failure here is reported by the cell that needs the folder, with the cell's other details.
    with contextlib.suppress(Exception):
        lab.pytest.folder(python, implementation)
