"""The image checks read an executable's loader from its ELF header; every architecture's class and byte order."""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import pytest

from .conftest import LAB_ROOT

sys.path.insert(0, str(LAB_ROOT / "tests" / "images"))
from lab_checks import elf_interpreter


def an_elf(*, wide: bool, order: str, loader: bytes) -> bytes:
    """An ELF header with one program header, PT_INTERP, naming `loader`."""
    header = 0x40 if wide else 0x34
    phentsize = 0x38 if wide else 0x20
    data = bytearray(header + phentsize) + loader + b"\0"
    data[:6] = b"\x7fELF" + bytes([2 if wide else 1, 1 if order == "<" else 2])
    struct.pack_into(order + ("Q" if wide else "I"), data, 0x20 if wide else 0x1C, header)
    struct.pack_into(order + "HH", data, 0x36 if wide else 0x2A, phentsize, 1)
    where, size = header + phentsize, len(loader) + 1
    fields = (order + "IIQQQQ", 3, 0, where, 0, 0, size) if wide else (order + "IIIII", 3, where, 0, 0, size)
    phdr = struct.pack(*fields)
    data[header : header + len(phdr)] = phdr
    return bytes(data)


@pytest.mark.parametrize(("wide", "order", "loader"), [
    (True, "<", b"/lib64/ld-linux-x86-64.so.2"), (False, "<", b"/lib/ld-linux.so.2"),
    (True, ">", b"/lib/ld64.so.1"), (False, ">", b"/lib/ld.so.1"),
])  # fmt: skip
def test_the_loader_of_32_and_64_bit_executables_of_either_byte_order(wide: bool, order: str, loader: bytes) -> None:
    assert elf_interpreter(an_elf(wide=wide, order=order, loader=loader)) == loader.decode()


def test_this_machines_own_python_and_a_file_that_is_no_elf() -> None:
    assert elf_interpreter(Path(sys.executable).resolve().read_bytes()).startswith("/lib")
    with pytest.raises(ValueError, match="not an ELF file"):
        elf_interpreter(b"#!/bin/sh\n")
