"""bench/compare.py: the verdict's arithmetic, the baseline export, and one real (short) side-by-side run."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import compare  # noqa: E402


def test_slower_is_positive_whichever_way_a_metric_is_better():
    assert compare.change(100.0, 80.0, compare.HIGHER) == pytest.approx(0.25)  # req/s fell
    assert compare.change(10.0, 12.0, compare.LOWER) == pytest.approx(0.2)  # ms rose
    assert compare.change(100.0, 125.0, compare.HIGHER) == pytest.approx(-0.2)


def test_the_verdict_is_the_median_of_the_pairs_not_of_the_sides():
    # One wild pair (the machine stalled during the candidate's turn) moves neither quartile past 3 %.
    pairs = [{"baseline": 100.0, "candidate": 100.0}] * 6 + [{"baseline": 100.0, "candidate": 50.0}]
    summary = compare.summarise(pairs, "req/s", compare.HIGHER)
    assert summary["slower_median"] == 0.0 and summary["slower_q3"] == 0.0
    result = {"timed": {"pipelined": summary}, "instructions": {}}
    assert compare.verdict(result) == []
    pairs = [{"baseline": 100.0, "candidate": 95.0}] * 5
    result["timed"]["pipelined"] = compare.summarise(pairs, "req/s", compare.HIGHER)
    assert compare.verdict(result) == ["pipelined"]


def test_counted_instructions_decide_where_there_are_any():
    timed = compare.summarise([{"baseline": 100.0, "candidate": 90.0}], "req/s", compare.HIGHER)
    result = {"timed": {"pipelined": timed},
              "instructions": {"per request": {"baseline": 1000.0, "candidate": 1020.0, "change": 0.02}}}
    assert compare.verdict(result) == []  # the noisy timed figure is shown, the exact count decides
    result["instructions"]["per request"]["change"] = 0.031
    assert compare.verdict(result) == ["per request"]


def test_a_git_revision_is_exported_with_its_package(tmp_path):
    folder, name = compare.server_folder("HEAD", str(tmp_path))
    assert os.path.isfile(os.path.join(folder, "mcpserver", "protocol.py"))
    assert name.startswith("HEAD (")
    with pytest.raises(SystemExit, match="neither a folder"):
        compare.server_folder("no-such-revision-here", str(tmp_path))


def test_a_short_real_run_compares_two_servers_and_writes_its_table():
    done = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "compare.py"), "--baseline", "HEAD",
                           "--pairs", "1", "--pipelined", "50", "--lockstep", "20", "--sequential", "20",
                           "--cold-starts", "1", "--no-instructions"], capture_output=True, text=True, timeout=300,
                          cwd=ROOT, check=False)
    assert done.returncode in (0, 1), done.stderr[-2000:]  # 1: one pair of a noisy figure may say slower
    for row in ("stdio cold start (ms)", "stdio pipelined (req/s)", "stdio legacy pipelined (req/s)",
                "HTTP keep-alive (req/s)"):
        assert f"| {row} |" in done.stdout, done.stdout
    assert "results in " in done.stdout
