"""The request context: what a tool may know and do about the request it serves.

A tool asks for it by annotating a parameter with `Context`; that parameter never appears in the
input schema. A tool without one pays nothing.
"""

from __future__ import annotations

from typing import Any, Optional

__all__ = ["Context"]


class Context:
    """One request in flight, as its tool sees it."""

    __slots__ = ("meta", "request_id")

    def __init__(self, request_id: Any = None, meta: Optional[dict[str, Any]] = None):
        self.request_id = request_id
        self.meta: dict[str, Any] = meta or {}
