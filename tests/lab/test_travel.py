"""Images and passed-suite records travel between machines (--registry, --cache-dir), and the lab works
against an engine that is not this machine's default (DOCKER_HOST=tcp://..., a docker context). The
second machine is a second dockerd with nothing in it, listening on tcp at 127.0.0.2; the registry is
Debian's docker-registry on 127.0.0.1. Marked `engine`."""

from __future__ import annotations

import os
import secrets
import subprocess
import time
from pathlib import Path

import pytest

from .machines import registry, second_engine
from .test_engine import CONTAINER_CELL, cell_of, make_tree, remembered_run, run_matrix, suite_of

pytestmark = pytest.mark.engine


def test_a_second_machine_pulls_everything_builds_nothing_and_reruns_no_passed_suite(tmp_path: Path) -> None:
    # New code, so the runtime and test images are new to every engine and store.
    root = make_tree(tmp_path, {"server/examples/travel.py": f"# {secrets.token_hex(8)}\n"})
    args = ("--cell", CONTAINER_CELL, "--suite", "unit,images")
    with registry(tmp_path / "registry") as address, second_engine() as remote:
        prefix = f"{address}/lab{secrets.token_hex(3)}"
        started = time.monotonic()
        first = remembered_run(tmp_path, root, *args, "--registry", prefix, "--cache", str(tmp_path / "cache-1"))
        first_time = time.monotonic() - started

        started = time.monotonic()
        second = run_matrix(tmp_path, root, *args, "--registry", prefix, "--cache", str(tmp_path / "cache-2"),
                            results="second", env={"DOCKER_HOST": remote})  # fmt: skip
        second_time = time.monotonic() - started
        assert second[0] == 0, second[1]
        logs = Path(second[2]["environment"]["logs"])
        assert not list(logs.glob("build-*.log")), "the second machine built something"
        assert not list(logs.glob("base-*-mmdebstrap.log")), "the second machine bootstrapped its base"
        cell = cell_of(second[2], CONTAINER_CELL)
        assert cell["base"].startswith("fetched mcplab/base:debian-bookworm-"), cell["base"]
        for name in ("unit", "images"):
            suite = suite_of(cell, name)
            produced_by = suite_of(cell_of(first, CONTAINER_CELL), name)["produced_by"]
            assert suite["cached"] and suite["produced_by"] == produced_by, suite
        assert second[2]["environment"]["engine"] == "20.10.24+dfsg1" or second[2]["environment"]["engine"]
        print(f"\nfirst machine {first_time:.0f}s (builds, runs, pushes); second machine {second_time:.0f}s")

        # The image checks themselves against the remote engine, named by a docker context this time.
        config = tmp_path / "docker-config"
        env = {**os.environ, "DOCKER_CONFIG": str(config)}
        subprocess.run(["docker", "context", "create", "second", "--docker", f"host={remote}"], env=env, check=True,
                       capture_output=True)  # fmt: skip
        third = run_matrix(tmp_path, root, "--cell", CONTAINER_CELL, "--suite", "images", "--no-cache",
                           "--cache", str(tmp_path / "cache-2"), results="third",
                           env={"DOCKER_CONFIG": str(config), "DOCKER_CONTEXT": "second"})  # fmt: skip
        assert third[0] == 0, third[1]
        checks = suite_of(cell_of(third[2], CONTAINER_CELL), "images")
        assert checks["outcome"] == "passed" and not checks["cached"] and checks["tests"] >= 12, checks


def test_images_travel_through_a_cache_folder_too(tmp_path: Path) -> None:
    root = make_tree(tmp_path, {"server/examples/travel.py": f"# {secrets.token_hex(8)}\n"})
    folder = tmp_path / "ci-cache"
    args = ("--cell", CONTAINER_CELL, "--suite", "unit", "--cache-dir", str(folder))
    remembered_run(tmp_path, root, *args, "--cache", str(tmp_path / "cache-1"))
    assert list((folder / "images").glob("mcplab_base__debian-bookworm-*.tar")), sorted(folder.rglob("*"))
    assert len(list((folder / "passed").glob("*.json"))) == 1
    with second_engine() as remote:
        second = run_matrix(tmp_path, root, *args, "--cache", str(tmp_path / "cache-2"), results="second",
                            env={"DOCKER_HOST": remote})  # fmt: skip
    assert second[0] == 0, second[1]
    assert not list(Path(second[2]["environment"]["logs"]).glob("build-*.log"))
    assert suite_of(cell_of(second[2], CONTAINER_CELL), "unit")["cached"]
