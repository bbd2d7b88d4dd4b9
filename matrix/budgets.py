"""What a suite may use, in one place: its peak memory and CPU time, measured in every cell (attempts.py)
and judged by outcomes.within_budget. A suite over its budget fails, saying which budget it broke.

The default is generous: a budget is there to catch a suite that uses several times what it should (the
container's own limit, attempts.MEMORY_LIMIT, is only the last line against one taking the host down). The
payload suite's is stated in what it moves: its largest exchanges are 5 MB each way, and each kind of
interpreter must fit the whole suite (the interpreter itself, pytest, the servers it starts and every copy
of the payloads they hold, page cache included) in a stated multiple of 5 MB, set from the peaks measured
on this machine kind with about a quarter to spare (docs/reports/performance.md#lab-run-times has the figures).
The exchange itself is held to 20 times its size by the payload suite's own test of the server's growth.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from . import arches
from .model import CellResult, Flavour, Implementation, Suite

MB = 1_000_000  # decimal, as the payload suite sizes its payloads (tests/payload/payloads.py: "5MB")
PAYLOAD_UNIT = 5 * MB  # the payload suite's largest exchange, each way
CPYTHON, FREE_THREADED, PYPY = "CPython", "CPython free-threaded", "PyPy"  # the kinds budgets tell apart


@dataclass(frozen=True, kw_only=True)
class Budget:
    memory: int  # bytes of peak memory
    cpu: float  # seconds of CPU time, user plus system
    memory_text: str = ""  # how the memory budget is stated, when not as plain megabytes
    scope: str = ""  # the kind of interpreter it is for, when not for every kind
    assumes: str = ""  # what it assumes of that kind's interpreters (ASSUMES)
    slowdown: float = 1.0  # an emulated architecture's (SLOWDOWN): the suite's timeout is that many times as long

    def __post_init__(self) -> None:
        if not self.memory_text:
            object.__setattr__(self, "memory_text", megabytes(self.memory))

    @property
    def text(self) -> str:
        return f"{self.memory_text}, {self.cpu:.0f}s CPU"


def megabytes(count: int) -> str:
    return f"{count / MB:,.0f} MB"


def payloads(multiple: int) -> Budget:
    """The payload suite's budget: `multiple` times its largest exchange."""
    return Budget(memory=multiple * PAYLOAD_UNIT, cpu=600.0,
                  memory_text=f"{multiple} x 5 MB ({megabytes(multiple * PAYLOAD_UNIT)})")  # fmt: skip


# What pytest itself runs with, by kind: PyPy sizes its nursery from the CPU cache /proc/cpuinfo reports (240 MiB
# on a host that reports 480 MiB), so the test process gets the bound the server keeps for itself
# (server/mcpserver/_pypy.py), and tests/conftest.py drops it before any test starts a process: the servers
# the suites start bound their own, as a user's do. With it the payload suite measures the same on either host.
DRIVER_ENV: Mapping[str, tuple[tuple[str, str], ...]] = {
    PYPY: (("PYPY_GC_NURSERY", "4MB"), ("MCPTEST_DRIVER_ONLY", "PYPY_GC_NURSERY")),
}
# What each kind's budgets assume of the interpreters they measure, said beside the budget in every report.
ASSUMES: Mapping[str, str] = {
    CPYTHON: "servers pin glibc's mmap threshold at 64 KiB after a large message",
    FREE_THREADED: "mimalloc; no mmap threshold pinned",
    PYPY: "pytest's nursery 4MB (PYPY_GC_NURSERY); servers bound their own to 4MB",
}

DEFAULT = Budget(memory=2000 * MB, cpu=1800.0)
# A runaway suite must not take the host down with it (seen: 24 GB before the kernel's OOM killer): every suite
# container's own limit (attempts.MEMORY_LIMIT). A peak within NEAR_LIMIT of it is reported even on a pass.
CONTAINER_MEMORY = 4 * 2**30
NEAR_LIMIT = 0.10
# Measured peaks of the payload suite (cgroup v1, Docker 20.10, 2 cores): CPython 112 to 232 MB, free-threaded
# CPython 3.13 347 to 374 MB, PyPy 3.11 477 to 512 MB (sid, 8.0.1) and 777 to 785 MB (trixie, 7.3.19).
BUDGETS: Mapping[Suite, Mapping[str, Budget]] = {
    Suite.PAYLOAD: {CPYTHON: payloads(60), FREE_THREADED: payloads(100), PYPY: payloads(200)},
}


# Emulated architectures (qemu-user, where this machine cannot run them itself) are slower, each by its own measure:
# the unit suite's wall time in the emulated cell over the native cell of the same Debian release and Python, on
# this machine kind (docs/reports/performance.md#lab-run-times has the runs). A suite's timeout and CPU budget
# scale by its architecture's; nothing is scaled where the architecture runs natively (i386 on x86_64, or arm64 on
# an arm64 runner). riscv64, ppc64el and armhf are opt-in and were not measured: they take the slowest measured factor.
# Measured on the emulated cells' declared part of the unit suite (budgets.UNDER_EMULATION): the same 1,430 tests'
# time in the emulated cell over the native cell's, in one cold run on 2 cores with other work on them (load 11 to
# 17): arm64 426 s against trixie's 39 s (x10.8, as a Cortex-A72: arches.py), s390x 405 s against bookworm's 43 s
# (x9.4). The http, payload and hostile parts measured x4.7 to x10.4 (docs/reports/performance.md#lab-run-times).
SLOWDOWN: Mapping[str, float] = {"arm64": 11.0, "s390x": 10.0}
# qemu-user keeps a translation cache of its own in every emulated process: the payload suite's peak memory (page
# cache included) in the arm64 and s390x cells over their native cells'.
EMULATED_MEMORY = 2.0
# What an emulated cell runs unless suites are asked for (--suite; SUITES=all in make runs everything): what can differ
# by architecture. Everything else is the same Python code on the same kernel, which the native cells run, the i386
# one included (32-bit, natively), and under qemu-user each test costs several times as much. Each suite with the
# test files it is cut to; () is the whole suite.
UNDER_EMULATION: Mapping[Suite, tuple[str, ...]] = {
    Suite.UNIT: (
        "tests/unit/test_nesting.py",  # JSON depth on small thread stacks: frames are larger on s390x
        "tests/unit/test_jose.py",  # byte order and word size: signatures are big integers from bytes
        "tests/unit/test_protocol.py",  # numbers, strings and their limits across the wire
        "tests/unit/test_frontmatter.py",  # the Skills parser against its golden file
        "tests/unit/test_task.py",  # what /proc says of a process, which qemu-user answers itself
        "tests/unit/test_task_sqlite.py",  # the SQLite task store: locking, full disks, several processes
        "tests/unit/test_stdio.py",  # signals while idle and mid-call, the reader's threads
        "tests/unit/test_inflight.py",  # threads: slow calls handed off, cancels
        "tests/unit/test_malloc.py",  # ctypes' mallopt(int, int) and the heap, whose maps qemu-user emulates
    ),
    Suite.HTTP: (
        "tests/http/test_http_server.py",  # the loop's epoll flags, worker threads, signals
        "tests/http/test_http_tls.py",  # OpenSSL on another byte order
    ),
    Suite.HOSTILE: (
        "tests/hostile/test_processes.py",  # signals and system calls by the architecture's own numbers
        "tests/hostile/test_json_input.py",  # nesting attacks on small stacks
        "tests/hostile/test_jose_matrix.py",  # forged signatures: big integers on another byte order
    ),
    Suite.PAYLOAD: (),  # the 500 KB argv and stdin canaries and every large message, whole
    Suite.IMAGES: (),  # the image's own architecture: ELF headers, PID 1, the entrypoint
}


def slowdown(arch: str) -> float:
    """How many times slower a suite runs in a cell of `arch` on this machine (1.0 where it runs natively)."""
    if not arch or not arches.emulated(arch):
        return 1.0
    return SLOWDOWN.get(arch, max(SLOWDOWN.values()))


def kind(implementation: Implementation, flavour: Flavour) -> str:
    """The kind of interpreter a cell promises, as budgets tell them apart."""
    if implementation is Implementation.PYPY:
        return PYPY
    return FREE_THREADED if flavour is Flavour.FREE_THREADED else CPYTHON


def kind_of(result: CellResult) -> str:
    """The same, from what a cell's interpreter said it is ('' when it said nothing)."""
    if not result.implementation:
        return ""
    if result.implementation.startswith("PyPy"):
        return PYPY
    return FREE_THREADED if result.flavour else CPYTHON


def budget_for(suite: Suite, of: str = CPYTHON, arch: str = "") -> Budget:
    """The budget of a suite for a kind of interpreter, on `arch` ('' for the machine's own): scaled when emulated."""
    found = BUDGETS.get(suite, {}).get(of)
    budget = replace(found, scope=of, assumes=ASSUMES.get(of, "")) if found else DEFAULT
    factor = slowdown(arch)
    if factor == 1.0:
        return budget
    emulated = f"{budget.memory_text} x {EMULATED_MEMORY:g} emulated on {arch}"
    return replace(budget, memory=int(budget.memory * EMULATED_MEMORY), cpu=budget.cpu * factor,
                   memory_text=emulated, slowdown=factor)
