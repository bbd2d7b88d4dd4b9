"""Text the reports and messages share."""

from __future__ import annotations

from collections.abc import Sequence


def shorten(text: str, limit: int) -> str:
    """`text` in at most about `limit` characters, cut between words (a path or a word is never cut; one
    longer than the limit is kept whole), marked with an ellipsis when anything was left out."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit)
    if cut <= 0:
        cut = text.find(" ", limit)
        if cut < 0:
            return text
    return text[:cut].rstrip(" ;,:") + " …"


def first(items: Sequence[str], count: int) -> str:
    """The first `count` of `items`, comma-separated, then how many more there are: "a, b, c and 4 more"."""
    return ", ".join(items[:count]) + (f" and {len(items) - count} more" if len(items) > count else "")
