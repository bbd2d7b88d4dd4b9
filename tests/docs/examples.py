"""The examples of the README and docs/, read as the tests run them (test_examples.py).

What a page says about its blocks, in HTML comments a reader never sees, on the line right before a fence:

- a ```python block runs, as a script in the page's own folder. With `title=NAME.py` (or a first line `# NAME.py`)
  it is that file instead,
  written there for later blocks to import, and run too (a `test_*.py` file by pytest). A text block marked
  `<!-- example: output -->` right after it is what the script prints, compared line for line.
- `<!-- example: fragment: REASON -->`: the block is not run, and REASON says why it cannot run on its own.
- `<!-- example: run by tests/PATH -->`: another test runs the block as written (a recipe with nginx, Docker); so
  does a `<!-- recipe: NAME -->` of a page in RECIPES.
- `<!-- example: excerpt of PATH -->`: the block's lines are lines of that file of the repository, in order (a test
  of the project runs the file).
- in a ```sh or ```console block, every command of this project's own command line (`mcpserver ...`,
  `python -m mcpserver ...`, `python scripts/run_matrix.py ...`) runs, and must exit 0 unless a comment at its
  end says `# exit N`. A server is stopped as its user would stop it: stdio by closing its input, HTTP by
  SIGTERM once it says it serves, `mcpserver dev` by Ctrl-C; each then exits 0. A lab run (`run_matrix.py` without
  `--help`, `--list` or `--github-matrix`) runs with `--list` added: its selectors are checked, no cell is built,
  since a run takes the engine and many minutes (`make matrix` in CI is that test). In a ```console block the lines
  after a `$ ` command are what it prints. Other programs (pip, docker, curl, gunicorn, make) are not run here.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w-]*)(?P<info>[^\n]*)\n(?P<body>.*?)^(?P=indent)```[ \t]*$",
                   re.S | re.M)
MARKER = re.compile(r"<!--\s*(?:example:\s*(?P<kind>fragment|run by|output|excerpt of)|(?P<recipe>recipe))\s*:?\s*"
                    r"(?P<detail>.*?)\s*-->\s*$")
# A page's recipes (`<!-- recipe: NAME -->`) are run as written by a test of their own, with the services they need.
RECIPES = {"docs/guides/auth.md": "tests/auth/test_recipes.py",
           "docs/guides/sessions.md": "tests/recipes/test_sessions_recipe.py"}
TITLE = re.compile(r"""title=["']?([\w./-]+)""")
NAMED = re.compile(r"# ([\w-]+\.py)\n")  # a first line `# hello.py`, as the README names its files
SHELLS = ("sh", "bash", "console", "shell")
# The project's own command line, after any VAR=value assignments.
OURS = re.compile(r"^(?:mcpserver|python3? -m mcpserver|python3? scripts/run_matrix\.py)(?:\s|$)")
EXIT = re.compile(r"#\s*exit (\d+)\b")


@dataclass(frozen=True)
class Block:
    page: str  # relative to the repository
    line: int  # of the opening fence
    lang: str
    title: str
    body: str
    marker: str = ""  # fragment, run by, excerpt of, output, or ""
    detail: str = ""

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


@dataclass(frozen=True)
class Command:
    block: Block
    line: int
    argv: list[str] = field(hash=False)
    env: dict[str, str] = field(hash=False)
    exit: int = 0
    output: tuple[str, ...] = ()  # a console block's lines after the command

    @property
    def where(self) -> str:
        return f"{self.block.page}:{self.line}"

    @property
    def text(self) -> str:
        return shlex.join([*(f"{k}={v}" for k, v in self.env.items()), *self.argv])


def pages() -> list[Path]:
    """Every page a user reads: the README and docs/ (the site), ADRs included."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks(path: Path) -> list[Block]:
    text = path.read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = MARKER.search(before)
        body = "\n".join(row[len(match.group("indent")):] for row in match.group("body").split("\n"))
        title = TITLE.search(match.group("info")) or NAMED.match(body)
        found.append(Block(page=str(path.relative_to(ROOT)), line=line, lang=match.group("lang"),
                           title=title.group(1) if title else "", body=body,
                           marker=(marker.group("kind") or "run by") if marker else "",
                           detail=recipe_runner(path, marker) if marker else ""))  # fmt: skip
    return found


def recipe_runner(path: Path, marker: re.Match[str]) -> str:
    """A marker's detail; for a recipe, the test that runs it and the recipe's name."""
    if not marker.group("recipe"):
        return marker.group("detail")
    runner = RECIPES.get(str(path.relative_to(ROOT)), "(no test runs this page's recipes)")
    return f"{runner} {marker.group('detail')}"


def commands(block: Block) -> list[Command]:
    """The project's own commands in a shell block, each with what the block says it exits with and prints."""
    found: list[Command] = []
    rows = block.body.split("\n")
    console = block.lang == "console"
    index = 0
    while index < len(rows):
        number = block.line + 1 + index
        row = rows[index]
        index += 1
        if console:
            if not row.startswith("$ "):
                continue
            row = row[2:]
        while row.endswith("\\") and index < len(rows):
            row = row[:-1] + " " + rows[index].strip()
            index += 1
        output: list[str] = []
        while console and index < len(rows) and not rows[index].startswith("$ "):
            output.append(rows[index])
            index += 1
        command = parse(row)
        if command is None:
            continue
        argv, env, comment = command
        expected = EXIT.search(comment)
        while output and not output[-1].strip():
            output.pop()
        found.append(Command(block=block, line=number, argv=argv, env=env,
                             exit=int(expected.group(1)) if expected else 0, output=tuple(output)))  # fmt: skip
    return found


def parse(row: str) -> tuple[list[str], dict[str, str], str] | None:
    """(argv, environment, the trailing comment) of one of the project's commands, else None."""
    lexer = shlex.shlex(row, posix=True, punctuation_chars=False)
    lexer.whitespace_split = True
    lexer.commenters = ""
    words: list[str] = []
    comment = ""
    try:
        for word in lexer:
            if word.startswith("#"):
                comment = row[row.index(word):]
                break
            words.append(word)
    except ValueError:  # an unclosed quote: not a command line
        return None
    env: dict[str, str] = {}
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    if not words or not OURS.match(" ".join(words)):
        return None
    return words, env, comment
