"""One cell in, one record out: base -> build -> for each suite: key -> run (or an identical earlier pass)
-> judge. `run_cell` never raises: whatever breaks becomes the cell's outcome (a step that cannot give
the cell what it needs raises CellProblem; anything else is a harness error with its traceback)."""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from . import arches, budgets
from . import host as hostcells
from .attempts import volume_name
from .bases import BaseAction, Bases, BaseStep, gather_facts, plan_base
from .build import STAGES, Builder, BuildPlan, Images, Unbuildable, plan_build
from .engine import LABEL, RUN_LABEL, ContainerSpec, Engine
from .errors import CellProblem
from .install import DistributionError, Distributions
from .memo import SuiteMemo, files_digest
from .model import Cell, CellResult, Family, Outcome, Phase, Suite, SuiteResult
from .outcomes import cancelled_if_interrupted, cell_outcome
from .plan import Selection
from .processes import Processes, tail
from .progress import Progress
from .startup import StartupTarget
from .stopping import Stopping
from .suites import (
    IN_CONTAINER,
    ON_HOST,
    Attempts,
    ContainerCell,
    HostCell,
    PytestFolder,
    Runner,
    Surroundings,
    outcome_of,
)
from .wheels import PytestFolders

Say = Callable[[str], None]


@dataclass(frozen=True, kw_only=True)
class CellTools:
    """What one cell's steps use, and nothing else (lab.Lab.tools makes it once per run)."""

    engine: Engine
    processes: Processes
    bases: Bases
    builder: Builder
    pytest: PytestFolders
    distributions: Distributions
    memo: SuiteMemo
    attempts: Attempts
    surroundings: Surroundings
    selection: Selection
    root: Path
    cache: Path
    stopping: Stopping
    progress: Progress
    startup_targets: dict[str, StartupTarget]  # where each finished cell's server starts, for the first answers
    began: float = 0.0  # time.monotonic() when the run began: a cell's record says when it started after it


def base_plans(cells: Sequence[Cell], engine: Engine, env: Mapping[str, str], *, store: bool = False
               ) -> dict[str, tuple[BaseStep, ...]]:  # fmt: skip
    containers = tuple(c for c in cells if c.family.in_container)
    if not containers:
        return {}
    facts = gather_facts(engine, containers, env, store=store)
    return {c.name: plan_base(c, facts) for c in containers}


def known_unavailable(cell: Cell, plans: Mapping[str, tuple[BaseStep, ...]], env: Mapping[str, str], *,
                      engine: Engine, root: Path, unbuildable: Unbuildable) -> str:  # fmt: skip
    """Why a cell cannot run here, as far as can be known before it starts ('' when it may run): no such
    interpreter on this machine, no way to its base, or what its builder stage said when it was last built
    from exactly these inputs (build.Unbuildable). A run and --list ask the same."""
    if cell.family is Family.HOST:
        return "" if hostcells.find_interpreter(cell.python, env) else f"no python{cell.python} on PATH or in pyenv"
    unseen = unseen_cpuinfo(cell, engine) or missing_emulator(cell, engine)
    if unseen:
        return unseen
    steps = plans.get(cell.name, ())
    if steps and steps[0].action is BaseAction.UNAVAILABLE:
        return steps[0].reason
    plan = _builder_plan(cell, steps, engine, root)
    return unbuildable.reason(plan.tag("builder")) if plan else ""


def unseen_cpuinfo(cell: Cell, engine: Engine) -> str:
    """Why a variant's /proc/cpuinfo cannot reach its containers ('' when it can, or it has none)."""
    if not cell.cpu_cache_kb or engine.is_local():
        return ""
    return (f"its containers are shown a CPU cache of {cell.cpu_cache_kb} KB through a /proc/cpuinfo made on this "
            f"machine and bind-mounted, which the engine at {engine.endpoint()} cannot see")


def missing_emulator(cell: Cell, engine: Engine) -> str:
    """Why a cell of another architecture cannot run here ('' when it can, or it is of the machine's own): read
    from this machine's binfmt_misc, which a local engine's containers share; a remote engine's kernel is not
    seen from here, and its build says so if it cannot."""
    return arches.binfmt_problem(cell.arch) if cell.arch and engine.is_local() else ""


def _builder_plan(cell: Cell, steps: tuple[BaseStep, ...], engine: Engine, root: Path) -> BuildPlan | None:
    """The build plan of a cell that compiles its Python, once its base is here (its tags need the base's ID)."""
    if not cell.compiles_python or not steps or steps[0].action is not BaseAction.PRESENT:
        return None
    base_id = engine.image_id(steps[0].image)
    return plan_build(cell, root, steps[0].image, base_id) if base_id else None


def availability(cell: Cell, plans: Mapping[str, tuple[BaseStep, ...]], env: Mapping[str, str], *, engine: Engine,
                 root: Path, unbuildable: Unbuildable) -> tuple[str, str]:  # fmt: skip
    """(available, unavailable or unchecked; how or why) for --list, without building anything. Unchecked: a
    cell whose Python is compiled from the base's source packages, never built here from these inputs, so
    whether the mirror serves that source is known only once its builder stage runs."""
    why = known_unavailable(cell, plans, env, engine=engine, root=root, unbuildable=unbuildable)
    if why:
        return "unavailable", why
    if cell.family is Family.HOST:
        return "available", hostcells.find_interpreter(cell.python, env)
    steps = plans[cell.name]
    how = " else ".join(s.action.value for s in steps if s.action is not BaseAction.UNAVAILABLE)
    detail = f"{how} ({steps[0].reason})"
    plan = _builder_plan(cell, steps, engine, root)
    if cell.compiles_python and not (plan and engine.image_id(plan.tag("builder"))):
        return "unchecked", (f"{detail}; not checked until built: the builder stage compiles {cell.interpreter} from "
                             "the base's source packages, which its mirror may not serve")  # fmt: skip
    return "available", detail


class Timeline:
    """The phases of one cell's run as its steps announce them: each lasts until the next begins."""

    def __init__(self) -> None:
        self.began = time.monotonic()
        self._marks: list[tuple[str, float]] = []

    def enter(self, phase: str) -> None:
        self._marks.append((phase, time.monotonic()))

    def phases(self) -> tuple[Phase, ...]:
        ends = [at for _, at in self._marks[1:]] + [time.monotonic()]
        return tuple(Phase(name=name, seconds=round(end - at, 3)) for (name, at), end in zip(self._marks, ends))


def run_cell(tools: CellTools, cell: Cell, steps: tuple[BaseStep, ...]) -> CellResult:
    timeline = Timeline()
    started = timeline.began
    stopping = tools.stopping

    def say(phase: str) -> None:
        timeline.enter(phase)
        tools.progress.update(cell.name, phase)

    record = CellResult(cell=cell.name, outcome=Outcome.ERROR, family=cell.family.value, python=cell.python,
                        arch=cell.arch or arches.native(), release=cell.release, interpreter=cell.slug,
                        started=round(started - tools.began, 3) if tools.began else 0.0)  # fmt: skip
    chosen = [s for s in cell.suites if s in tools.selection.suites_for(cell.name)]
    if not tools.selection.asked and budgets.slowdown(cell.arch) > 1.0:
        chosen = [s for s in chosen if s in budgets.UNDER_EMULATION]
    try:
        if stopping.stop.is_set():
            result = replace(record, outcome=Outcome.CANCELLED, message=f"not run: {stopping.reason}")
        elif cell.family is Family.HOST:
            result = _host_cell(tools, cell, chosen, record, say)
        else:
            result = _container_cell(tools, cell, steps, chosen, record, say)
    except CellProblem as problem:
        result = replace(record, outcome=problem.outcome, message=problem.message, log_tail=problem.log_tail)
        if stopping.interrupted.is_set() and problem.outcome is Outcome.ERROR:
            result = replace(result, outcome=Outcome.CANCELLED, message=f"cancelled: {stopping.reason}")
    except Exception as exc:  # a harness bug must become this cell's error, not end the run
        result = replace(record, message=f"harness error: {exc}", log_tail=tail(traceback.format_exc()))
        if stopping.interrupted.is_set():  # the interrupt killed what it was waiting for (a probe, a venv)
            result = replace(result, outcome=Outcome.CANCELLED, message=f"cancelled: {stopping.reason}")
    result = replace(result, duration=time.monotonic() - started, phases=timeline.phases())
    tools.progress.update(cell.name, result.outcome.value, done=True)
    return result


def _finish(record: CellResult, cell: Cell, suites: list[SuiteResult], found: hostcells.Facts, **fields: str
            ) -> CellResult:  # fmt: skip
    order = {s: i for i, s in enumerate(cell.suites)}
    ordered = tuple(sorted(suites, key=lambda s: order[s.suite]))
    return replace(record, outcome=cell_outcome(ordered), suites=ordered, python_version=found.version,
                   implementation=found.implementation, flavour=found.flavour, machine=found.machine,
                   byteorder=found.byteorder, maxsize=found.maxsize, **fields)  # type: ignore[arg-type]


def _run_suites(tools: CellTools, cell: Cell, chosen: Sequence[Suite], say: Say,
                runner: Callable[[Suite], Runner]) -> list[SuiteResult]:  # fmt: skip
    stopping = tools.stopping
    emulated = budgets.slowdown(cell.arch) > 1.0
    cut = f"not run under emulation on {cell.arch} unless asked for (--suite all)" if emulated else ""
    results = [SuiteResult(suite=s, outcome=Outcome.NOT_RUN, message=cut if s in tools.selection.suites else "")
               for s in cell.suites if s not in chosen]  # fmt: skip
    for suite in chosen:
        if stopping.stop.is_set():
            results.append(SuiteResult(suite=suite, outcome=Outcome.CANCELLED, message=f"not run: {stopping.reason}"))
        elif suite.has_tests_dir and not (tools.root / "tests" / suite.value).is_dir():
            message = f"tests/{suite.value} does not exist in {tools.root}; nothing to run"
            results.append(SuiteResult(suite=suite, outcome=Outcome.ERROR, message=message))
        else:
            say(f"suite {suite.value}")
            done = _outcome(tools, cell, suite, runner)
            results.append(cancelled_if_interrupted(done, interrupted=stopping.interrupted.is_set()))
    return results


def _outcome(tools: CellTools, cell: Cell, suite: Suite, runner: Callable[[Suite], Runner]) -> SuiteResult:
    """The suite's runner from the table, and what came of it (suites.outcome_of)."""
    try:
        made = runner(suite)
    except DistributionError as exc:  # the wheel could not be built: every install suite says why
        return SuiteResult(suite=suite, outcome=Outcome.ERROR, message=str(exc))
    return outcome_of(made, tools.surroundings, tools.memo, tools.attempts, cell.name)


def _host_cell(tools: CellTools, cell: Cell, chosen: Sequence[Suite], record: CellResult, say: Say) -> CellResult:
    say("finding interpreter")
    interpreter = hostcells.find_interpreter(cell.python)
    if not interpreter:
        raise CellProblem(Outcome.UNAVAILABLE, f"no python{cell.python} on PATH or in pyenv")
    say("pytest folder")
    folder = tools.pytest.folder(cell.python)
    root = tools.root
    say("venv")
    venv_python = hostcells.prepare_venv(tools.processes, interpreter, cell.python, root, tools.cache / "host")
    code = files_digest(
        [root / "server/mcpserver", root / "server/examples", root / "pyproject.toml"]
        + [p for p in sorted((root / "tests").glob("*")) if p.is_file()]
    )
    pytest = PytestFolder(folder=folder, wheels=",".join(tools.pytest.wheels(folder)), pip=tools.pytest.pip(folder))
    record = replace(record, notes=without_add_ons(folder))
    host = HostCell(cell=cell, interpreter=interpreter, venv_python=venv_python, code=code, pytest=pytest, root=root,
                    distribution=tools.distributions.get)  # fmt: skip
    suites = _run_suites(tools, cell, chosen, say, lambda suite: ON_HOST[suite](host, suite))
    tools.startup_targets[cell.name] = StartupTarget(python=str(venv_python), inputs=f"{interpreter}\0{code}",
                                                     demo=str(root / "server/examples/demo.py"))  # fmt: skip
    say("interpreter facts")
    found = hostcells.facts(tools.processes, venv_python)
    return _finish(record, cell, suites, found, base=f"host {interpreter}")


def _container_cell(tools: CellTools, cell: Cell, steps: tuple[BaseStep, ...], chosen: Sequence[Suite],
                    record: CellResult, say: Say) -> CellResult:  # fmt: skip
    unseen = unseen_cpuinfo(cell, tools.engine) or missing_emulator(cell, tools.engine)
    if unseen:
        raise CellProblem(Outcome.UNAVAILABLE, unseen)
    say("base")
    base = tools.bases.obtain(steps)
    plan = plan_build(cell, tools.root, base.image, tools.engine.image_id(base.image) or "")
    built = tools.builder.build(plan, on_stage=lambda stage: say(f"build {stage}"))
    pytest = None
    if any(s.has_tests_dir for s in chosen):
        say("pytest folder")
        folder = tools.pytest.folder(cell.python, cell.implementation)
        wheels = tools.pytest.wheels(folder)
        pytest = PytestFolder(folder=folder, volume=volume_name(folder.name, wheels), wheels=",".join(wheels),
                              pip=tools.pytest.pip(folder))  # fmt: skip
        record = replace(record, notes=without_add_ons(folder))
    ids = Images(**{stage: tools.engine.image_id(getattr(built, stage)) or "" for stage in STAGES})
    cut = not tools.selection.asked and budgets.slowdown(cell.arch) > 1.0
    where = ContainerCell(cell=cell, images=built, ids=ids, pytest=pytest, distribution=tools.distributions.get,
                          scope=budgets.UNDER_EMULATION if cut else {})  # fmt: skip
    suites = _run_suites(tools, cell, chosen, say, lambda suite: IN_CONTAINER[suite](where, suite))
    tools.startup_targets[cell.name] = StartupTarget(image=built.runtime, inputs=ids.runtime)
    say("interpreter facts")
    found = interpreter_facts(tools, cell, built.python)
    return _finish(record, cell, suites, found, image=built.runtime, base=base.how, base_image=base.image,
                   base_sha256=base.sha256)  # fmt: skip


def without_add_ons(folder: Path) -> tuple[str, ...]:
    """What the cell's wheel folder lacks of what users deploy with the server, and why (wheels.ADD_ONS)."""
    return tuple(f"without {name}: {why}" for name, why in PytestFolders.missing(folder).items())


def interpreter_facts(tools: CellTools, cell: Cell, image: str) -> hostcells.Facts:
    """What the interpreter in an image says it is (3.9.2; CPython; free-threaded), asked once per image ID
    and remembered."""
    image_id = tools.engine.image_id(image) or image
    # "-2": what the machine says joined the facts; those remembered before are asked again.
    remembered = tools.cache / "interpreters" / (image_id.replace(":", "_") + "-2.json")
    if remembered.is_file():
        return hostcells.Facts.parse(remembered.read_text())
    spec = ContainerSpec(image=image, entrypoint=cell.interpreter, args=("-c", hostcells.FACTS_PROBE), remove=True,
                         labels={LABEL: "1", RUN_LABEL: tools.surroundings.run_id})  # fmt: skip
    done = tools.engine.run(spec, timeout=60)
    found = hostcells.Facts.parse(done.output) if done.ok else hostcells.Facts()
    if found.version:
        remembered.parent.mkdir(parents=True, exist_ok=True)
        remembered.write_text(done.output.strip().splitlines()[-1] + "\n")
    return found
