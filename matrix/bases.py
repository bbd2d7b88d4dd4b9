"""Base images: already present, else fetched from the lab's own store, else pulled, else bootstrapped
offline, else unavailable with the reason.

`plan_base` is pure: the cell and what was found on this machine (`BaseFacts`) in, an ordered list of
ways to get the base out. bootstrap.Bases walks that list against the engine. The split lets the
selection rules be unit-tested with no engine (tests/lab/test_bases.py).

Bootstrapped bases get a deterministic tag from their inputs (method, suite, mirror, keyring), so a
second run finds them present and the lab never makes the same base twice.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, replace

from .model import Bootstrap, BootstrapMethod, Cell, Family

BASE_REPO = "mcplab/base"
REGISTRY_MIRROR_ENV = "LAB_REGISTRY_MIRROR"  # host[:port] of a pull-through mirror of the official images
BOOTSTRAP_VERSION = "1"  # bump to remake every bootstrapped base (e.g. when the recipe below changes)


class BaseAction(str, enum.Enum):
    PRESENT = "present"
    FETCH = "fetch"  # from the lab's own image store (--registry, --cache-dir): made on another machine
    PULL = "pull"
    DEBOOTSTRAP = "debootstrap"
    APK = "apk"
    UNAVAILABLE = "unavailable"

    @property
    def makes(self) -> bool:
        """Whether the step takes time worth doing in the background (a download or a bootstrap)."""
        return self not in (BaseAction.PRESENT, BaseAction.UNAVAILABLE)


@dataclass(frozen=True, kw_only=True)
class BaseFacts:
    """What this machine offers, gathered once per run (see `gather_facts`)."""

    engine: str = ""  # '' when an engine answers, else why not
    present: frozenset[str] = frozenset()  # image references present in the engine
    registry: str = ""  # '' when a registry may be reachable, else why not
    env: Mapping[str, str] | None = None
    debootstrap: bool = False  # the tool is installed
    root: bool = False  # debootstrap needs root
    keyrings: frozenset[str] = frozenset()  # keyring files that exist
    store: bool = False  # an image store (--registry, --cache-dir) may hold bases made elsewhere


@dataclass(frozen=True, kw_only=True)
class BaseStep:
    """One way to get a base."""

    action: BaseAction
    image: str  # the reference the Dockerfile will build FROM once the step succeeded
    source: str = ""  # pull: the reference to pull (maybe through a mirror); bootstrap: the mirror
    reason: str = ""  # unavailable: why; otherwise a short description for the report
    bootstrap: Bootstrap | None = None  # debootstrap/apk: the recipe


def bootstrap_tag(cell: Cell, mirror: str) -> str:
    """mcplab/base:<family>-<suite or release>-<hash of the inputs>."""
    boot = cell.bootstrap
    assert boot is not None
    parts = (BOOTSTRAP_VERSION, boot.method.value, boot.suite, boot.release, mirror, boot.keyring, boot.script)
    inputs = "\0".join(parts)
    digest = hashlib.sha256(inputs.encode()).hexdigest()[:12]
    return f"{BASE_REPO}:{cell.family.value}-{boot.suite or boot.release}-{digest}"


def keyring_for(boot: Bootstrap, env: Mapping[str, str]) -> str:
    return (env.get(boot.keyring_env, "").strip() if boot.keyring_env else "") or boot.keyring


def mirror_for(boot: Bootstrap, env: Mapping[str, str]) -> str:
    return env.get(boot.mirror_env, "").strip().rstrip("/") if boot.mirror_env else ""


def pull_reference(base: str, registry_mirror: str) -> str:
    """The reference to pull: through the mirror when one is set (Docker Hub's official images live
    under library/), else the base itself."""
    if not registry_mirror:
        return base
    path = base if "/" in base else f"library/{base}"
    return f"{registry_mirror.rstrip('/')}/{path}"


def plan_base(cell: Cell, facts: BaseFacts) -> tuple[BaseStep, ...]:
    """The ways to get `cell`'s base, in the order to try them. Ends with `unavailable` when nothing
    can work; every earlier step that is skipped adds its reason to that final message."""
    env = facts.env or {}
    if cell.base_cell is not None:
        # A builder cell's base only hosts its builder stage: had exactly as the cell it shares it with has
        # it, so the two plans are equal and the base is made once (Bases keys on the plan).
        return plan_base(cell.base_cell, facts)
    if facts.engine:
        return (BaseStep(action=BaseAction.UNAVAILABLE, image="", reason=f"{cell.base}: {facts.engine}"),)
    if cell.base in facts.present:
        return (BaseStep(action=BaseAction.PRESENT, image=cell.base, reason=f"{cell.base} present"),)
    boot = cell.bootstrap
    mirror = mirror_for(boot, env) if boot else ""
    tag = bootstrap_tag(cell, mirror) if boot and boot.method is not BootstrapMethod.BUILDER else ""
    if tag and tag in facts.present:
        return (BaseStep(action=BaseAction.PRESENT, image=tag, reason=f"bootstrapped earlier as {tag}"),)

    steps: list[BaseStep] = []
    if tag and facts.store:
        steps.append(BaseStep(action=BaseAction.FETCH, image=tag, reason=f"fetched {tag} from the image store"))
    reasons = ["not present"]
    if facts.registry:
        reasons.append(facts.registry)
    else:
        source = pull_reference(cell.base, env.get(REGISTRY_MIRROR_ENV, ""))
        steps.append(BaseStep(action=BaseAction.PULL, image=cell.base, source=source, reason=f"pulled {source}"))
    made, why = _bootstrap_step(cell, tag, mirror, facts)
    steps += [made] if made else []
    reasons += [why] if why else []
    steps.append(BaseStep(action=BaseAction.UNAVAILABLE, image="", reason=f"{cell.base}: " + ", ".join(reasons)))
    return tuple(steps)


def _bootstrap_step(cell: Cell, tag: str, mirror: str, facts: BaseFacts) -> tuple[BaseStep | None, str]:
    """The step that makes the base offline, or why there is none."""
    boot, env = cell.bootstrap, facts.env or {}
    if boot is None:
        return None, "official images cannot be bootstrapped here (pull only)"
    if boot.method is BootstrapMethod.DEBOOTSTRAP:
        why = _debootstrap_blocker(cell, boot, mirror, facts)
        if why:
            return None, why
        recipe = replace(boot, keyring=keyring_for(boot, env))
        where = mirror or "debootstrap's default mirror"
        return BaseStep(action=BaseAction.DEBOOTSTRAP, image=tag, source=mirror, reason=f"debootstrapped from {where}",
                        bootstrap=recipe), ""  # fmt: skip
    if boot.method is BootstrapMethod.APK:
        if not mirror:
            return None, f"no Alpine mirror configured (set {boot.mirror_env} to bootstrap it with apk.static)"
        return BaseStep(action=BaseAction.APK, image=tag, source=mirror, reason=f"apk.static from {mirror}",
                        bootstrap=boot), ""  # fmt: skip
    # BUILDER, only reached for a Cell built by hand without `base_cell` (cells.py always sets it).
    return None, "a builder cell's base is had like another cell's, and none was given"


def _debootstrap_blocker(cell: Cell, boot: Bootstrap, mirror: str, facts: BaseFacts) -> str:
    if cell.family is not Family.DEBIAN and not mirror:
        # debootstrap's default mirror serves Debian only.
        name = cell.family.value.capitalize()
        return f"no {name} mirror configured (set {boot.mirror_env} to bootstrap it with debootstrap)"
    if not facts.debootstrap:
        return "debootstrap is not installed (apt-get install debootstrap)"
    if not facts.root:
        return "debootstrap needs root"
    keyring = keyring_for(boot, facts.env or {})
    if keyring and keyring not in facts.keyrings:
        where = f", or set {boot.keyring_env} to the archive keyring file" if boot.keyring_env else ""
        return f"keyring {keyring} is missing (install the distribution's archive keyring{where})"
    return ""
