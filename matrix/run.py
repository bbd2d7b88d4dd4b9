"""Run one suite and turn what happened into a SuiteResult.

In a container: a fresh container of the test image per suite, `--network none`, as the image's non-root
user, pytest mounted read-only from a volume, the harness's own timeout; the JUnit XML is copied out with
`docker cp` (no bind mounts, so a remote engine named by DOCKER_HOST works the same). On the host: the
cell's venv python, the same pytest folder on PYTHONPATH. The images suite: the testinfra checks, run
from the host by the harness's own interpreter.
"""

from __future__ import annotations

import hashlib
import io
import os
import sys
import tarfile
import threading
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, replace
from pathlib import Path

from .engine import LABEL, RUN_LABEL, TIMED_OUT, Engine, run_command, tail
from .junit import parse
from .model import Outcome, SuiteResult
from .plan import pytest_outcome
from .wheels import MANIFEST

LAB_ROOT = Path(__file__).resolve().parent.parent
PYTEST_MOUNT = "/opt/pytest"
# -v: when a suite dies without JUnit XML (killed, out of memory), the log tail names the test it was in.
PYTEST_ARGS = ("-p", "no:cacheprovider", "-rfE", "-v")
# A runaway test must not take the host down with it (seen: 24 GB before the kernel's OOM killer).
MEMORY_LIMIT = "4g"
COMPLETE = ".mcplab-complete"


@dataclass(frozen=True, kw_only=True)
class Attempt:
    """What one pytest process left behind."""

    returncode: int
    output: str
    junit: str
    duration: float
    timeout: float


def judge(suite: str, attempt: Attempt) -> SuiteResult:
    """Attempt in, result out: the outcome rules in one place (pure; see tests/lab/test_run.py)."""
    if attempt.returncode == TIMED_OUT:
        return SuiteResult(
            suite=suite,
            outcome=Outcome.TIMEOUT,
            duration=attempt.duration,
            message=f"did not finish within {attempt.timeout:.0f}s; the harness killed it",
            log_tail=tail(attempt.output),
        )
    try:
        counts = parse(attempt.junit) if attempt.junit else None
    except ET.ParseError as exc:
        counts = None
        broken = f"its JUnit XML is unreadable ({exc})"
    else:
        broken = "it wrote no JUnit XML"
    if counts is None:
        return SuiteResult(
            suite=suite,
            outcome=Outcome.ERROR,
            duration=attempt.duration,
            message=f"pytest exited {attempt.returncode} and {broken}",
            log_tail=tail(attempt.output),
        )
    outcome = pytest_outcome(attempt.returncode, counts.failed, counts.errors, counts.tests)
    message = ""
    if outcome is Outcome.ERROR:
        message = "no tests were collected" if counts.tests == 0 else f"pytest exited {attempt.returncode}"
    return SuiteResult(
        suite=suite,
        outcome=outcome,
        tests=counts.tests,
        passed=counts.passed,
        failed=counts.failed,
        errors=counts.errors,
        skipped=counts.skipped,
        duration=attempt.duration,
        failures=counts.failures,
        message=message,
        log_tail=tail(attempt.output) if outcome is not Outcome.PASSED else "",
        junit_xml=attempt.junit,
    )


def container_name(run_id: str, cell: str, suite: str) -> str:
    return f"mcplab-{run_id}-{cell}-{suite}"


def labels(run_id: str) -> list[str]:
    return ["--label", f"{LABEL}=1", "--label", f"{RUN_LABEL}={run_id}"]


def pytest_volume(engine: Engine, python: str, folder: Path, wheels: list[str], image: str) -> str:
    """A named volume holding the pytest folder, filled once per engine with `docker cp` (which reaches
    a remote engine too) and mounted read-only by every suite container of that Python.

    The volume counts as filled only once COMPLETE is in it, copied last: an interrupted fill is redone.
    """
    key = hashlib.sha256("\n".join(sorted(wheels)).encode()).hexdigest()[:12]
    name = f"mcplab-pytest-py{python}-{key}"
    with _VOLUME_LOCKS_GUARD:
        lock = _VOLUME_LOCKS.setdefault(name, threading.Lock())
    with lock:  # cells of one Python fill their shared volume once
        return _fill_volume(engine, name, folder, image)


_VOLUME_LOCKS: dict[str, threading.Lock] = {}
_VOLUME_LOCKS_GUARD = threading.Lock()


def _fill_volume(engine: Engine, name: str, folder: Path, image: str) -> str:
    holder = f"mcplab-fill-{name}-{os.getpid()}"
    engine.run(["volume", "create", "--label", f"{LABEL}=1", name], timeout=60)
    try:
        made = engine.run(
            ["create", "--name", holder, "--label", f"{LABEL}=1", "-v", f"{name}:{PYTEST_MOUNT}", image],
            timeout=120,
        )
        if made.returncode != 0:
            raise RuntimeError(f"cannot create a container to fill {name}: {tail(made.output, 3)}")
        if engine.run_bytes(["cp", f"{holder}:{PYTEST_MOUNT}/{COMPLETE}", "-"], timeout=60):
            return name
        for source in (f"{folder}/.", str(folder / MANIFEST)):
            # The manifest goes again under the name COMPLETE, last, as the mark of a full copy.
            target = f"{holder}:{PYTEST_MOUNT}/" if source.endswith(".") else f"{holder}:{PYTEST_MOUNT}/{COMPLETE}"
            copied = engine.run(["cp", source, target], timeout=300)
            if copied.returncode != 0:
                raise RuntimeError(f"cannot fill {name}: {tail(copied.output, 3)}")
        return name
    finally:
        engine.run(["rm", "-f", holder], timeout=120)


def run_in_container(
    engine: Engine,
    *,
    run_id: str,
    cell: str,
    suite: str,
    image: str,
    volume: str,
    timeout: float,
    logdir: Path,
    keep: bool = False,
) -> tuple[SuiteResult, str]:
    """Run tests/<suite> in a fresh container. Returns the result and, when kept for debugging, the
    container's name."""
    name = container_name(run_id, cell, suite)
    junit_path = f"/tmp/junit-{suite}.xml"
    argv = [
        "run", "--name", name, *labels(run_id), "--network", "none", "--user", "mcp",
        "--memory", MEMORY_LIMIT, "--memory-swap", MEMORY_LIMIT, "--pids-limit", "4096",
        "--mount", f"type=volume,source={volume},target={PYTEST_MOUNT},readonly",
        image, f"tests/{suite}", *PYTEST_ARGS, f"--junitxml={junit_path}",
    ]  # fmt: skip
    log = logdir / f"{cell}-{suite}.log"
    started = time.monotonic()
    done = engine.run(argv, timeout=timeout, log=str(log))
    duration = time.monotonic() - started
    if done.returncode == TIMED_OUT:
        # Killing the client leaves the container running: stop it here.
        engine.run(["kill", name], timeout=60)
    junit = ""
    output = done.output
    if done.returncode != TIMED_OUT:
        copied = engine.run_bytes(["cp", f"{name}:{junit_path}", "-"], timeout=120)
        junit = _file_from_tar(copied)
        oom = engine.run(["inspect", "--format", "{{.State.OOMKilled}}", name], timeout=60).output.strip()
        if oom == "true":
            output += f"\nmcplab: the container was killed for using more than {MEMORY_LIMIT} of memory\n"
    attempt = Attempt(returncode=done.returncode, output=output, junit=junit, duration=duration, timeout=timeout)
    result = judge(suite, attempt)
    if "mcplab: the container was killed for using more" in output:
        result = replace(
            result,
            message=f"killed: out of memory (limit {MEMORY_LIMIT}); the log tail shows the test it was in",
        )
    kept = ""
    if keep and result.outcome is not Outcome.PASSED:
        kept = name
    else:
        engine.run(["rm", "-f", "-v", name], timeout=120)
    return result, kept


def _file_from_tar(data: bytes) -> str:
    if not data:
        return ""
    try:
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            for member in tar:
                handle = tar.extractfile(member)
                if handle is not None:
                    return handle.read().decode("utf-8", "replace")
    except tarfile.TarError:
        return ""
    return ""


def run_on_host(
    *,
    venv_python: Path,
    pytest_folder: Path,
    root: Path,
    cell: str,
    suite: str,
    timeout: float,
    logdir: Path,
    workdir: Path,
    tracker: Engine | None = None,
) -> SuiteResult:
    junit = workdir / f"{cell}-{suite}.xml"
    junit.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONPATH"] = str(pytest_folder)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    argv = [str(venv_python), "-m", "pytest", f"tests/{suite}", *PYTEST_ARGS, f"--junitxml={junit}"]
    return _run_pytest(suite, argv, junit=junit, env=env, cwd=root, timeout=timeout,
                       log=logdir / f"{cell}-{suite}.log", tracker=tracker)


def _run_pytest(
    suite: str,
    argv: list[str],
    *,
    junit: Path,
    env: dict[str, str],
    cwd: Path,
    timeout: float,
    log: Path,
    tracker: Engine | None,
) -> SuiteResult:
    """Run one pytest process on the host under the harness's timeout, and judge it by its JUnit XML."""
    started = time.monotonic()
    done = run_command(argv, timeout=timeout, log=str(log), env=env, cwd=str(cwd), tracker=tracker)
    duration = time.monotonic() - started
    text = junit.read_text(encoding="utf-8", errors="replace") if junit.exists() else ""
    return judge(
        suite,
        Attempt(returncode=done.returncode, output=done.output, junit=text, duration=duration, timeout=timeout),
    )


def run_image_checks(
    *,
    run_id: str,
    cell: str,
    family: str,
    python: str,
    python_from: str,
    runtime_image: str,
    python_image: str,
    timeout: float,
    logdir: Path,
    workdir: Path,
    tracker: Engine | None = None,
) -> SuiteResult:
    """The testinfra checks in tests/images, run from the host against the cell's runtime image."""
    junit = workdir / f"{cell}-images.xml"
    junit.unlink(missing_ok=True)
    env = dict(os.environ)
    env["LAB_RUN_ID"] = run_id
    argv = [
        sys.executable, "-m", "pytest", str(LAB_ROOT / "tests" / "images"), *PYTEST_ARGS,
        "--confcutdir", str(LAB_ROOT / "tests" / "images"), f"--junitxml={junit}",
        f"--image={runtime_image}", f"--python-image={python_image}", f"--cell-python={python}",
        f"--python-from={python_from}", f"--family={family}",
    ]  # fmt: skip
    return _run_pytest("images", argv, junit=junit, env=env, cwd=LAB_ROOT, timeout=timeout,
                       log=logdir / f"{cell}-images.log", tracker=tracker)
