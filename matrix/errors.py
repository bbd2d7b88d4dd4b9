"""One error hierarchy for the lab; each class carries the exit code `main` turns it into.

A cell that fails is never an exception: it becomes an Outcome in its record. These are for the run as a
whole: a bad selector, no engine, a broken cells.toml. Messages are prose that say what to do next.
"""

from __future__ import annotations


class LabError(Exception):
    exit_code = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UsageError(LabError):
    """The command line asks for something that does not exist or does not fit."""

    exit_code = 2


class ConfigError(LabError):
    """cells.toml (or another input file) is malformed."""

    exit_code = 2


class EngineError(LabError):
    """No Docker engine answers, or it refused something the whole run needs."""

    exit_code = 3


class NothingToRun(LabError):
    """Every selected cell is unavailable here."""

    exit_code = 3


class Interrupted(LabError):
    """Ctrl-C or SIGTERM: what finished is written, the rest marked cancelled."""

    exit_code = 130
