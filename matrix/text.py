"""Text the reports and messages share."""

from __future__ import annotations


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
