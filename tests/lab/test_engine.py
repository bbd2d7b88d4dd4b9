"""The harness against the real engine: fixture trees (a stub server, tiny suites) run through the real
CLI, so these tests depend on nothing the server or its suites contain. Marked `engine`."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from matrix.engine import LABEL, Engine

from .conftest import FIXTURES, LAB_ROOT

pytestmark = pytest.mark.engine

RUN_MATRIX = [sys.executable, str(LAB_ROOT / "scripts" / "run_matrix.py")]
CONTAINER_CELL = "fx-bookworm-py3.11"
CELLS_TOML = """schema = 1
[[cell]]
name = "fx-bookworm-py3.11"
family = "debian"
release = "bookworm"
python = "3.11"
base = "debian:bookworm"
python_from = "distro"
bootstrap = { method = "debootstrap", suite = "bookworm", mirror_env = "LAB_DEBIAN_MIRROR" }

[[cell]]
name = "fx-host-py3.11"
family = "host"
release = "host"
python = "3.11"
python_from = "host"

[[cell]]
name = "fx-host-py3.12"
family = "host"
release = "host"
python = "3.12"
python_from = "host"
"""
FAILING = "def test_deliberately_failing():\n    assert 1 == 2, 'deliberate failure'\n"
HANGING = "import time\n\n\ndef test_hangs():\n    time.sleep(3600)\n"


def make_tree(tmp_path: Path, files: dict[str, str] | None = None, dockerfile: str | None = None) -> Path:
    """A source tree: the stub server and tiny suites, the real images/ (or a replaced Dockerfile)."""
    root = tmp_path / "tree"
    shutil.copytree(FIXTURES / "tree", root)
    shutil.copytree(LAB_ROOT / "images", root / "images")
    for rel, text in (files or {}).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    if dockerfile is not None:
        (root / "images/debian/Dockerfile").write_text(dockerfile)
    (tmp_path / "cells.toml").write_text(CELLS_TOML)
    return root


def run_matrix(
    tmp_path: Path, root: Path, *args: str, results: str = "results", timeout: float = 900
) -> tuple[int, str, dict[str, Any]]:
    out = tmp_path / results
    done = subprocess.run(
        [*RUN_MATRIX, "--cells", str(tmp_path / "cells.toml"), "--root", str(root),
         "--results", str(out), *args],
        capture_output=True, text=True, timeout=timeout, env={**os.environ, "CI": "1"},
    )  # fmt: skip
    latest = out / "latest" / "results.json"
    data = json.loads(latest.read_text()) if latest.exists() else {}
    return done.returncode, done.stdout + done.stderr, data


def cell_of(data: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in data["cells"] if c["cell"] == name)


def suite_of(cell: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in cell["suites"] if s["suite"] == name)


def lab_containers(engine: Engine) -> set[str]:
    return set(engine.containers(f"{LABEL}=1"))


def test_failing_suite_comes_out_failed_with_the_test_id(tmp_path: Path, engine: Engine) -> None:
    before = lab_containers(engine)
    root = make_tree(tmp_path, {"tests/http/test_fail.py": FAILING})
    code, output, data = run_matrix(tmp_path, root, "--cell", CONTAINER_CELL, "--suite", "unit,http,images")
    assert code == 1, output
    cell = cell_of(data, CONTAINER_CELL)
    assert cell["outcome"] == "failed"
    assert suite_of(cell, "unit")["outcome"] == "passed"
    http = suite_of(cell, "http")
    assert http["outcome"] == "failed"
    assert [f["test_id"] for f in http["failures"]] == ["tests/http/test_fail.py::test_deliberately_failing"]
    assert "deliberate failure" in http["failures"][0]["message"]
    # The testinfra checks pass on the image the harness built around the stub server.
    images = suite_of(cell, "images")
    assert images["outcome"] == "passed", images
    assert images["tests"] >= 12
    assert "tests/http/test_fail.py::test_deliberately_failing" in output  # in the table at the end
    assert lab_containers(engine) == before


def test_broken_dockerfile_comes_out_error_with_its_log_tail(tmp_path: Path, engine: Engine) -> None:
    before = lab_containers(engine)
    dockerfile = (
        (LAB_ROOT / "images/debian/Dockerfile")
        .read_text()
        .replace(
            "FROM ${BASE} AS python\n",
            "FROM ${BASE} AS python\nRUN echo 'deliberately broken build' && exit 3\n",
        )
    )
    root = make_tree(tmp_path, dockerfile=dockerfile)
    code, output, data = run_matrix(tmp_path, root, "--cell", CONTAINER_CELL, "--suite", "unit")
    assert code == 1, output
    cell = cell_of(data, CONTAINER_CELL)
    assert cell["outcome"] == "error"
    assert "docker build of the python stage failed" in cell["message"]
    assert "deliberately broken build" in cell["log_tail"]
    assert lab_containers(engine) == before, "the failed build left its container behind"


def test_hanging_suite_comes_out_timeout_within_the_limit(tmp_path: Path, engine: Engine) -> None:
    before = lab_containers(engine)
    root = make_tree(tmp_path, {"tests/payload/test_hang.py": HANGING})
    started = time.monotonic()
    code, output, data = run_matrix(tmp_path, root, "--cell", CONTAINER_CELL, "--suite", "payload", "--timeout", "8")
    assert code == 1, output
    payload = suite_of(cell_of(data, CONTAINER_CELL), "payload")
    assert payload["outcome"] == "timeout"
    assert 8 <= payload["duration"] < 8 + 10, payload["duration"]
    assert "within 8s" in payload["message"]
    assert time.monotonic() - started < 120
    assert lab_containers(engine) == before


def test_interrupted_run_leaves_no_container_and_writes_what_finished(tmp_path: Path, engine: Engine) -> None:
    before = lab_containers(engine)
    root = make_tree(tmp_path, {"tests/payload/test_hang.py": HANGING})
    out = tmp_path / "results"
    proc = subprocess.Popen(
        [*RUN_MATRIX, "--cells", str(tmp_path / "cells.toml"), "--root", str(root), "--results", str(out),
         "--cell", f"{CONTAINER_CELL},fx-host-py3.11", "--suite", "unit,payload", "--timeout", "600",
         "--jobs", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, "CI": "1"},
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while not (lab_containers(engine) - before):
            assert proc.poll() is None, proc.communicate()[0]
            assert time.monotonic() < deadline, "no suite container appeared"
            time.sleep(0.2)
        time.sleep(1)  # the hanging suite is now running in its container
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, output
    assert lab_containers(engine) == before, "the interrupted run left containers behind"
    data = json.loads((out / "results.json").read_text())
    outcomes = {c["cell"]: c["outcome"] for c in data["cells"]}
    assert outcomes[CONTAINER_CELL] == "cancelled"
    assert outcomes["fx-host-py3.11"] in ("passed", "cancelled")
    assert not list((LAB_ROOT / ".cache/lab/tmp").glob(f"{data['environment']['extra']['run_id']}*"))


def test_merged_shards_equal_the_unsharded_run(tmp_path: Path) -> None:
    root = make_tree(tmp_path)
    args = ("--suite", "unit")
    whole = run_matrix(tmp_path, root, *args, results="whole")
    one = run_matrix(tmp_path, root, *args, "--shard", "1/2", results="one")
    two = run_matrix(tmp_path, root, *args, "--shard", "2/2", results="two")
    assert whole[0] == one[0] == two[0] == 0, whole[1] + one[1] + two[1]
    assert {c["cell"] for c in one[2]["cells"]}.isdisjoint({c["cell"] for c in two[2]["cells"]})
    merged = subprocess.run(
        [*RUN_MATRIX, "--cells", str(tmp_path / "cells.toml"),
         "--merge", str(tmp_path / "one"), str(tmp_path / "two"),
         "--results", str(tmp_path / "merged")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert merged.returncode == 0, merged.stderr
    data = json.loads((tmp_path / "merged/results.json").read_text())

    def essence(d: dict[str, Any]) -> list[tuple[Any, ...]]:
        return [
            (
                c["cell"],
                c["outcome"],
                tuple((s["suite"], s["outcome"], s["tests"], s["passed"]) for s in c["suites"]),
            )
            for c in d["cells"]
        ]

    assert essence(data) == essence(whole[2])
    assert data["counts"] == whole[2]["counts"]
    for name in ("matrix.md", "junit.xml", "report.html"):
        assert (tmp_path / "merged" / name).stat().st_size > 0
    check_report_in_chromium(tmp_path / "merged")


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.fail("headless Chromium is needed: `make lab-browser` (apt-get install chromium)")
    return found


def headless(*args: str, profile: Path) -> list[str]:
    return [
        chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--user-data-dir={profile}", *args,
    ]  # fmt: skip


def check_report_in_chromium(results: Path) -> Path:
    """Render report.html in headless Chromium: every cell of results.json must be on the page.
    Returns the path of a screenshot."""
    page = results / "report.html"
    profile = results / "chromium-profile"  # a fresh profile: nothing from earlier runs
    dom = subprocess.run(
        headless("--dump-dom", page.as_uri(), profile=profile), capture_output=True, text=True, timeout=120
    )
    assert dom.returncode == 0, dom.stderr
    data = json.loads((results / "results.json").read_text())
    for cell in data["cells"]:
        assert f'id="{cell["cell"]}"' in dom.stdout, f"{cell['cell']} missing from the rendered report"
    shot = results / "report.png"
    subprocess.run(headless(f"--screenshot={shot}", "--window-size=1200,900", page.as_uri(), profile=profile),
                   capture_output=True, timeout=120)  # fmt: skip
    assert shot.exists() and shot.stat().st_size > 1000
    return shot


def test_report_with_every_outcome_renders_in_headless_chromium(tmp_path: Path) -> None:
    from matrix import report

    from .test_report import ENV, results

    report.write_reports(results(), ENV, tmp_path)
    check_report_in_chromium(tmp_path)


def test_unchanged_rerun_builds_nothing_and_a_code_change_rebuilds_only_code_layers(tmp_path: Path) -> None:
    root = make_tree(tmp_path)
    args = ("--cell", CONTAINER_CELL, "--suite", "unit")
    first = run_matrix(tmp_path, root, *args, results="first")
    assert first[0] == 0, first[1]
    again = run_matrix(tmp_path, root, *args, results="again")
    assert again[0] == 0, again[1]
    logs = Path(again[2]["environment"]["extra"]["logs"])
    assert not list(logs.glob("build-*.log")), "an unchanged rerun built something"
    assert suite_of(cell_of(again[2], CONTAINER_CELL), "unit")["cached"] is True
    forced = run_matrix(tmp_path, root, *args, "--no-cache", results="forced")
    assert suite_of(cell_of(forced[2], CONTAINER_CELL), "unit")["cached"] is False
    init = root / "server/mcpserver/__init__.py"
    # Unique per run: the lab remembers passes across runs, and this change must be new to it.
    init.write_text(init.read_text() + f"# a one-line change {time.time_ns()}\n")
    changed = run_matrix(tmp_path, root, *args, results="changed")
    assert changed[0] == 0, changed[1]
    logs = Path(changed[2]["environment"]["extra"]["logs"])
    assert suite_of(cell_of(changed[2], CONTAINER_CELL), "unit")["cached"] is False
    built = sorted(p.name for p in logs.glob("build-*.log"))
    assert built == [f"build-{CONTAINER_CELL}-runtime.log", f"build-{CONTAINER_CELL}-test.log"]
    runtime_log = (logs / f"build-{CONTAINER_CELL}-runtime.log").read_text()
    # The python stage's layers were reused, not rebuilt (legacy builder / BuildKit wording).
    assert "Using cache" in runtime_log or "CACHED" in runtime_log
