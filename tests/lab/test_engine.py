"""The harness against the real engine: fixture trees (a stub server, tiny suites) run through the real
CLI, so these tests depend on nothing the server or its suites contain. Marked `engine`."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from matrix.engine import BUILD_STEP, LABEL, TREE_LABEL, ContainerSpec, Engine
from matrix.lab import tree_identity

from .conftest import FIXTURES, LAB_ROOT

pytestmark = pytest.mark.engine

RUN_ID = re.compile(r"\d{14}-[0-9a-f]{6}-")  # lab.Lab.run_id, as container names start after "mcplab-"
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
bootstrap = { method = "mmdebstrap", suite = "bookworm", mirror_env = "LAB_DEBIAN_MIRROR" }

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
        (root / "images/apt/Dockerfile").write_text(dockerfile)
    (tmp_path / "cells.toml").write_text(CELLS_TOML)
    return root


def run_matrix(
    tmp_path: Path, root: Path, *args: str, results: str = "results", timeout: float = 900,
    env: dict[str, str] | None = None,
) -> tuple[int, str, dict[str, Any]]:
    out = tmp_path / results
    done = subprocess.run(
        [*RUN_MATRIX, "--cells", str(tmp_path / "cells.toml"), "--root", str(root),
         "--results", str(out), *args],
        capture_output=True, text=True, timeout=timeout, env={**os.environ, "CI": "1", **(env or {})},
    )  # fmt: skip
    latest = out / "latest" / "results.json"
    data = json.loads(latest.read_text()) if latest.exists() else {}
    return done.returncode, done.stdout + done.stderr, data


def remembered_run(tmp_path: Path, root: Path, *args: str, new: bool = True) -> dict[str, Any]:
    """A first run whose every suite passed (and ran, none remembered, when `new`), so a later run finds each pass.
    A suite whose first attempt failed and whose rerun (--retries) passed is flaky, which exits 0 but is by design
    never remembered (memo.py), so a later run, here or on another machine, reruns it and the test would blame
    the wrong run. The run is then made once more (what passed is remembered and not rerun), and
    a second run that is not all passes fails here, with what its suites said."""
    data: dict[str, Any] = {}
    for results in ("first", "first-again"):
        code, output, data = run_matrix(tmp_path, root, *args, results=results)
        assert code == 0, output
        ran = [s for s in cell_of(data, CONTAINER_CELL)["suites"] if s["outcome"] != "not-run"]
        assert ran, data
        if new and results == "first":
            assert not any(s["cached"] for s in ran), ran
        if all(s["outcome"] == "passed" for s in ran):
            return data
    pytest.fail(f"the first run's suites did not all pass twice running: {ran}")


def cell_of(data: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in data["cells"] if c["cell"] == name)


def suite_of(cell: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in cell["suites"] if s["suite"] == name)


def lab_containers(engine: Engine) -> set[str]:
    return set(engine.containers(f"{LABEL}=1"))


def left_behind(engine: Engine, before: set[str], run_id: str = "") -> list[str]:
    """Lab containers that appeared since `before` and are still there, but for another run's own (named
    mcplab-<its run id>-...): the engine is shared, and other runs come and go meanwhile. A build's leftover
    container has a name of docker's own, so it counts."""
    new = sorted(lab_containers(engine) - before)
    names = engine.container_names(new)
    return [n for n in names.values()
            if not (n.startswith("mcplab-") and RUN_ID.match(n[7:]) and not n[7:].startswith(run_id or "-"))]


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
    last = output.rstrip().splitlines()[-1]  # and in the last line, all a CI page's tail may show
    assert last.startswith("run_matrix: exit 1: ") and f"{CONTAINER_CELL} failed (http: 1 of" in last, last
    assert "tests/http/test_fail.py::test_deliberately_failing" in last, last
    assert left_behind(engine, before, data.get("environment", {}).get("run_id", "")) == []


def test_broken_dockerfile_comes_out_error_with_its_log_tail(tmp_path: Path, engine: Engine) -> None:
    before = lab_containers(engine)
    dockerfile = (
        (LAB_ROOT / "images/apt/Dockerfile")
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
    assert left_behind(engine, before, data["environment"]["run_id"]) == [], "the failed build left a container"


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
    assert left_behind(engine, before, data.get("environment", {}).get("run_id", "")) == []


def test_interrupt_keeps_what_finished_even_in_the_background(tmp_path: Path, engine: Engine) -> None:
    """Started as a shell starts a background job (SIGINT ignored), SIGINT still stops the run; the suites
    that finished keep their results, only unfinished work is cancelled, and nothing is left behind."""
    before = lab_containers(engine)
    root = make_tree(tmp_path, {"tests/payload/test_hang.py": HANGING})
    out = tmp_path / "results"
    proc = subprocess.Popen(
        [*RUN_MATRIX, "--cells", str(tmp_path / "cells.toml"), "--root", str(root), "--results", str(out),
         "--cell", f"{CONTAINER_CELL},fx-host-py3.11", "--suite", "unit,payload", "--timeout", "600",
         "--jobs", "2", "--no-cache"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, "CI": "1"},
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while not any("payload" in n for n in engine.container_names(list(lab_containers(engine) - before)).values()):
            assert proc.poll() is None, proc.communicate()[0]
            assert time.monotonic() < deadline, "the payload suite's container never appeared"
            time.sleep(0.2)
        time.sleep(1)  # the hanging suite is now running in its container
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, output
    assert output.rstrip().endswith("run_matrix: exit 130: interrupted (Ctrl-C, SIGINT or SIGTERM): the partial "
                                    "report says what finished"), output  # fmt: skip
    data = json.loads((out / "latest" / "results.json").read_text())
    assert left_behind(engine, before, data["environment"]["run_id"]) == [], "the interrupted run left containers"
    assert data["environment"]["partial"].startswith("interrupted (the run was interrupted by SIGINT)")
    assert not (out / "latest-full").exists(), "an interrupted run must not stand for the last full report"
    container = cell_of(data, CONTAINER_CELL)
    assert suite_of(container, "unit")["outcome"] == "passed", container
    assert suite_of(container, "payload")["outcome"] == "cancelled"
    assert container["outcome"] == "cancelled"
    host = cell_of(data, "fx-host-py3.11")  # it runs alongside: finished before the interrupt, or cancelled
    assert host["outcome"] in ("passed", "cancelled"), host
    if host["outcome"] == "passed":
        assert suite_of(host, "unit")["outcome"] == "passed"
    assert not list((LAB_ROOT / ".cache/lab/tmp").glob(f"{data['environment']['run_id']}*"))


KILLED = "import os, signal, time\n\n\ndef test_dies():\n    time.sleep(1)\n    os.kill(os.getpid(), signal.SIGKILL)\n"


def test_a_killed_suite_is_an_error_on_the_host_and_in_a_container(tmp_path: Path) -> None:
    """A suite whose process dies by SIGKILL is `killed by signal 9`, not a timeout; in a container it runs
    under an init, so the kill works there as on the host (as PID 1 it would be ignored and pass)."""
    root = make_tree(tmp_path, {"tests/unit/test_kill.py": KILLED})
    code, output, data = run_matrix(tmp_path, root, "--cell", f"{CONTAINER_CELL},fx-host-py3.11", "--suite", "unit")
    assert code == 1, output
    for name in (CONTAINER_CELL, "fx-host-py3.11"):
        unit = suite_of(cell_of(data, name), "unit")
        assert unit["outcome"] == "error", (name, unit)
        assert unit["message"].startswith("killed by signal 9 (SIGKILL)"), (name, unit["message"])
        assert "test_kill.py::test_dies" in unit["log_tail"]


def test_a_dead_engine_is_an_error_exit_3_never_a_pass(tmp_path: Path) -> None:
    root = make_tree(tmp_path)
    code, output, data = run_matrix(tmp_path, root, "--suite", "unit", env={"DOCKER_HOST": "unix:///nope"})
    assert code == 3, output
    assert data == {}, "nothing ran, so no report can say anything passed"
    assert "no Docker engine answers at unix:///nope" in output
    assert output.rstrip().endswith("every selected cell is unavailable"), output
    code, output, _ = run_matrix(tmp_path, root, "--cell", "fx-host-py3.11", "--suite", "unit",
                                 env={"DOCKER_HOST": "unix:///nope"})  # fmt: skip
    assert code == 3, output  # asked for by DOCKER_HOST: it must answer even when no container cell runs


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
        assert f'<a href="#{cell["cell"]}" class="sq ' in dom.stdout, f"{cell['cell']} has no square in the grid"
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


def test_unchanged_rerun_builds_nothing_and_a_code_change_rebuilds_only_code_layers(
    tmp_path: Path, engine: Engine
) -> None:
    root = make_tree(tmp_path)
    tree = tree_identity(root)
    args = ("--cell", CONTAINER_CELL, "--suite", "unit")
    remembered_run(tmp_path, root, *args, new=False)  # the same tree as earlier runs': its pass may be known
    again = run_matrix(tmp_path, root, *args, results="again")
    assert again[0] == 0, again[1]
    logs = Path(again[2]["environment"]["logs"])
    assert not list(logs.glob("build-*.log")), "an unchanged rerun built something"
    assert suite_of(cell_of(again[2], CONTAINER_CELL), "unit")["cached"] is True
    forced = run_matrix(tmp_path, root, *args, "--no-cache", results="forced")
    assert suite_of(cell_of(forced[2], CONTAINER_CELL), "unit")["cached"] is False
    init = root / "server/mcpserver/__init__.py"
    # Unique per run: the lab remembers passes across runs, and this change must be new to it.
    init.write_text(init.read_text() + f"# a one-line change {time.time_ns()}\n")
    changed = run_matrix(tmp_path, root, *args, results="changed")
    assert changed[0] == 0, changed[1]
    logs = Path(changed[2]["environment"]["logs"])
    assert suite_of(cell_of(changed[2], CONTAINER_CELL), "unit")["cached"] is False
    built = sorted(p.name for p in logs.glob("build-*.log"))
    assert built == [f"build-{CONTAINER_CELL}-runtime.log", f"build-{CONTAINER_CELL}-test.log"]
    runtime_log = (logs / f"build-{CONTAINER_CELL}-runtime.log").read_text()
    # The python stage's layers were reused, not rebuilt (legacy builder / BuildKit wording).
    assert "Using cache" in runtime_log or "CACHED" in runtime_log
    # The superseded runtime and test images of this tree were pruned; the python stage stays.
    cell_tags = [r for r in engine.references("mcplab/debian") if r.startswith("mcplab/debian:bookworm-py3.11-")]
    for stage in ("runtime", "test"):
        mine = [r for r in cell_tags if f"-{stage}-" in r and engine.image_facts(r)["labels"].get(TREE_LABEL) == tree]
        assert len(mine) == 1, (stage, mine)


def dangling(engine: Engine) -> set[str]:
    done = subprocess.run(["docker", "images", "-q", "--no-trunc", "--filter", "dangling=true", "--filter",
                           f"label={LABEL}"], capture_output=True, text=True, check=True)  # fmt: skip
    return set(done.stdout.split())


def test_two_builds_of_one_stage_side_by_side_leave_one_image_and_none_dangling(tmp_path: Path,
                                                                                engine: Engine) -> None:
    """With `--tag`, the build that finished last moved the tag and the other's image dangled (an 834 MB
    builder stage after a cold run with another cell building alongside); each build now tags its image only
    when nobody has, and removes it otherwise. A failed build removes its last step's image too."""
    import secrets
    import threading

    from matrix.build import context_tar

    base = subprocess.run([*RUN_MATRIX, "--base", "debian-bookworm-py3.11"], capture_output=True, text=True,
                          check=True, cwd=LAB_ROOT).stdout.strip().splitlines()[-1]  # fmt: skip
    mark, tag = secrets.token_hex(4), f"mcplab-test/race:{secrets.token_hex(4)}"
    labels = {LABEL: "1", TREE_LABEL: f"race-{mark}"}
    context = context_tar(f"FROM {base}\nRUN sleep 3 && echo {mark} > /mark\n".encode(), [])
    before = dangling(engine)
    done: list[bool] = []

    def build(n: int) -> None:
        done.append(engine.build(context, target=None, tag=tag, build_args=(), labels=labels,
                                 log=tmp_path / f"build{n}.log", timeout=300).ok)  # fmt: skip

    builders = [threading.Thread(target=build, args=(n,)) for n in (1, 2)]
    try:
        for thread in builders:
            thread.start()
        for thread in builders:
            thread.join()
        assert done == [True, True]
        assert len(engine.images(f"{TREE_LABEL}=race-{mark}")) == 1  # the tagged one; the other went
        broken = context_tar(f"FROM {base}\nRUN echo {mark} > /broken\nRUN exit 3\n".encode(), [])
        failed = engine.build(broken, target=None, tag=f"{tag}-broken", build_args=(), labels=labels,
                              log=tmp_path / "broken.log", timeout=300)  # fmt: skip
        assert not failed.ok
        step = BUILD_STEP.findall(failed.output)[-1]  # the image of `RUN echo`, the last step that worked
        assert engine.image_id(step) is None, "the failed build's last step was left dangling"
        assert engine.image_id(base) is not None
        assert dangling(engine) <= before
    finally:
        engine.remove_images(tag)


STEPS = """Step 1/6 : FROM mcplab/base:debian-bookworm-2cb81e914d28 AS python
 ---> 0d1e5a3c7b2f
Step 2/6 : RUN echo one > /one
 ---> Running in 1a2b3c4d5e6f
Removing intermediate container 1a2b3c4d5e6f
 ---> 5c1d9e8f7a6b
Step 3/6 : RUN echo two > /two
 ---> Using cache
 ---> 9f8e7d6c5b4a
Step 4/6 : RUN sleep 600
 ---> Running in 7e6d5c4b3a29
"""


def test_a_builds_created_steps_are_told_from_its_base_and_its_cached_steps() -> None:
    from matrix.engine import created_steps

    assert created_steps(STEPS) == ["5c1d9e8f7a6b"]


def test_sigterm_during_a_build_leaves_no_untagged_image(tmp_path: Path, engine: Engine) -> None:
    """Issue 37.6: three untagged step images stayed after a run stopped by SIGTERM mid-build. The steps are new
    (a fresh token), so each is an image this build made; the run is stopped while the last one sleeps."""
    token = uuid.uuid4().hex
    dockerfile = (LAB_ROOT / "images/apt/Dockerfile").read_text().replace(
        "FROM ${BASE} AS python\n",
        f"FROM ${{BASE}} AS python\nRUN echo {token} > /one\nRUN echo {token} > /two\nRUN echo {token} > /three\n"
        "RUN sleep 600\n",
    )  # fmt: skip
    root = make_tree(tmp_path, dockerfile=dockerfile)
    out = tmp_path / "results"
    proc = subprocess.Popen([*RUN_MATRIX, "--cells", str(tmp_path / "cells.toml"), "--root", str(root), "--results",
                             str(out), "--cell", CONTAINER_CELL, "--suite", "unit"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env={**os.environ, "CI": "1"})  # fmt: skip
    try:
        deadline = time.monotonic() + 600
        log = None
        while log is None or "RUN sleep 600" not in log.read_text():
            assert proc.poll() is None, proc.communicate()[0]
            assert time.monotonic() < deadline, "the build never reached its sleeping step"
            logs = json.loads((out / "latest/results.json").read_text())["environment"]["logs"] if (
                out / "latest/results.json").exists() else ""
            found = Path(logs) / f"build-{CONTAINER_CELL}-python.log" if logs else None
            log = found if found and found.exists() else None
            time.sleep(0.5)
        time.sleep(2)  # the sleeping step's container is running
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 130, output
    from matrix.engine import created_steps

    made = created_steps(log.read_text())
    assert len(made) == 3, log.read_text()
    assert [image for image in made if engine.image_facts(image)] == [], "the interrupted build left its steps"


def test_a_tree_of_another_architecture_becomes_an_image_of_it(tmp_path: Path, engine: Engine) -> None:
    """docker import --platform is ignored by Debian's 20.10 engine (the image says amd64): the lab builds the tree
    FROM scratch instead, with --platform, and the base's ENV for the emulator."""
    from matrix.engine import TAG_LABEL

    tree = tmp_path / "rootfs"
    (tree / "etc").mkdir(parents=True)
    (tree / "etc/os-release").write_text("ID=debian\n")
    (tree / "etc/owned").write_text("by uid 42\n")
    os.chown(tree / "etc/owned", 42, 42)
    tarball = tmp_path / "rootfs.tar"  # as mmdebstrap makes it
    subprocess.run(["tar", "--numeric-owner", "-C", str(tree), "-cf", str(tarball), "."], check=True)
    tag = f"mcplab-test/rootfs:{uuid.uuid4().hex[:12]}"
    holder = f"mcplab-test-{tag.rpartition(':')[2]}"
    done = engine.import_rootfs(tarball, tag, labels={LABEL: "1", TAG_LABEL: tag}, log=tmp_path / "log", timeout=300,
                                platform="linux/arm64", env={"QEMU_CPU": "cortex-a72"})  # fmt: skip
    try:
        assert done.ok, done.output
        facts = engine._docker(["image", "inspect", "--format", "{{.Architecture}} {{json .Config.Env}}", tag]).output
        arch, env = facts.split(" ", 1)
        assert arch == "arm64" and "QEMU_CPU=cortex-a72" in json.loads(env), facts
        assert engine.platform_of(tag) == "linux/arm64"  # what its containers are run with
        assert engine.create(ContainerSpec(image=tag, name=holder, labels={LABEL: "1"}, args=("/none",))).ok
        with tarfile.open(fileobj=io.BytesIO(engine.copy_out(holder, "/etc/owned") or b"")) as tar:
            assert [(m.uid, m.gid) for m in tar] == [(42, 42)]  # the tree's owners, not the build context's root
    finally:
        engine.remove_containers(holder)
        engine.remove_images(tag)



def test_two_bootstraps_of_one_base_make_the_same_tarball(tmp_path: Path, engine: Engine) -> None:
    """mmdebstrap with the pinned SOURCE_DATE_EPOCH: the same recipe and mirror give a tarball of the same sha256, so
    a base is checked by its digest (every report gives it). The two run side by side, as a cold run's do."""
    import concurrent.futures

    from matrix.bootstrap import ROOTFS_LABEL, mmdebstrap_base
    from matrix.engine import TAG_LABEL
    from matrix.model import Bootstrap, BootstrapMethod

    boot = Bootstrap(method=BootstrapMethod.MMDEBSTRAP, suite="bookworm")
    mirror = os.environ.get("LAB_DEBIAN_MIRROR", "")
    tags = [f"mcplab-test/base:{uuid.uuid4().hex[:12]}" for _ in range(2)]

    def make(tag: str) -> str:
        log = tmp_path / f"{tag[-12:]}.log"
        return mmdebstrap_base(engine, boot, mirror=mirror, tag=tag, workdir=tmp_path, log=log,
                               labels={LABEL: "1", TAG_LABEL: tag})  # fmt: skip

    try:
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            first, second = pool.map(make, tags)
        assert len(first) == 64 and first == second
        labels = engine.image_facts(tags[0]).get("labels")
        assert isinstance(labels, dict) and labels[ROOTFS_LABEL] == first  # what the reports read of a base
        assert os.listdir(tmp_path) == [name for name in os.listdir(tmp_path) if name.endswith(".log")]  # no tree left
    finally:
        engine.remove_images(*tags)
