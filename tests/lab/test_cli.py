"""The command line's contract: exit codes, listings as data, usage errors that list what exists.
These run the real CLI; with or without an engine the answers below hold."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from matrix import records, report
from matrix.arches import native
from matrix.cli import needs_host_tools
from matrix.exits import Exit
from matrix.model import CellResult, Environment, Family, Outcome, Suite, SuiteResult

from .conftest import LAB_ROOT

RUN_MATRIX = [sys.executable, str(LAB_ROOT / "scripts" / "run_matrix.py")]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RUN_MATRIX, *args], capture_output=True, text=True, timeout=120)


@pytest.mark.engine
def test_alpine_cannot_run_here_exits_3_and_says_why(tmp_path: Path) -> None:
    done = run("--distro", "alpine", "--results", str(tmp_path))
    assert done.returncode == 3, done.stdout + done.stderr
    assert "no selected cell can run here" in done.stderr
    assert "alpine:3.23: not present" in done.stderr
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
    assert all({"available", "detail", "python", "family", "arch", "opt_in"} <= set(c) for c in listed)
    arches = {c["name"]: c["arch"] for c in listed}
    assert arches["debian-bookworm-py3.11-i386"] == "i386" and arches["debian-trixie-py3.13"] == native()
    every = {c["name"] for c in json.loads(run("--list", "--json", "--arch", "all").stdout)}
    assert {"debian-trixie-py3.13-riscv64", "debian-trixie-py3.13-armhf"} <= every - set(arches)  # opt-in
    assert {"debian-bookworm-py3.11-s390x", "debian-trixie-py3.13-arm64"} <= set(arches)  # in every run
    hosts = {c["name"]: c for c in listed if c["family"] == "host"}
    # The Python running these tests is on this machine, so its host cell is available (if listed).
    mine = f"host-py{sys.version_info.major}.{sys.version_info.minor}"
    assert mine not in hosts or hosts[mine]["available"], hosts.get(mine)


def test_shard_selects_a_deterministic_share() -> None:
    first = json.loads(run("--github-matrix", "--shard", "1/3").stdout)["include"]
    again = json.loads(run("--github-matrix", "--shard", "1/3").stdout)["include"]
    assert first == again and first


def test_the_last_line_is_the_real_exit_code_and_what_it_means() -> None:
    # `make matrix` can only exit 2 on failure; the script's own code is printed last, for every outcome.
    done = run("--python", "2.7")
    assert done.stderr.rstrip().splitlines()[-1].startswith("run_matrix: exit 2: usage:")


@pytest.mark.parametrize("value", ["0", "-5", "nan", "soon"])
def test_timeout_must_be_positive_seconds(value: str) -> None:
    done = run("--timeout", value, "--distro", "host")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--timeout" in done.stderr


def test_help_lists_every_family_suite_and_exit_code() -> None:
    text = run("--help").stdout
    for family in Family:
        assert family.value in text
    for suite in Suite:
        assert suite.value in text
    for code in Exit:
        assert f"{code.value:<4} {code.meaning}" in text


def write_shard(folder: Path, shard: str, cells: list[str], *, commit: str = "abc", plan: str = "p") -> Path:
    env = Environment(commit=commit, plan=plan, shard=shard, run_id=f"run-{shard.replace('/', '-')}")
    results = [CellResult(cell=name, outcome=Outcome.PASSED) for name in cells]
    report.write_reports(results, env, folder)
    return folder


def test_merge_refuses_what_is_not_one_plans_shards(tmp_path: Path) -> None:
    one = write_shard(tmp_path / "one", "1/3", ["host-py3.9"])
    two = write_shard(tmp_path / "two", "2/3", ["host-py3.10"])
    done = run("--merge", str(one), str(two), "--results", str(tmp_path / "merged"))
    assert done.returncode == 2 and "shard 3/3 missing" in done.stderr, done.stderr
    three = write_shard(tmp_path / "three", "3/3", ["host-py3.11"], commit="other")
    done = run("--merge", str(one), str(two), str(three), "--results", str(tmp_path / "merged"))
    assert done.returncode == 2 and "they test different commits (abc, other)" in done.stderr, done.stderr
    three = write_shard(tmp_path / "three", "3/3", ["host-py3.11"])
    done = run("--merge", str(one), str(two), str(three), "--results", str(tmp_path / "merged"))
    assert done.returncode == 0, done.stderr
    assert [c["cell"] for c in json.loads((tmp_path / "merged/results.json").read_text())["cells"]] == [
        "host-py3.9", "host-py3.10", "host-py3.11"
    ]  # fmt: skip


def test_only_runs_need_the_host_tools() -> None:
    assert needs_host_tools(["--distro", "debian"])
    for light in (["--list"], ["--github-matrix"], ["--merge", "a"], ["--help"], ["--base=debian-sid-py3.14"]):
        assert not needs_host_tools(light), light


@pytest.mark.engine
def test_github_matrix_can_leave_out_what_this_kind_of_machine_cannot_run() -> None:
    listed = {c["name"]: c["available"] for c in json.loads(run("--list", "--json").stdout)}
    everything = [j["cell"] for j in json.loads(run("--github-matrix").stdout)["include"]]
    available = [j["cell"] for j in json.loads(run("--github-matrix", "--available-only").stdout)["include"]]
    assert everything == list(listed)
    assert available == [name for name, ok in listed.items() if ok]
    assert "alpine-3.23-py3.12" not in available and "debian-bookworm-py3.11" in available
    shards = json.loads(run("--github-matrix", "--available-only", "--shards", "3").stdout)["include"]
    assert shards == [{"shard": "1/3"}, {"shard": "2/3"}, {"shard": "3/3"}]
    dead = subprocess.run([*RUN_MATRIX, "--github-matrix", "--available-only"], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "DOCKER_HOST": "unix:///nope"})  # fmt: skip
    assert dead.returncode == 3 and "no Docker engine answers" in dead.stderr  # never an empty matrix in silence


def test_commands_that_run_nothing_print_no_verdict_about_cells() -> None:
    for args in (["--github-matrix"], ["--list", "--distro", "host"]):
        done = run(*args)
        assert done.returncode == 0, done.stderr
        last = done.stderr.rstrip().splitlines()[-1]
        assert last == "run_matrix: exit 0: a listing; no cell was run", last
        assert "passed" not in done.stderr


def test_python_matches_pypy_too_and_implementation_tells_them_apart() -> None:
    def cells(*args: str) -> list[str]:
        return [j["cell"] for j in json.loads(run("--github-matrix", *args).stdout)["include"]]

    both = cells("--python", "3.11")
    assert "debian-bookworm-py3.11" in both and "debian-trixie-pypy3.11" in both
    assert cells("--python", "3.11", "--implementation", "pypy") == [c for c in both if "pypy" in c]
    assert "debian-trixie-pypy3.11" not in cells("--python", "3.11", "--implementation", "cpython")
    assert cells("--python", "pypy3.11") == cells("--implementation", "pypy")
    helped = " ".join(run("--help").stdout.split())
    assert "PyPy's 3.11 cells match too" in helped and "--implementation" in helped


def write_run(folder: Path, cells: dict[str, Outcome | dict[Suite, Outcome]]) -> Path:
    results = [CellResult(cell=name, outcome=how, message="why") if isinstance(how, Outcome) else
               CellResult(cell=name, outcome=Outcome.FAILED, suites=tuple(SuiteResult(suite=s, outcome=o)
                                                                          for s, o in how.items()))
               for name, how in cells.items()]  # fmt: skip
    out = folder / "20261201000000-abcdef"
    report.write_reports(results, Environment(run_id=out.name), out)
    report.point(folder / records.LATEST, out)
    return folder


def test_rerun_failed_selects_only_what_did_not_pass_in_the_latest_run(tmp_path: Path) -> None:
    folder = write_run(tmp_path, {
        "debian-bookworm-py3.11": {Suite.UNIT: Outcome.PASSED, Suite.HTTP: Outcome.FLAKY},
        "debian-trixie-pypy3.11": {Suite.PAYLOAD: Outcome.ERROR},
        "debian-sid-py3.14t": Outcome.UNAVAILABLE, "host-py3.11": Outcome.PASSED, "host-py3.12": Outcome.ERROR,
    })  # fmt: skip
    done = run("--rerun-failed", "--github-matrix", "--results", str(folder))
    assert done.returncode == 0, done.stderr
    chosen = [j["cell"] for j in json.loads(done.stdout)["include"]]
    assert chosen == ["debian-bookworm-py3.11", "debian-trixie-pypy3.11", "host-py3.12"]


def test_rerun_failed_with_nothing_failed_runs_nothing_and_says_so(tmp_path: Path) -> None:
    passed = {Suite.UNIT: Outcome.PASSED}
    folder = write_run(tmp_path, {"host-py3.11": passed, "debian-sid-py3.14t": Outcome.UNAVAILABLE})
    done = run("--rerun-failed", "--distro", "host", "--results", str(folder))
    assert done.returncode == 0, done.stderr
    assert done.stderr.rstrip().splitlines()[-1].startswith("run_matrix: exit 0: nothing to rerun")
    assert not (folder / records.LATEST_FULL).exists() and len(list(folder.iterdir())) == 2  # no run was made
    missing = run("--rerun-failed", "--results", str(tmp_path / "none"))
    assert missing.returncode == 2 and "there is none to read" in missing.stderr


@pytest.mark.engine
def test_list_never_calls_available_a_cell_whose_compiled_python_it_has_not_checked() -> None:
    listed = {c["name"]: c for c in json.loads(run("--list", "--json").stdout)}
    free = listed["debian-sid-py3.14t"]  # this machine's mirror lists python3.14's source but serves no files
    assert not (free["available"] and free["checked"]), free
    assert "not checked until built" in free["detail"] or "does not serve their files" in free["detail"], free
