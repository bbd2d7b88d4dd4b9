"""The time to the first answer in each cell (issue 15): probe_first_answer.py run on the cell's own
interpreter, in its runtime image (or its host venv), after every cell has finished its suites, one cell at
a time, so no suite competes with the measurement for the CPU. A measurement, not a verdict: it never
changes an outcome, and a probe that fails says why in the report instead of a number.

A measurement is remembered by what decides it (the runtime image's ID, or the host interpreter and the code,
and the probe itself), as a passed suite is: a rerun with nothing changed shows it with the run that made it
instead of spending a minute measuring the same thing again (`--no-cache` measures anew)."""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from .engine import LABEL, RUN_LABEL, ContainerSpec, Engine
from .model import CellResult, FirstAnswer

PROBE = Path(__file__).with_name("probe_first_answer.py")
RUNS = 11  # cold starts of each kind per cell, after one warm-up of each
PROBE_TIMEOUT = 180.0
DEMO_IN_IMAGE = "/opt/mcpserver/examples/demo.py"


@dataclass(frozen=True, kw_only=True)
class StartupTarget:
    """Where a cell's server starts: its runtime image, or (host cells) its venv's python and the demo."""

    image: str = ""
    python: str = ""
    demo: str = DEMO_IN_IMAGE
    inputs: str = ""  # what decides the measurement besides the probe (an image ID; an interpreter and the code)

    @property
    def key(self) -> str:
        """The remembered measurement's name; '' when the inputs are not known (nothing is remembered)."""
        if not self.inputs:
            return ""
        parts = (self.inputs, str(RUNS), PROBE.read_text(encoding="utf-8"), self.demo)
        return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def probe_argv(runs: int, target: str) -> tuple[str, ...]:
    """`-c PROBE RUNS TARGET`: the probe travels as an argument, so an image needs nothing added."""
    return ("-c", PROBE.read_text(encoding="utf-8"), str(runs), target)


def measure(engine: Engine, target: StartupTarget, *, run_id: str, runs: int = RUNS) -> FirstAnswer:
    if target.image:
        # The image's own interpreter ($MCP_PYTHON), as its entrypoint starts it, offline, as its user.
        argv = ("-c", 'exec "$MCP_PYTHON" "$@"', "probe", *probe_argv(runs, target.demo))
        spec = ContainerSpec(image=target.image, entrypoint="/bin/sh", remove=True, args=argv,
                             labels={LABEL: "1", RUN_LABEL: run_id})  # fmt: skip
        done = engine.run(spec, timeout=PROBE_TIMEOUT)
    else:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        done = engine.processes.command([target.python, *probe_argv(runs, target.demo)], timeout=PROBE_TIMEOUT,
                                        env=env)  # fmt: skip
    if not done.ok:
        why = "timed out" if done.timed_out else done.last_line()
        return FirstAnswer(error=f"the probe failed: {why}")
    try:
        samples = json.loads(done.output.strip().splitlines()[-1])
        server, bare = tuple(samples["server"]), tuple(samples["bare"])
    except (ValueError, KeyError, IndexError, TypeError):
        return FirstAnswer(error=f"the probe printed no measurement: {done.last_line()}")
    return FirstAnswer(runs=len(server), median_ms=statistics.median(server), bare_median_ms=statistics.median(bare),
                       samples_ms=server, bare_samples_ms=bare)  # fmt: skip


def measure_all(engine: Engine, results: Sequence[CellResult], targets: Mapping[str, StartupTarget], *,
                run_id: str, memo: Path | None = None, on_cell: Callable[[str], None] | None = None,
                stop: threading.Event | None = None) -> Iterator[CellResult]:  # fmt: skip
    """Each cell that has somewhere to start, with its measurement (remembered in `memo`, or made now), one
    cell at a time, until `stop`."""
    for result in results:
        target = targets.get(result.cell)
        if target is None or (stop is not None and stop.is_set()):
            continue
        found = _remembered(memo, target.key)
        if found is None:
            if on_cell is not None:
                on_cell(result.cell)
            found = replace(measure(engine, target, run_id=run_id), produced_by=run_id)
            _remember(memo, target.key, found)
        yield replace(result, first_answer=found)


def _remembered(memo: Path | None, key: str) -> FirstAnswer | None:
    path = memo / f"{key}.json" if memo is not None and key else None
    if path is None or not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return FirstAnswer(**{**data, "samples_ms": tuple(data["samples_ms"]),
                              "bare_samples_ms": tuple(data["bare_samples_ms"]), "cached": True})  # fmt: skip
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _remember(memo: Path | None, key: str, found: FirstAnswer) -> None:
    if memo is None or not key or found.error:  # a failed probe is tried again next time
        return
    memo.mkdir(parents=True, exist_ok=True)
    (memo / f"{key}.json").write_text(json.dumps(asdict(found)) + "\n")
