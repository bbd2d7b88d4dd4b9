"""Tool functions whose annotations are strings (PEP 563), including `X | None`, which Python 3.9
cannot evaluate: derivation must still give the same schema as everywhere else."""

from __future__ import annotations

import enum
from typing import Annotated, Literal


class Colour(enum.Enum):
    RED = "red"
    GREEN = "green"


def everything(name: str, count: int, ratio: float, flag: bool, tags: list[str], extra: dict[str, int],
               mode: Literal["fast", "slow"] = "fast", limit: int | None = None, note: str = None,
               colour: Colour = Colour.RED, size: Annotated[int, "Bytes to read"] = 10) -> str:
    """Exercise every supported annotation.

    Args:
        name: Who to greet.
        count: How many times.
    """
    return name
