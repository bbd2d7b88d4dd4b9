"""docs/embedding.md, followed literally: its files are written and its shell blocks run, in order, from the
root of a clean copy of this checkout, against the lab's engine. Marked `engine`."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from matrix.engine import Engine

from .conftest import LAB_ROOT

pytestmark = pytest.mark.engine

DOC = LAB_ROOT / "docs" / "embedding.md"
BLOCK = re.compile(r"^```(\w+)([^\n]*)\n(.*?)^```$", re.S | re.M)


def blocks() -> list[tuple[str, str, str]]:
    """(language, title or '', text) of every fenced block."""
    found = []
    for language, info, text in BLOCK.findall(DOC.read_text()):
        title = re.search(r"title=(\S+)", info)
        found.append((language, title.group(1) if title else "", text))
    return found


def clean_copy(target: Path) -> Path:
    listed = subprocess.run(["git", "-C", str(LAB_ROOT), "ls-files", "-co", "--exclude-standard"],
                            capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
    for name in listed:
        source = LAB_ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


def test_the_embedding_guide_works_as_written(tmp_path: Path, engine: Engine) -> None:
    root = clean_copy(tmp_path / "checkout")
    ran = 0
    try:
        for language, title, text in blocks():
            if title:
                (root / title).write_text(text)
            elif language == "sh":
                done = subprocess.run(["bash", "-euo", "pipefail", "-c", text], cwd=root, capture_output=True,
                                      text=True, timeout=900, env={**os.environ, "CI": "1"})  # fmt: skip
                assert done.returncode == 0, f"this block failed:\n{text}\n--- output:\n{done.stdout}{done.stderr}"
                ran += 1
        assert ran >= 4
        assert re.search(r"\d+ passed", done.stdout), done.stdout  # the suites' block ran them
    finally:
        engine.remove_containers("my-mcp")
        engine.remove_images("my-mcp-image")
