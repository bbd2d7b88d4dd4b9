"""glibc's mmap threshold, pinned so that large buffers go back to the system when freed (_malloc.py)."""

import json
import os
import subprocess
import sys

import pytest
from mcptest import DEMO, call, line, server_command

try:
    GLIBC = bool(os.confstr("CS_GNU_LIBC_VERSION"))
except (ValueError, OSError):
    GLIBC = False
APPLIES = GLIBC and sys.implementation.name == "cpython" and "t" not in getattr(sys, "abiflags", "")

# Frees a 1 MiB buffer (unpinned, glibc then raises its threshold to 1 MiB), allocates 512 KiB and says
# whether the threshold was pinned and whether that buffer was mapped apart rather than cut from the heap.
PROBE = """
import ctypes, json
from mcpserver._malloc import return_large_buffers
pinned = return_large_buffers()
freed = bytearray(1 << 20)
del freed
kept = bytearray(512 * 1024)
address = ctypes.addressof((ctypes.c_char * len(kept)).from_buffer(kept))
with open("/proc/self/maps") as maps:
    heap = [line.split()[0] for line in maps if line.rstrip().endswith("[heap]")]
low, high = (int(x, 16) for x in heap[0].split("-")) if heap else (0, 0)
print(json.dumps([pinned, not low <= address < high]))
"""


def probe(**env):
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **env}, check=True)  # fmt: skip
    return json.loads(done.stdout)


@pytest.mark.skipif(not APPLIES, reason="only CPython with the GIL on glibc pins the threshold")
def test_a_large_buffer_is_mapped_apart_after_a_larger_one_was_freed():
    assert probe() == [True, True]


@pytest.mark.skipif(not APPLIES, reason="only CPython with the GIL on glibc pins the threshold")
def test_the_operators_own_threshold_is_left_alone():
    # The control: glibc told by the operator (4 MiB) cuts the 512 KiB from the heap, as unpinned would.
    assert probe(MALLOC_MMAP_THRESHOLD_="4194304") == [False, False]


@pytest.mark.skipif(APPLIES, reason="CPython with the GIL on glibc pins the threshold")
def test_elsewhere_nothing_is_pinned():
    from mcpserver._malloc import return_large_buffers

    assert return_large_buffers() is False  # and ctypes, which a minimal build may lack, is not asked for


# A stdio server reports at exit whether it imported ctypes, which only a large message should cost it.
REPORTS_CTYPES = ("import atexit, runpy, sys; "
                  "atexit.register(lambda: sys.stderr.write('ctypes imported: %s\\n' % ('ctypes' in sys.modules))); "
                  "sys.argv = ['mcpserver', sys.argv[1]]; runpy.run_module('mcpserver', run_name='__main__')")


def ctypes_imported(text):
    argv = [sys.executable, "-c", REPORTS_CTYPES, server_command(DEMO)[-1]]
    done = subprocess.run(argv, input=line(call("echo", text=text)), capture_output=True, timeout=60)
    assert json.loads(done.stdout)["result"]["content"][0]["text"] == text
    return done.stderr.decode().splitlines()[-1]


def test_a_stdio_server_that_sees_only_small_messages_never_imports_ctypes():
    assert ctypes_imported("small") == "ctypes imported: False"


@pytest.mark.skipif(not APPLIES, reason="only CPython with the GIL on glibc pins the threshold")
def test_a_large_message_pins_the_threshold_in_a_stdio_server():
    assert ctypes_imported("x" * 300_000) == "ctypes imported: True"
