"""bench/report.py --doc: the report is rewritten, the section `make soak` wrote is kept."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import report  # noqa: E402

SOAK = "<!-- soak: start (written by make soak) -->\n## Soak\n\nfigures\n<!-- soak: end -->\n"


def test_rewriting_the_report_keeps_the_soak_section(tmp_path, monkeypatch):
    doc = tmp_path / "performance.md"
    doc.write_text("# old report\n\n" + SOAK)
    monkeypatch.setattr(report, "render", lambda results, lab_times: f"# new report {results['n']}\n")
    report.write_doc({"n": 1}, str(doc))
    assert doc.read_text() == "# new report 1\n\n" + SOAK
    report.write_doc({"n": 2}, str(doc))  # and again: kept once, not doubled
    assert doc.read_text() == "# new report 2\n\n" + SOAK


def test_a_report_without_a_soak_section_is_just_the_render(tmp_path, monkeypatch):
    doc = tmp_path / "performance.md"
    monkeypatch.setattr(report, "render", lambda results, lab_times: "# report\n")
    report.write_doc({}, str(doc))
    assert doc.read_text() == "# report\n"


def test_the_command_line_says_how_it_is_used():
    done = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "report.py"), "a.json", "--to", "x"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 2 and "--doc" in done.stderr
