"""The same tool function as signatures_future.py, with evaluated annotations (typing spellings)."""

import enum
from typing import Annotated, Dict, List, Literal, Optional


class Colour(enum.Enum):
    RED = "red"
    GREEN = "green"


def everything(name: str, count: int, ratio: float, flag: bool, tags: List[str], extra: Dict[str, int],
               mode: Literal["fast", "slow"] = "fast", limit: Optional[int] = None, note: str = None,
               colour: Colour = Colour.RED, size: Annotated[int, "Bytes to read"] = 10) -> str:
    """Exercise every supported annotation.

    Args:
        name: Who to greet.
        count: How many times.
    """
    return name
