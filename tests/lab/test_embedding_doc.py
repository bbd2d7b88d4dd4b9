"""docs/guides/embedding.md, followed literally: its files are written and its shell blocks run, in order, in a folder
of its own beside a clean copy of this checkout, against the lab's engine; afterwards neither holds anything the
guide made. Marked `engine`."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from matrix.engine import Engine

from .conftest import LAB_ROOT

pytestmark = pytest.mark.engine

DOC = LAB_ROOT / "docs" / "guides" / "embedding.md"
BLOCK = re.compile(r"^```(\w+)([^\n]*)\n(.*?)^```$", re.S | re.M)


def blocks() -> list[tuple[str, str, str]]:
    """(language, title or '', text) of every fenced block."""
    found = []
    for language, info, text in BLOCK.findall(DOC.read_text()):
        title = re.search(r"""title="?([^"\s]+)""", info)
        found.append((language, title.group(1) if title else "", text))
    return found


def clean_copy(target: Path) -> Path:
    """This checkout's files as git sees them (tracked, and untracked ones it does not ignore), committed in
    a repository of their own, so that whatever the guide leaves in the checkout shows in `git status`."""
    listed = subprocess.run(["git", "-C", str(LAB_ROOT), "ls-files", "-co", "--exclude-standard"],
                            capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
    for name in listed:
        source = LAB_ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    git = ["git", "-C", str(target), "-c", "user.name=lab", "-c", "user.email=lab@localhost"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "the checkout as it was"]):
        subprocess.run([*git, *args], capture_output=True, check=True)
    return target


def test_the_embedding_guide_works_as_written_and_leaves_nothing_behind(tmp_path: Path, engine: Engine) -> None:
    checkout = clean_copy(tmp_path / "checkout")
    folder = tmp_path / "my-mcp"  # the guide's own folder, which its last block removes
    folder.mkdir()
    env = {**os.environ, "CI": "1", "MCPSERVER": str(checkout)}
    with socket.socket() as sock:  # the guide's port 3000 may be another process's on a shared machine
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    ran = []
    try:
        for language, title, text in blocks():
            if title:
                (folder / title).write_text(text)
            elif language == "sh":
                text = text.replace("3000", str(port))  # as written, on a port no other process holds
                done = subprocess.run(["bash", "-euo", "pipefail", "-c", text], cwd=folder, capture_output=True,
                                      text=True, timeout=900, env=env)  # fmt: skip
                assert done.returncode == 0, f"this block failed:\n{text}\n--- output:\n{done.stdout}{done.stderr}"
                ran.append(done.stdout)
        assert len(ran) >= 6
        assert any(re.search(r"\d+ passed", out) for out in ran), ran  # the suites' block ran them
        assert not folder.exists()  # the last block removed the guide's folder
        left = subprocess.run(["git", "-C", str(checkout), "status", "--porcelain", "--untracked-files=all"],
                              capture_output=True, text=True, check=True).stdout  # fmt: skip
        assert left == "", f"the guide left this in the checkout:\n{left}"
        assert engine.image_id("my-mcp-image") is None
    finally:
        engine.remove_containers("my-mcp")
        engine.remove_images("my-mcp-image")
