"""Base selection as pure data: what this machine offers in, the ordered ways to get a base out."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pytest

from matrix.bases import BaseAction, BaseFacts, bootstrap_tag, plan_base, pull_reference
from matrix.bootstrap import (
    CUSTOMIZE,
    NOT_KEPT,
    SOURCE_DATE_EPOCH,
    apk_version,
    mmdebstrap_argv,
    prepare_rootfs,
    snapshot_expired,
)
from matrix.table import load_cells

CELLS = {c.name: c for c in load_cells()}
TOOLS = {"mmdebstrap": True, "arch_test": True}  # both installed
HERE = BaseFacts(registry="no registry reachable (no such host)", **TOOLS, root=True, env={}, arch="amd64")
UBUNTU_KEYRING = "/usr/share/keyrings/ubuntu-archive-keyring.gpg"


def actions(name: str, facts: BaseFacts) -> list[str]:
    return [s.action.value for s in plan_base(CELLS[name], facts)]


def test_on_this_machine_debian_is_bootstrapped_and_the_rest_unavailable_with_reasons() -> None:
    for name, cell in CELLS.items():
        if not cell.family.in_container:
            continue
        steps = plan_base(cell, HERE)
        recipe = cell.base_cell or cell  # the musl cell's builder stage runs on the trixie cell's base
        if recipe.family.value == "debian" and recipe.python_from.value == "distro":
            assert [s.action for s in steps] == [BaseAction.MMDEBSTRAP, BaseAction.UNAVAILABLE], name
        else:
            assert [s.action for s in steps] == [BaseAction.UNAVAILABLE], name
            said = (f"{cell.base}: not present for {cell.arch}, not pulled" if cell.arch
                    else f"{cell.base}: not present, no registry reachable")  # fmt: skip
            assert steps[0].reason.startswith(said), steps[0].reason


def test_unavailable_reasons_say_what_to_set() -> None:
    ubuntu = plan_base(CELLS["ubuntu-24.04-py3.12"], HERE)[-1].reason
    assert ubuntu == (
        "ubuntu:24.04: not present, no registry reachable (no such host), "
        "no Ubuntu mirror configured (set LAB_UBUNTU_MIRROR to bootstrap it with mmdebstrap)"
    )
    alpine = plan_base(CELLS["alpine-3.23-py3.12"], HERE)[-1].reason
    assert "no Alpine mirror configured (set LAB_ALPINE_MIRROR" in alpine
    official = plan_base(CELLS["alpine-official-py3.13"], HERE)[-1].reason
    assert "official images cannot be bootstrapped" in official


def test_present_base_wins() -> None:
    facts = BaseFacts(present=frozenset({"debian:bookworm"}), registry="", **TOOLS, root=True, env={})
    assert actions("debian-bookworm-py3.11", facts) == ["present"]


def test_a_base_bootstrapped_earlier_is_found_by_its_tag() -> None:
    cell = CELLS["debian-sid-py3.14"]
    tag = bootstrap_tag(cell, "")
    facts = BaseFacts(present=frozenset({tag}), registry="x", env={})
    steps = plan_base(cell, facts)
    assert [(s.action, s.image) for s in steps] == [(BaseAction.PRESENT, tag)]


def test_both_sid_cells_share_one_base() -> None:
    assert plan_base(CELLS["debian-sid-py3.14"], HERE) == plan_base(CELLS["debian-sid-py3.15"], HERE)


def test_the_musl_cell_shares_the_trixie_cells_base() -> None:
    # Its builder stage compiles on that base: one bootstrap serves both (Bases keys on the plan).
    musl, trixie = CELLS["musl-busybox-py3.13"], CELLS["debian-trixie-py3.13"]
    assert musl.base_cell == trixie
    for facts in (HERE, BaseFacts(registry="", **TOOLS, root=True, env={}), BaseFacts(engine="no engine")):
        assert plan_base(musl, facts) == plan_base(trixie, facts)
    tag = bootstrap_tag(trixie, "")
    assert plan_base(musl, BaseFacts(present=frozenset({tag}), env={}))[0].image == tag


def test_a_builder_cell_without_a_base_cell_is_unavailable_with_the_reason() -> None:
    lone = replace(CELLS["musl-busybox-py3.13"], base_cell=None)
    steps = plan_base(lone, HERE)
    assert [s.action for s in steps] == [BaseAction.UNAVAILABLE]
    assert "had like another cell's, and none was given" in steps[0].reason


def test_registry_first_then_bootstrap() -> None:
    facts = BaseFacts(registry="", **TOOLS, root=True, env={})
    assert actions("debian-trixie-py3.13", facts) == ["pull", "mmdebstrap", "unavailable"]
    assert actions("debian-slim-py3.12", facts) == ["pull", "unavailable"]


def test_registry_mirror_is_honoured() -> None:
    facts = BaseFacts(registry="", env={"LAB_REGISTRY_MIRROR": "mirror.invalid:5000"})
    pull = plan_base(CELLS["alpine-official-py3.14"], facts)[0]
    assert (pull.action, pull.source, pull.image) == (
        BaseAction.PULL,
        "mirror.invalid:5000/library/python:3.14-alpine",
        "python:3.14-alpine",
    )
    assert pull_reference("org/image:1", "m:1/") == "m:1/org/image:1"


def test_ubuntu_bootstraps_once_a_mirror_and_keyring_exist() -> None:
    env = {"LAB_UBUNTU_MIRROR": "http://ubuntu.mirror.invalid/ubuntu/"}
    facts = BaseFacts(registry="x", **TOOLS, root=True, env=env, keyrings=frozenset({UBUNTU_KEYRING}))
    step = plan_base(CELLS["ubuntu-22.04-py3.10"], facts)[0]
    assert (step.action, step.source) == (BaseAction.MMDEBSTRAP, "http://ubuntu.mirror.invalid/ubuntu")
    no_keyring = BaseFacts(registry="x", **TOOLS, root=True, env=env)
    assert "set LAB_UBUNTU_KEYRING" in plan_base(CELLS["ubuntu-22.04-py3.10"], no_keyring)[-1].reason
    own = {**env, "LAB_UBUNTU_KEYRING": "/srv/ubuntu.gpg"}
    facts = BaseFacts(registry="x", **TOOLS, root=True, env=own, keyrings=frozenset({"/srv/ubuntu.gpg"}))
    step = plan_base(CELLS["ubuntu-22.04-py3.10"], facts)[0]
    assert step.bootstrap is not None and step.bootstrap.keyring == "/srv/ubuntu.gpg"


def test_alpine_bootstraps_from_a_configured_mirror() -> None:
    facts = BaseFacts(registry="x", env={"LAB_ALPINE_MIRROR": "http://alpine.mirror.invalid/alpine"})
    assert actions("alpine-3.23-py3.12", facts) == ["apk", "unavailable"]


@pytest.mark.parametrize(
    ("facts", "fragment"),
    [
        (BaseFacts(registry="x", mmdebstrap=False, root=True, env={}), "mmdebstrap is not installed"),
        (BaseFacts(registry="x", mmdebstrap=True, arch_test=True, root=False, env={}), "mmdebstrap needs root"),
        (BaseFacts(engine="no Docker engine answers", env={}), "no Docker engine answers"),
    ],
)
def test_missing_tools_make_debian_unavailable_with_the_reason(facts: BaseFacts, fragment: str) -> None:
    steps = plan_base(CELLS["debian-bookworm-py3.11"], facts)
    assert steps[-1].action is BaseAction.UNAVAILABLE and fragment in steps[-1].reason


def test_another_architecture_never_takes_the_machines_own_base_and_has_a_base_of_its_own() -> None:
    arm = CELLS["debian-trixie-py3.13-arm64"]
    facts = replace(HERE, present=frozenset({"debian:trixie"}), registry="")
    steps = plan_base(arm, facts)
    assert [s.action for s in steps] == [BaseAction.MMDEBSTRAP, BaseAction.UNAVAILABLE]
    assert steps[0].bootstrap is not None and steps[0].bootstrap.arch == "arm64"
    assert steps[0].reason == "mmdebstrapped for arm64 from mmdebstrap's default mirror"
    assert "a pull for arm64 would retag this machine's own debian:trixie" in steps[-1].reason
    assert steps[0].image.startswith("mcplab/base:debian-trixie-arm64-")
    own = CELLS["debian-trixie-py3.13"]
    assert bootstrap_tag(arm, "") != bootstrap_tag(own, "")
    # On an arm64 machine the same cell is the machine's own: what is present or pulled there is arm64.
    assert [s.action for s in plan_base(arm, replace(facts, arch="arm64"))] == [BaseAction.PRESENT]


def test_a_bases_tag_moves_only_when_what_makes_it_does() -> None:
    # Pinned: a change of the recipe's version, the pinned SOURCE_DATE_EPOCH or any other input remakes every base,
    # which takes minutes on a fresh machine: on purpose only. The machine's own architecture is not an input.
    assert bootstrap_tag(CELLS["debian-trixie-py3.13"], "") == "mcplab/base:debian-trixie-69793ed4c630"


def test_bootstrap_tags_are_deterministic_and_move_with_the_mirror() -> None:
    cell = CELLS["debian-bookworm-py3.11"]
    assert bootstrap_tag(cell, "") == bootstrap_tag(cell, "")
    assert bootstrap_tag(cell, "") != bootstrap_tag(cell, "http://other.invalid/debian")
    assert bootstrap_tag(cell, "").startswith("mcplab/base:debian-bookworm-")


SID_RELEASE = (
    "Origin: Debian\nSuite: unstable\nDate: Fri, 30 Oct 2026 08:08:01 UTC\nValid-Until: Fri, 06 Nov 2026 08:08:01 UTC\n"
)
NOW = datetime(2026, 11, 30, tzinfo=timezone.utc)


def test_expired_snapshots_are_detected() -> None:
    assert snapshot_expired(SID_RELEASE, NOW)
    assert not snapshot_expired(SID_RELEASE, datetime(2026, 11, 1, tzinfo=timezone.utc))
    assert not snapshot_expired("Suite: stable\nDate: Sat, 11 Jul 2026 10:16:37 UTC\n", NOW)  # stable has none


def test_prepare_rootfs_disables_valid_until_only_when_expired(tmp_path: Path) -> None:
    for name, text in (("sid", SID_RELEASE), ("bookworm", "Suite: stable\n")):
        root = tmp_path / name
        lists = root / "var/lib/apt/lists"
        lists.mkdir(parents=True)
        (lists / f"mirror_dists_{name}_Release").write_text(text)
        (lists / f"mirror_dists_{name}_main_binary-amd64_Packages").write_text("Package: x\n")
        for name_ in NOT_KEPT:
            (root / name_).parent.mkdir(parents=True, exist_ok=True)
            (root / name_).write_text("the host's\n")
        prepare_rootfs(root, NOW)
        assert not [name_ for name_ in NOT_KEPT if (root / name_).exists()], "the host's files stay out of a base"
        conf = root / "etc/apt/apt.conf.d/99mcplab-snapshot"
        assert conf.exists() == (name == "sid")
        assert not list(lists.glob("*")), "package lists are dropped from the base"
    assert 'Acquire::Check-Valid-Until "false";' in (tmp_path / "sid/etc/apt/apt.conf.d/99mcplab-snapshot").read_text()


def test_apk_index_lookup() -> None:
    index = "C:Q1abc\nP:busybox\nV:1.37.0-r1\n\nC:Q1def\nP:apk-tools-static\nV:3.0.3-r0\nA:x86_64\n"
    assert apk_version(index, "apk-tools-static") == "3.0.3-r0"
    assert apk_version(index, "python3") == ""


def test_with_an_image_store_a_bootstrapped_base_is_fetched_before_it_is_made_again() -> None:
    facts = BaseFacts(registry="x", **TOOLS, root=True, env={}, store=True)
    steps = plan_base(CELLS["debian-bookworm-py3.11"], facts)
    assert [s.action for s in steps] == [BaseAction.FETCH, BaseAction.MMDEBSTRAP, BaseAction.UNAVAILABLE]
    assert steps[0].image == steps[1].image == bootstrap_tag(CELLS["debian-bookworm-py3.11"], "")
    assert actions("debian-slim-py3.12", facts) == ["unavailable"]  # nothing of the lab's own to fetch


def test_mmdebstraps_command_makes_a_minbase_tarball_its_customize_hook_prepares() -> None:
    arm = plan_base(CELLS["debian-trixie-py3.13-arm64"], HERE)[0]
    assert arm.bootstrap is not None
    argv = mmdebstrap_argv(arm.bootstrap, "", Path("/work/rootfs.tar"))
    assert argv[:4] == ["mmdebstrap", "--variant=minbase", "--mode=root", "--format=tar"]
    assert f"--customize-hook={CUSTOMIZE}" in argv and "--architectures=arm64" in argv
    assert argv[-2:] == ["trixie", "/work/rootfs.tar"]  # no mirror: mmdebstrap's default
    assert "-m matrix.bootstrap" in CUSTOMIZE and SOURCE_DATE_EPOCH == 1767225600
    own = plan_base(CELLS["debian-bookworm-py3.11"], HERE)[0].bootstrap
    assert own is not None and mmdebstrap_argv(own, "http://mirror.invalid/debian", Path("t"))[-3:] == [
        "bookworm", "t", "http://mirror.invalid/debian"]
