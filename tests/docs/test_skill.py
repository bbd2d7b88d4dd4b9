"""The project's own Skill, server/examples/skills/build-a-server: its template server and test work as the skill
says, and the conformance fixture (everything.py) serves it over the Skills extension with the other skills."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from mcpserver import load_target
from mcpserver.testing import Client

ROOT = Path(__file__).resolve().parent.parent.parent
SKILL = ROOT / "server/examples/skills/build-a-server"
BIN = Path(sys.executable).parent


def test_the_skills_template_server_passes_its_own_test_and_answers_the_call_it_shows(tmp_path: Path) -> None:
    shutil.copytree(SKILL / "templates", tmp_path, dirs_exist_ok=True)
    tested = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_server.py"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert tested.returncode == 0 and "8 passed" in tested.stdout, tested.stdout + tested.stderr
    called = subprocess.run([str(BIN / "mcpserver"), "call", "server.py", "add", '{"a": 2, "b": 3}'], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert called.returncode == 0 and '"sum": 5' in called.stdout, called.stderr


def test_everything_serves_the_skill_and_its_files_over_the_extension() -> None:
    server = load_target(str(ROOT / "server/examples/everything.py"))
    with Client(server) as client:
        entries = {entry["uri"]: entry for entry in client.list_skills()}
        assert "skill://build-a-server/SKILL.md" in entries
        skill = client.get_skill("skill://build-a-server/SKILL.md")
        assert skill["frontmatter"]["name"] == "build-a-server"
        text = client.read_resource("skill://build-a-server/templates/server.py").text
        assert text == (SKILL / "templates/server.py").read_text()
