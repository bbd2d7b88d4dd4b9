"""The run's exit codes, in one place: what each means (which `--help` prints), and the names the code uses."""

from __future__ import annotations

import enum


class Exit(enum.IntEnum):
    PASSED = 0
    FAILED = 1
    USAGE = 2
    NOTHING_RAN = 3
    INTERRUPTED = 130

    @property
    def meaning(self) -> str:
        return MEANINGS[self]


MEANINGS = {
    Exit.PASSED: "every cell that could run passed (flaky ones too, unless --strict)",
    Exit.FAILED: "a cell failed, errored or timed out, or a whole run has a test no cell ran (skipped in every cell "
    "that collected it); with --strict also a cell that was flaky or unavailable",
    Exit.USAGE: "usage: a bad option or selector, a malformed cells.toml, or --merge of results that do not fit",
    Exit.NOTHING_RAN: "nothing could run: the Docker engine asked for does not answer, or every selected cell is "
    "unavailable",
    Exit.INTERRUPTED: "interrupted (Ctrl-C, SIGINT or SIGTERM): the partial report says what finished",
}
