"""Every example of the README and docs/ runs as written, or says why not (tests/docs/examples.py has the rules).

Each page gets a folder of its own holding what its commands name: the page's titled files, `server.py` (the demo
example), `hello.py` (getting started's), a `skills/` folder, token and key files (a path under /run/ or ~ is taken
to be in that folder), and links to
this checkout's `server/`, `scripts/` and `matrix/`. A port in a command is made 0, since the machine is shared."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from .examples import Block, Command, blocks, commands, pages

ROOT = Path(__file__).resolve().parent.parent.parent
BIN = Path(sys.executable).parent
TIMEOUT = 120
SERVING = re.compile(r"mcpserver: serving ")
TOKEN = "docs-example-token-0123456789abcdef"


def every_block() -> list[Block]:
    return [block for page in pages() for block in blocks(page)]


NOT_RUN = ("fragment", "run by", "excerpt of")
PYTHON = [b for b in every_block() if b.lang == "python" and b.marker not in NOT_RUN]
COMMANDS = [c for b in every_block() if b.lang in ("sh", "bash", "console", "shell") and b.marker != "run by"
            for c in commands(b)]  # fmt: skip
MARKED = [b for b in every_block() if b.marker in NOT_RUN]


@pytest.fixture(scope="session")
def folders():
    made: dict[str, Path] = {}
    # Short: a Unix socket's path must fit 107 bytes.
    top = Path(tempfile.mkdtemp(prefix="mcpdocs-"))
    yield lambda page: made.get(page) or made.setdefault(page, page_folder(top / f"p{len(made)}", page))
    shutil.rmtree(top, ignore_errors=True)


def page_folder(folder: Path, page: str) -> Path:
    folder.mkdir(parents=True)
    for name in ("server", "scripts", "matrix", "spec"):
        (folder / name).symlink_to(ROOT / name)
    shutil.copy(ROOT / "server/examples/demo.py", folder / "server.py")
    # The docs' running example, which pages after the first name without showing it again.
    start = blocks(ROOT / "docs/getting-started.md")
    (folder / "hello.py").write_text(next(block.body for block in start if block.title == "hello.py"))
    shutil.copytree(ROOT / "server/examples/skills", folder / "skills")
    for name in ("token.txt", "run/token", "run/secrets/token", "home/.mcp-token"):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(TOKEN + "\n")
    (folder / "run/secrets/state-keys").write_text("0" * 64 + "\n")
    (folder / "run/mcp").mkdir(mode=0o700)
    for block in blocks(ROOT / page):
        if block.title and block.marker not in NOT_RUN:
            (folder / block.title).parent.mkdir(parents=True, exist_ok=True)
            (folder / block.title).write_text(block.body)
    return folder


def in_folder(word: str, folder: Path) -> str:
    """A /run/... path (also inside unix:/run/...) is the page folder's, and so is the home folder, ~."""
    word = re.sub(r"^~/", f"{folder}/home/", word)
    return re.sub(r"(^|:|=)/run/", lambda m: f"{m.group(1)}{folder}/run/", word)


def runnable(command: Command, folder: Path) -> tuple[list[str], dict[str, str]]:
    argv = [in_folder(word, folder) for word in command.argv]
    for index, word in enumerate(argv[:-1]):
        if word == "--port" and argv[index + 1] != "0":
            argv[index + 1] = "0"
    if argv[0] == "mcpserver":
        argv = [str(BIN / "mcpserver") if (BIN / "mcpserver").exists() else sys.executable, *(
            [] if (BIN / "mcpserver").exists() else ["-m", "mcpserver"]), *argv[1:]]
    elif argv[0] in ("python", "python3"):
        argv[0] = sys.executable
    if "run_matrix" in " ".join(argv[:2]) and not {"--help", "-h", "--list", "--github-matrix"} & set(argv):
        argv.append("--list")  # a lab run takes the engine and many minutes: check what it selects, build nothing
    if serves(argv) in ("http", "dev") and "--port" not in argv and not any("unix:" in w for w in argv):
        at = argv.index("dev") + 1 if serves(argv) == "dev" else len(argv) - 1  # before TARGET
        argv[at:at] = ["--port", "0"]  # not the default 3000, which another process may hold
    env = {**os.environ, **{name: in_folder(value, folder) for name, value in command.env.items()},
           "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "HOME": str(folder / "home")}  # fmt: skip
    env.pop("MCPSERVER_TOKEN", None)
    return argv, env


def serves(argv: list[str]) -> str:
    """'http', 'dev', 'stdio', or '' for a command that answers and exits."""
    words = argv[1:] if argv[1:2] != ["-m"] else argv[3:]
    if any(word in ("--help", "-h", "--version", "--check", "--list") for word in words) or "run_matrix" in argv[1]:
        return ""
    if words[:1] == ["dev"]:
        return "dev"
    if words[:1] and words[0] in ("call", "list", "config", "bundle"):
        return ""
    return "http" if any(word == "--http" or word.startswith("--http=") for word in words) else "stdio"


def run_command(command: Command, folder: Path) -> tuple[int, str, str]:
    argv, env = runnable(command, folder)
    kind = serves(argv)
    if kind in ("", "stdio"):
        done = subprocess.run(argv, cwd=folder, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=TIMEOUT)  # fmt: skip
        return done.returncode, done.stdout, done.stderr
    process = subprocess.Popen(argv, cwd=folder, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
    said: list[str] = []
    heard = threading.Event()

    def read() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            said.append(line)
            if SERVING.search(line):
                heard.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = time.monotonic() + TIMEOUT
    while not heard.is_set() and process.poll() is None and time.monotonic() < deadline:
        heard.wait(0.05)
    if process.poll() is None:
        # What its user does: Ctrl-C for the dev loop, SIGTERM (docker stop, systemd) for a server. A run started in
        # the background of a shell without job control (nohup ... &) ignores SIGINT, and so would the dev loop.
        ctrl_c = signal.SIGINT if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN else signal.SIGTERM
        os.killpg(process.pid, ctrl_c if kind == "dev" else signal.SIGTERM)
    try:  # not communicate(): it would read stderr too, which the reader thread owns, and wait on it for ever
        process.wait(TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    assert process.stdout is not None
    stdout = process.stdout.read()
    process.stdout.close()
    reader.join(5)
    assert process.stderr is not None
    process.stderr.close()
    if not heard.is_set() and process.returncode == 0:
        return -1, stdout, "".join(said) + "\n(it exited 0 but never said it serves)"
    return process.returncode, stdout, "".join(said)


@pytest.mark.parametrize("command", COMMANDS, ids=[c.where for c in COMMANDS])
def test_a_documented_command_exits_as_the_docs_say(command: Command, folders) -> None:
    folder = folders(command.block.page)
    code, stdout, stderr = run_command(command, folder)
    assert code == command.exit, (f"{command.where}: `{command.text}` exited {code}, the docs say {command.exit}\n"
                                  f"stdout: {stdout[-2000:]}\nstderr: {stderr[-2000:]}")  # fmt: skip
    if command.output:
        assert matches(stdout.rstrip("\n").split("\n"), list(command.output)), (
            f"{command.where}: `{command.text}` printed\n{stdout}\nthe docs show\n" + "\n".join(command.output))


def matches(printed: list[str], shown: list[str]) -> bool:
    """Line for line, trailing spaces aside; a shown line `...` stands for any lines."""
    if not shown:
        return not printed
    if shown[0].strip() == "...":
        return any(matches(printed[skip:], shown[1:]) for skip in range(len(printed) + 1))
    return bool(printed) and printed[0].rstrip() == shown[0].rstrip() and matches(printed[1:], shown[1:])


def output_after(block: Block) -> Block | None:
    page = blocks(ROOT / block.page)
    following = [b for b in page if b.line > block.line]
    return following[0] if following and following[0].marker == "output" else None


@pytest.mark.parametrize("block", PYTHON, ids=[b.where for b in PYTHON])
def test_a_python_example_runs(block: Block, folders) -> None:
    folder = folders(block.page)
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    if block.title.startswith("test_") or "/test_" in block.title:
        argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", block.title]
    else:
        script = block.title or f"_example_{block.line}.py"
        if not block.title:
            (folder / script).write_text(block.body)
        argv = [sys.executable, script]
    done = subprocess.run(argv, cwd=folder, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=TIMEOUT)  # fmt: skip
    assert done.returncode == 0, f"{block.where} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    shown = output_after(block)
    if shown is not None:
        assert matches(done.stdout.rstrip("\n").split("\n"), shown.body.rstrip("\n").split("\n")), (
            f"{block.where} printed\n{done.stdout}\nthe docs show\n{shown.body}")


@pytest.mark.parametrize("block", MARKED, ids=[b.where for b in MARKED])
def test_a_block_that_does_not_run_here_says_why(block: Block) -> None:
    if block.marker == "fragment":
        assert len(block.detail.split()) >= 3, f"{block.where}: a fragment says why it cannot run on its own"
    elif block.marker == "excerpt of":
        lines = iter((ROOT / block.detail).read_text(encoding="utf-8").split("\n"))
        missing = [line for line in block.body.rstrip("\n").split("\n") if line.strip() and line not in lines]
        assert not missing, f"{block.where}: not lines of {block.detail}, in order: {missing}"
    else:
        runner = ROOT / block.detail.split()[0]
        assert runner.is_file(), f"{block.where}: {block.detail} is no test of this checkout"
        text = runner.read_text(encoding="utf-8")
        assert Path(block.page).name in text, f"{block.where}: {runner.name} does not read {block.page}"


def test_every_python_block_is_run_or_marked() -> None:
    """What the collection above rests on: no Python block is left out silently, and the examples are found."""
    python = [b for b in every_block() if b.lang == "python"]
    assert len(python) >= 20, "the parser finds the docs' Python blocks"
    assert all(b in PYTHON or b.marker in NOT_RUN for b in python)
    assert len(COMMANDS) >= 20, "the parser finds the docs' own commands"
