"""Rate limits: a token bucket per caller, in a table of bounded size (docs/guides/production.md).

    python -m mcpserver --http --rate-limit 20/s --burst 40 server.py     # each client, before any of its body

    @server.tool(rate_limit="10/m")                                       # one tool, in both eras, on every transport
    def search(query: str) -> str: ...

    server.middleware(ToolRateLimits({"git_log": "1/s"}))                 # the same for tools registered otherwise

Rules of this module:
- A rate is "N/s", "N/m" or "N/h" (N a positive whole number); the burst, how many may come at once, is N
  unless given. A bucket holds `burst` tokens, refills at the rate, and each request takes one.
- Refused, a request is told how long until it would pass (`retryAfterSeconds`, and Retry-After over HTTP):
  -32603 with HTTP status 429, as the tasks' limits are (codes -32000..-32099 are not ours to define).
- The table is bounded (`max_keys`): a new caller first takes the place of the least recently seen one if that
  bucket has filled up again (it then says nothing a fresh bucket would not); when every bucket in the table is
  still in use, newcomers share one overflow bucket. So 100,000 callers (forged identities, an IPv6 range)
  cost at most `max_keys` entries, and together get no more than one caller's rate beyond the table's.
- The clock is injectable (tests count, never time).
"""

from __future__ import annotations

import math
import threading
import time

from ._forks import renew_at_fork
from .errors import ConfigError, InternalError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Mapping, Optional, Union

__all__ = ["DEFAULT_MAX_KEYS", "Buckets", "Rate", "ToolRateLimits", "caller_of", "parse_rate", "rate_limited",
           "tool_limits"]

DEFAULT_MAX_KEYS = 10_000  # callers whose buckets are kept: ~1 MB; past it, newcomers share one bucket
_UNITS = {"s": (1.0, "a second"), "m": (60.0, "a minute"), "h": (3600.0, "an hour")}


class Rate:
    """A rate ("10/s", "600/m", "100/h") and its burst."""

    __slots__ = ("burst", "count", "per_second", "unit")

    def __init__(self, text: str, burst: Optional[int] = None):
        """ValueError, saying what is expected, when `text` or `burst` is not one."""
        count, slash, unit = str(text).strip().partition("/")
        if not (slash and count.isascii() and count.isdigit() and int(count) > 0 and unit in _UNITS):
            raise ValueError(f"a rate is N/s, N/m or N/h with N a whole number of at least 1 (10/s, 600/m), "
                             f"not {text!r}")
        if burst is not None and (isinstance(burst, bool) or not isinstance(burst, int) or burst < 1):
            raise ValueError(f"a burst is a whole number of at least 1, not {burst!r}")
        self.count = int(count)
        self.unit = unit
        self.per_second = self.count / _UNITS[unit][0]
        self.burst = self.count if burst is None else burst

    def __str__(self) -> str:
        return f"{self.count}/{self.unit}"

    def describe(self) -> str:
        return f"{self.count} {_UNITS[self.unit][1]} (bursts of {self.burst})"


def parse_rate(value: Union[str, Rate]) -> Rate:
    """A Rate from its text; ConfigError, saying what a rate is, when it is not one."""
    if isinstance(value, Rate):
        return value
    try:
        return Rate(value)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


class Buckets:
    """One token bucket per key, at one rate, in a table of at most `max_keys` entries."""

    def __init__(self, rate: Rate, max_keys: int = DEFAULT_MAX_KEYS, clock: Callable[[], float] = time.monotonic):
        self.rate = rate
        self.max_keys = max_keys
        self._clock = clock
        self._lock = threading.Lock()
        renew_at_fork(self, "_lock")
        self._table: dict[str, list[float]] = {}  # key -> [tokens, when counted]; insertion order: least recent first
        self._overflow = [float(rate.burst), clock()]
        self._refilled_after = rate.burst / rate.per_second  # seconds an unused bucket takes to fill up

    def __len__(self) -> int:
        return len(self._table)

    def take(self, key: str) -> float:
        """Take a token for `key`: 0.0 when there was one, else the seconds until there will be."""
        now = self._clock()
        with self._lock:
            bucket = self._table.pop(key, None)
            if bucket is None:
                bucket = self._place_locked(now)
            if bucket is not self._overflow:
                self._table[key] = bucket  # the most recent, last
            tokens = min(float(self.rate.burst), bucket[0] + (now - bucket[1]) * self.rate.per_second)
            bucket[1] = now
            if tokens >= 1:
                bucket[0] = tokens - 1
                return 0.0
            bucket[0] = tokens
            return (1 - tokens) / self.rate.per_second

    def _place_locked(self, now: float) -> list[float]:
        """A bucket for a key not in the table: a fresh one while there is room or the least recently seen has
        filled up again (forgetting it loses nothing), else the shared overflow bucket."""
        if len(self._table) >= self.max_keys:
            oldest = next(iter(self._table))
            if now - self._table[oldest][1] < self._refilled_after:
                return self._overflow
            del self._table[oldest]
        return [float(self.rate.burst), now]


def rate_limited(rate: Rate, wait: float, per: str) -> InternalError:
    """The refusal a client sees: what the limit is, whose it is, and when to try again."""
    seconds = max(1, math.ceil(wait))
    return InternalError(f"Too many requests: at most {rate.describe()} {per}; try again in {seconds} s",
                         data={"retryAfterSeconds": seconds, "limit": str(rate), "burst": rate.burst},
                         http_status=429)


def caller_of(principal: Any) -> str:
    """Whom a tool's limit counts: the OAuth subject (or client), else one bucket for every other caller (stdio's
    one client, holders of the static token, anonymous HTTP peers: the HTTP limit is per peer)."""
    if principal is None:
        return ""
    subject = getattr(principal, "subject", None)
    return f"subject {subject}" if subject else f"client {getattr(principal, 'client_id', '')}"


class ToolRateLimits:
    """A middleware limiting calls of some tools, each at its own rate, per caller (`caller_of`):
    `server.middleware(ToolRateLimits({"search": "10/m"}))`. `@server.tool(rate_limit=...)` uses the server's own."""

    def __init__(self, limits: Optional[Mapping[str, Union[str, Rate]]] = None, *, max_keys: int = DEFAULT_MAX_KEYS,
                 clock: Callable[[], float] = time.monotonic):
        self.max_keys = max_keys
        self._clock = clock
        self._buckets: dict[str, Buckets] = {}
        for name, rate in (limits or {}).items():
            self.limit(name, rate)

    def limit(self, tool: str, rate: Union[str, Rate]) -> None:
        """Limit calls of `tool` to `rate` ("10/m", or a Rate with its burst); ConfigError when it is no rate."""
        self._buckets = {**self._buckets, tool: Buckets(parse_rate(rate), self.max_keys, self._clock)}

    def __call__(self, call: Any, proceed: Callable[[], Any]) -> Any:
        if call.method == "tools/call":
            buckets = self._buckets.get(call.name)
            if buckets is not None:
                wait = buckets.take(caller_of(call.principal))
                if wait:
                    raise rate_limited(buckets.rate, wait, f"for the tool {call.name}")
        return proceed()


def tool_limits(server: Any) -> ToolRateLimits:
    """The server's own ToolRateLimits, added to its middleware when a first tool asks for a limit: a server
    without one pays nothing."""

    def made() -> ToolRateLimits:
        limits = ToolRateLimits()
        server.middleware(limits)
        return limits

    return server.component("tool rate limits", made)  # type: ignore[no-any-return]
