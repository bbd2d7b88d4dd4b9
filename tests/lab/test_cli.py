"""The command line's contract: exit codes, listings as data, usage errors that list what exists.
These run the real CLI; with or without an engine the answers below hold."""

from __future__ import annotations

import json
import subprocess
import sys

from .conftest import LAB_ROOT

RUN_MATRIX = [sys.executable, str(LAB_ROOT / "scripts" / "run_matrix.py")]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RUN_MATRIX, *args], capture_output=True, text=True, timeout=120)


def test_alpine_cannot_run_here_exits_3_and_says_why(tmp_path) -> None:  # type: ignore[no-untyped-def]
    done = run("--distro", "alpine", "--results", str(tmp_path))
    assert done.returncode == 3, done.stdout + done.stderr
    assert "no selected cell can run here" in done.stderr
    assert "alpine:3.23: not present" in done.stderr or "no Docker engine answers" in done.stderr
    data = json.loads((tmp_path / "latest" / "results.json").read_text())
    assert {c["outcome"] for c in data["cells"]} == {"unavailable"}


def test_unknown_selector_is_a_usage_error_listing_what_exists() -> None:
    done = run("--python", "2.7")
    assert done.returncode == 2
    assert "--python 2.7 matches no cell. Known python values: 3.9, 3.10, 3.11" in done.stderr


def test_bad_option_is_a_usage_error() -> None:
    done = run("--jobs", "many")
    assert done.returncode == 2
    assert "--jobs takes a positive number or 'auto'" in done.stderr


def test_list_json_and_github_matrix_agree() -> None:
    listed = json.loads(run("--list", "--json", "--distro", "debian,host").stdout)
    matrix = json.loads(run("--github-matrix", "--distro", "debian,host").stdout)
    assert [c["name"] for c in listed] == [j["cell"] for j in matrix["include"]]
    assert all({"available", "detail", "python", "family"} <= set(c) for c in listed)
    hosts = {c["name"]: c for c in listed if c["family"] == "host"}
    # The Python running these tests is on this machine, so its host cell is available (if listed).
    mine = f"host-py{sys.version_info.major}.{sys.version_info.minor}"
    assert mine not in hosts or hosts[mine]["available"], hosts.get(mine)


def test_shard_selects_a_deterministic_share() -> None:
    first = json.loads(run("--github-matrix", "--shard", "1/3").stdout)["include"]
    again = json.loads(run("--github-matrix", "--shard", "1/3").stdout)["include"]
    assert first == again and first
