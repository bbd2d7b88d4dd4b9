"""What a suite may use, in one place: its peak memory and CPU time, measured in every cell (suiterun.py)
and judged by outcomes.within_budget. A suite over its budget fails, saying which budget it broke.

The default is generous: a budget is there to catch a suite that uses several times what it should (the
container's own limit, suiterun.MEMORY_LIMIT, is only the last line against one taking the host down). The
payload suite's is stated in what it moves: its largest exchange is 5 MB each way on one connection, and
every interpreter must fit that in a small multiple of 5 MB (a copy per layer of the server, the client,
pytest and the interpreter itself are inside it).
"""

from __future__ import annotations

from dataclasses import dataclass

from .model import Suite

MB = 1_000_000  # decimal, as the payload suite sizes its payloads (tests/payload/payloads.py: "5MB")
PAYLOAD_UNIT = 5 * MB  # the payload suite's largest exchange, each way


@dataclass(frozen=True, kw_only=True)
class Budget:
    memory: int  # bytes of peak memory
    cpu: float  # seconds of CPU time, user plus system
    memory_text: str = ""  # how the memory budget is stated, when not as plain megabytes

    def __post_init__(self) -> None:
        if not self.memory_text:
            object.__setattr__(self, "memory_text", megabytes(self.memory))


def megabytes(count: int) -> str:
    return f"{count / MB:,.0f} MB"


PAYLOAD_MULTIPLE = 60
DEFAULT = Budget(memory=2000 * MB, cpu=1800.0)
BUDGETS: dict[Suite, Budget] = {
    Suite.PAYLOAD: Budget(memory=PAYLOAD_MULTIPLE * PAYLOAD_UNIT, cpu=600.0,
                          memory_text=f"{PAYLOAD_MULTIPLE} x 5 MB ({megabytes(PAYLOAD_MULTIPLE * PAYLOAD_UNIT)})"),
}  # fmt: skip


def budget_for(suite: Suite) -> Budget:
    return BUDGETS.get(suite, DEFAULT)
