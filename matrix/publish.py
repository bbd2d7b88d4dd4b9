"""What the repository shows of the lab, written by a run, never by hand (`--publish`, `make matrix-publish`): the
README's few lines of summary, docs/matrix.md (the run's Markdown report) and docs/img/report.png (headless
Chromium's picture of the top of report.html: the whole grid and the charts). Each names the commit and the run.

Only a whole run can be published, of a tree without uncommitted changes, that passed: what the repository shows is
then what a fresh clone of that commit gives. tests/lab/test_published.py fails when the published report's cells
are not the table's, or the three do not name the same run.
"""

from __future__ import annotations

import re
import shutil
import struct
import tempfile
import zlib
from collections.abc import Sequence
from pathlib import Path

from . import skips
from .exits import Exit
from .model import Cell, CellResult, Environment, Outcome
from .outcomes import counts
from .processes import Processes

MATRIX_MD = Path("docs/matrix.md")
REPORT_PNG = Path("docs/img/report.png")
README = Path("README.md")
START = "<!-- lab summary: written by `make matrix-publish`; edit matrix/publish.py instead -->"
END = "<!-- lab summary: end -->"
ROW = re.compile(r"^\| `([^`]+)` \|", re.MULTILINE)  # a cell's row in docs/matrix.md
SHOT = (1500, 1500)  # the screenshot's window: the top of the page, grid and charts


def refusal(env: Environment, code: Exit) -> str:
    """Why this run's reports cannot stand for the repository ('' when they can)."""
    if not skips.judged(env):
        return f"only a whole run is published, and this one was not ({env.subset or env.partial or env.shard})"
    if env.dirty:
        return f"the tree has uncommitted changes ({', '.join(env.dirty[:5])}): commit them, then run again"
    if not env.commit:
        return "the tree is not a git checkout, so there is no commit to name"
    if code is not Exit.PASSED:
        return f"the run did not pass (exit {code.value})"
    return ""


def named(env: Environment) -> str:
    """How each published file names what it shows."""
    return f"run {env.run_id} of commit {env.commit[:12]} ({env.date})"


def summary(results: Sequence[CellResult], env: Environment, table: Sequence[Cell]) -> list[str]:
    """The README's lines: what ran and how it came out, how long it took, and where the rest is."""
    tally = ", ".join(f"{n} {k}" for k, n in counts(results).items() if n)
    arches = sorted({r.arch for r in results if r.outcome is Outcome.PASSED})
    left = len(table) - len(results)
    return [
        START,
        f"The latest published full run is {named(env)}, on {env.host or 'this machine'}: {len(results)} cells, "
        f"{tally}" + (f" ({left} opt-in cells not run)" if left > 0 else "") + f"; passed on {', '.join(arches)}; "
        f"{env.duration / 60:.0f} min from start to reports. Every cell, suite and skip, and where the time went: "
        f"[docs/matrix.md](docs/matrix.md); the grid of report.html:",
        "",
        '<a href="docs/matrix.md"><img src="docs/img/report.png" alt="The grid of the published run\'s report.html: '
        'a square per cell" width="480"></a>',
        END,
    ]


def with_summary(readme: str, lines: Sequence[str]) -> str:
    """The README with its summary block replaced (ValueError when it has no block to replace)."""
    start, end = readme.find(START), readme.find(END)
    if start < 0 or end < start:
        raise ValueError(f"README.md has no lab summary block ({START} ... {END}) to write into")
    return readme[:start] + "\n".join(lines) + readme[end + len(END) :]


def matrix_md(markdown: str, env: Environment) -> str:
    return (f"# The latest lab report\n\nWritten by `make matrix-publish` ({named(env)}), never by hand. Every run "
            "writes the same report in `matrix/results/latest/matrix.md`.\n\n" + markdown)  # fmt: skip


def png_with_text(png: bytes, key: str, text: str) -> bytes:
    """A PNG with a tEXt chunk added before its end: the picture names its run too."""
    data = key.encode("latin-1") + b"\0" + text.encode("latin-1")
    chunk = struct.pack(">I", len(data)) + b"tEXt" + data + struct.pack(">I", zlib.crc32(b"tEXt" + data))
    end = png.rindex(b"IEND") - 4
    return png[:end] + chunk + png[end:]


def png_texts(png: bytes) -> dict[str, str]:
    """A PNG's tEXt chunks."""
    found, at = {}, 8
    while at + 8 <= len(png):
        (length,) = struct.unpack(">I", png[at : at + 4])
        kind, data = png[at + 4 : at + 8], png[at + 8 : at + 8 + length]
        if kind == b"tEXt":
            key, _, text = data.partition(b"\0")
            found[key.decode("latin-1")] = text.decode("latin-1")
        at += 12 + length
    return found


def screenshot(page: Path, processes: Processes) -> bytes:
    """Headless Chromium's picture of the top of the page, in a profile of its own."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        raise RuntimeError("headless Chromium takes the picture: `make lab-browser` installs it")
    with tempfile.TemporaryDirectory(prefix="mcplab-shot-") as folder:
        shot = Path(folder) / "report.png"
        argv = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
                f"--user-data-dir={folder}/profile", f"--window-size={SHOT[0]},{SHOT[1]}", f"--screenshot={shot}",
                page.as_uri()]  # fmt: skip
        done = processes.command(argv, timeout=120)
        if not shot.is_file():
            raise RuntimeError(f"Chromium drew no picture of {page}: {done.last_line()}")
        return shot.read_bytes()


def publish(root: Path, folder: Path, results: Sequence[CellResult], env: Environment, table: Sequence[Cell],
            processes: Processes) -> list[Path]:  # fmt: skip
    """Write the run's reports (in `folder`) where the repository shows them; returns the files written."""
    readme = root / README
    readme.write_text(with_summary(readme.read_text(encoding="utf-8"), summary(results, env, table)), encoding="utf-8")
    (root / MATRIX_MD).write_text(matrix_md((folder / "matrix.md").read_text(encoding="utf-8"), env), encoding="utf-8")
    picture = png_with_text(screenshot(folder / "report.html", processes), "Comment", f"mcpserver lab: {named(env)}")
    (root / REPORT_PNG).parent.mkdir(parents=True, exist_ok=True)
    (root / REPORT_PNG).write_bytes(picture)
    return [readme, root / MATRIX_MD, root / REPORT_PNG]


def published_cells(markdown: str) -> list[str]:
    """The cells a published docs/matrix.md has a row for, in order."""
    table = markdown.split("\n\n| cell |", 1)[-1].split("\n\n", 1)[0]
    return ROW.findall(table)
