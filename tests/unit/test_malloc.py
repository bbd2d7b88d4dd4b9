"""glibc's mmap threshold, pinned so that large buffers go back to the system when freed (_malloc.py)."""

import json
import os
import subprocess
import sys
import time

import pytest
from mcptest import HttpServer, call, line, server_command

try:
    GLIBC = bool(os.confstr("CS_GNU_LIBC_VERSION"))
except (ValueError, OSError):
    GLIBC = False
APPLIES = GLIBC and sys.implementation.name == "cpython" and "t" not in getattr(sys, "abiflags", "")

# Frees a 1 MiB buffer (unpinned, glibc then raises its threshold to 1 MiB), then keeps 32 buffers of 200 KiB
# (a step of a body's buffer growing, between 64 and 256 KiB: the soak's heap grew with these), and says
# whether the threshold was pinned and whether most of them were mapped apart rather than cut from the heap.
# Most, not all: glibc serves a large request from free room in the heap first, and maps it only when there
# is none (Python 3.14 starts with room for a few).
PROBE = """
import ctypes, json
from mcpserver._malloc import return_large_buffers
pinned = return_large_buffers()
freed = bytearray(1 << 20)
del freed
kept = [bytearray(200 * 1024) for _ in range(32)]
addresses = [ctypes.addressof((ctypes.c_char * len(buffer)).from_buffer(buffer)) for buffer in kept]
with open("/proc/self/maps") as maps:
    heap = [line.split()[0] for line in maps if line.rstrip().endswith("[heap]")]
low, high = (int(x, 16) for x in heap[0].split("-")) if heap else (0, 0)
apart = sum(not low <= address < high for address in addresses)
print(json.dumps([pinned, apart > len(kept) // 2, bool(heap)]))
"""


def probe(**env):
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **env}, check=True)  # fmt: skip
    pinned, apart, heap_seen = json.loads(done.stdout)
    if not heap_seen:  # every buffer would look "mapped apart", and the control would fail for nothing
        pytest.skip("/proc/self/maps shows no [heap] here (qemu-user's emulated maps, as in the lab's arm64 and "
                    "s390x cells), so a buffer cut from the heap cannot be told from one mapped apart")
    return [pinned, apart]


@pytest.mark.skipif(not APPLIES, reason="only CPython with the GIL on glibc pins the threshold")
def test_a_large_buffer_is_mapped_apart_after_a_larger_one_was_freed():
    assert probe() == [True, True]


@pytest.mark.skipif(not APPLIES, reason="only CPython with the GIL on glibc pins the threshold")
def test_the_operators_own_threshold_is_left_alone():
    # The control: glibc told by the operator (4 MiB) cuts the 200 KiB buffers from the heap, as unpinned would.
    assert probe(MALLOC_MMAP_THRESHOLD_="4194304") == [False, False]


@pytest.mark.skipif(APPLIES, reason="CPython with the GIL on glibc pins the threshold")
def test_elsewhere_nothing_is_pinned():
    from mcpserver._malloc import return_large_buffers

    assert return_large_buffers() is False  # and ctypes, which a minimal build may lack, is not asked for


# A server that says at exit whether it imported ctypes, which only a large message should cost it.
REPORTS_CTYPES = """
import atexit, sys
from mcpserver import Server

server = Server("probe")


@server.tool()
def echo(text: str) -> str:
    return text


atexit.register(lambda: sys.stderr.write("ctypes imported: %s\\n" % ("ctypes" in sys.modules)))
"""


@pytest.fixture
def probe_target(tmp_path):
    target = tmp_path / "probe.py"
    target.write_text(REPORTS_CTYPES)
    return str(target)


def over_stdio(target, text):
    done = subprocess.run(server_command(target), input=line(call("echo", text=text)), capture_output=True,
                          timeout=60)  # fmt: skip
    assert json.loads(done.stdout)["result"]["content"][0]["text"] == text
    return done.stderr.decode().splitlines()[-1]


def over_http(target, text, env=None):
    with HttpServer(target, env=env) as server:
        status, _, body = server.post(call("echo", text=text))
        assert status == 200 and body["result"]["content"][0]["text"] == text
        assert server.stop() == 0
        deadline = time.monotonic() + 30  # the process has ended; its last stderr line is on its way to us
        while "ctypes imported" not in server.stderr and time.monotonic() < deadline:
            time.sleep(0.01)
        return [line for line in server.stderr.splitlines() if line.startswith("ctypes imported")][-1]


@pytest.mark.parametrize("transport", [over_stdio, over_http])
def test_a_server_that_sees_only_small_messages_never_imports_ctypes(probe_target, transport):
    # Over HTTP a second worker (started when a loaded machine is slow to hand the first one back) caps the arenas
    # through ctypes, unless the environment already says how many: said here, so only the threshold is tested.
    extra = {"env": {"MALLOC_ARENA_MAX": "8"}} if transport is over_http else {}
    assert transport(probe_target, "small", **extra) == "ctypes imported: False"


@pytest.mark.skipif(not APPLIES, reason="only CPython with the GIL on glibc pins the threshold")
@pytest.mark.parametrize("transport", [over_stdio, over_http])
def test_a_large_message_pins_the_threshold(probe_target, transport):
    assert transport(probe_target, "x" * 300_000) == "ctypes imported: True"


# Eight threads that each allocate while all are alive, then glibc's own count of its arenas (malloc_stats
# prints one "Arena N:" block each to stderr), whether bound_arenas() said they are bounded, and whether
# trim() then trimmed (only where ctypes was loaded for the arenas or the threshold).
ARENAS = """
import ctypes, sys, threading
from mcpserver._malloc import bound_arenas, trim
bounded = bound_arenas() if sys.argv[1:] == ["bound"] else None
barrier = threading.Barrier(8)
def work():
    kept = [bytearray(1000) for _ in range(100)]
    barrier.wait()
threads = [threading.Thread(target=work) for _ in range(8)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
sys.stderr.flush()
ctypes.CDLL(None).malloc_stats()
print(bounded, trim())
"""


def arenas(*argv, **env):
    done = subprocess.run([sys.executable, "-c", ARENAS, *argv], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **env}, check=True)  # fmt: skip
    return done.stdout.strip(), sum(line.startswith("Arena ") for line in done.stderr.splitlines())


@pytest.mark.skipif(not APPLIES, reason="only CPython with the GIL on glibc bounds the arenas")
def test_bounded_arenas_are_shared_by_every_thread_started_after_and_can_be_trimmed():
    from mcpserver._malloc import ARENA_MAX

    unbounded = arenas()[1]
    assert unbounded > ARENA_MAX, "the control: eight threads, an arena each"
    assert arenas("bound") == ("True True", ARENA_MAX)
    assert arenas("bound", MALLOC_ARENA_MAX="3") == ("False False", 3), "the operator's setting is left alone"
    assert arenas()[0] == "None False", "no ctypes loaded: nothing trimmed"


# A tool that leaves its heap full of free pages: 48 MB of 120 KB buffers (below the pinned threshold, so cut
# from the heap), each followed by a small chunk that is kept, so the freed space is never the heap's top, which
# is all glibc gives back by itself.
FRAGMENTS = """
from mcpserver import Server

server = Server("fragments")
kept = []


@server.tool()
def fragment(text: str) -> str:
    freed = []
    for _ in range(800):  # under the pinned threshold (LARGE_BYTES), so they are cut from the heap
        freed.append(bytearray(60_000))
        kept.append(bytearray(600))
    del freed
    with open("/proc/self/status") as status:  # read here: the loop's next trim may come before the client's read
        return next(line for line in status if line.startswith("VmRSS:")).split()[1]
"""


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as status:
        return int(next(line for line in status if line.startswith("VmRSS:")).split()[1]) / 1024


@pytest.mark.skipif(not APPLIES, reason="only CPython with the GIL on glibc trims (it loads ctypes for the threshold)")
def test_an_http_server_gives_its_free_heap_pages_back_without_coming_to_rest(tmp_path):
    # Its one worker is one of the pool's kept ones, which never retires: before, only a retiring worker trimmed.
    from mcpserver._malloc import TRIM_SECONDS

    with open("/proc/self/maps") as maps:
        if not any(line.rstrip().endswith("[heap]") for line in maps):
            pytest.skip("qemu-user's emulated maps (the lab's arm64 and s390x cells): its madvise gives nothing back")
    target = tmp_path / "fragments.py"
    target.write_text(FRAGMENTS)
    with HttpServer(str(target)) as server:
        before = rss_mib(server.process.pid)
        status, _, body = server.post(call("fragment", text="x" * 300_000))  # a large message: the threshold pinned
        assert status == 200
        freed_at = int(body["result"]["content"][0]["text"]) / 1024  # the tool's RSS once it had freed them
        assert freed_at > before + 40, "the control: the freed buffers are still resident"
        deadline = time.monotonic() + TRIM_SECONDS + 30
        while rss_mib(server.process.pid) > before + 20:
            assert time.monotonic() < deadline, f"RSS {rss_mib(server.process.pid):.0f} MiB, {before:.0f} at start"
            time.sleep(0.2)
