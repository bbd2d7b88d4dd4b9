"""One error hierarchy for the lab; each class carries the exit code `main` turns it into.

A cell that fails is never one of these: it becomes an Outcome in its record (a step that cannot give a
cell what it needs raises `CellProblem`, which `run_cell` turns into the record). These are for the run as
a whole: a bad selector, no engine, a broken cells.toml. Messages are prose that say what to do next.
"""

from __future__ import annotations

from .exits import Exit
from .model import Outcome


class LabError(Exception):
    exit_code = Exit.FAILED

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UsageError(LabError):
    """The command line asks for something that does not exist or does not fit."""

    exit_code = Exit.USAGE


class LabInputError(LabError):
    """A file the lab reads is malformed: the cell table (cells.toml), or an earlier run's results.json. Not the
    server's mcpserver.errors.ConfigError, which is about a user's server."""

    exit_code = Exit.USAGE


class EngineError(LabError):
    """The Docker engine the run needs does not answer."""

    exit_code = Exit.NOTHING_RAN


class NothingToRun(LabError):
    """Every selected cell is unavailable here."""

    exit_code = Exit.NOTHING_RAN


class CellProblem(Exception):
    """A step could not give one cell what it needs: the cell's outcome (error or unavailable) and why."""

    def __init__(self, outcome: Outcome, message: str, log_tail: str = "") -> None:
        super().__init__(message)
        self.outcome = outcome
        self.message = message
        self.log_tail = log_tail
