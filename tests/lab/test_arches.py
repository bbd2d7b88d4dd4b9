"""Architectures by Debian's name, and what this machine needs to run each: pure, but for binfmt_misc's files."""

from __future__ import annotations

from pathlib import Path

from matrix.arches import binfmt_problem, emulated, emulator_env, native


def test_a_machine_runs_its_own_and_its_32_bit_kin_natively_and_the_rest_under_an_emulator() -> None:
    assert native("x86_64") == "amd64" and native("aarch64") == "arm64" and native("mips") == ""
    assert not emulated("i386", "x86_64") and emulated("arm64", "x86_64") and emulated("s390x", "x86_64")
    assert not emulated("arm64", "aarch64") and emulated("amd64", "aarch64")


def test_arm64_is_emulated_as_a_cortex_a72_and_nothing_else_gets_a_cpu_of_its_own() -> None:
    assert emulator_env("arm64") == {"QEMU_CPU": "cortex-a72"}
    assert emulator_env("s390x") == {} == emulator_env("armhf") == emulator_env("")


def test_why_binfmt_misc_cannot_run_an_architecture(tmp_path: Path) -> None:
    assert binfmt_problem("i386", "x86_64", tmp_path) == ""  # native: binfmt_misc is not asked
    assert "binfmt_misc is not mounted" in binfmt_problem("arm64", "x86_64", tmp_path)
    (tmp_path / "status").write_text("enabled\n")
    assert "no qemu-aarch64 handler is registered" in binfmt_problem("arm64", "x86_64", tmp_path)
    handler = "enabled\ninterpreter /usr/libexec/qemu-binfmt/aarch64-binfmt-P\nflags: P\noffset 0\n"
    (tmp_path / "qemu-aarch64").write_text(handler)
    assert "lacks the F flag" in binfmt_problem("arm64", "x86_64", tmp_path)
    (tmp_path / "qemu-aarch64").write_text(handler.replace("flags: P", "flags: PF"))
    assert binfmt_problem("arm64", "x86_64", tmp_path) == ""
    (tmp_path / "qemu-aarch64").write_text(handler.replace("enabled", "disabled"))
    assert "handler is disabled" in binfmt_problem("arm64", "x86_64", tmp_path)
