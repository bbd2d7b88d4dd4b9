"""A fake of the docker side of matrix.engine.Engine, for fast tests of the harness's own logic: images,
containers and volumes are dictionaries, and each suite's container does what the test scripts (pass,
fail, hang, die by a signal). Host processes still run for real (processes.Processes). Any docker command the
fake does not stand in for fails the test, so nothing here can reach a real engine by accident.

Whatever this stands for is also tested against the real engine (test_engine.py)."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from matrix.arches import ARCHES
from matrix.attempts import MEASURE, USAGE_FILE
from matrix.engine import ContainerSpec, ContainerState, Engine
from matrix.host import FACTS_PROBE
from matrix.processes import Completed, Processes

UNBUILDABLE = ("the apt mirror lists python3.14 source versions 3.14.10-1, 3.14.9-1 but does not serve their files "
               "(apt-get source: 404 Not Found), so the interpreter cannot be compiled here")  # images/apt-source
MEASURED = b"memory 104857600 memory/memory.max_usage_in_bytes\ncpu_ns 2500000000 cpuacct/cpuacct.usage\n"

PASSING = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" tests="2">
<testcase classname="tests.{suite}.test_x" name="test_a"/><testcase classname="tests.{suite}.test_x" name="test_b"/>
</testsuite></testsuites>"""
STRESSED = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" tests="3">
<testcase classname="tests.{suite}.test_x" name="test_a"/>
<testcase classname="tests.{suite}.test_x" name="test_b[stress0]"/>
<testcase classname="tests.{suite}.test_x" name="test_b[stress1]"/>
<testcase classname="tests.{suite}.test_x" name="test_c">
<skipped type="pytest.skip" message="cannot make a PID namespace here">skip</skipped></testcase>
</testsuite></testsuites>"""
FAILING = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" tests="2">
<testcase classname="tests.{suite}.test_x" name="test_a"/><testcase classname="tests.{suite}.test_x" name="test_b">
<failure message="assert 1 == 2">traceback</failure></testcase></testsuite></testsuites>"""


class FakeEngine(Engine):
    def __init__(self, *, present: Sequence[str] = (), broken_stages: Sequence[str] = (),
                 suites: Mapping[str, str] | None = None, python_version: str = "3.11.2",
                 implementation: str = "CPython", free_threaded: bool = False,
                 unbuildable_stages: Sequence[str] = ()) -> None:  # fmt: skip
        super().__init__(docker="fake-docker", processes=_Processes(self))
        self.present = {ref: _id(ref) for ref in present}
        self.labels: dict[str, dict[str, str]] = {}  # image -> its labels, where a test gives it some
        self.broken_stages = set(broken_stages)
        self.unbuildable_stages = set(unbuildable_stages)  # their recipe says this machine cannot build them
        # suite name -> pass, fail, stress, unavailable, hang, killed, oom, or flaky (fails its first run only)
        self.behaviour = dict(suites or {})
        self.usage: dict[str, bytes] = {}  # suite name -> what its measuring wrapper writes (attempts.USAGE_FILE)
        self.python_version = python_version
        self.implementation = implementation
        self.free_threaded = free_threaded
        self.runs: list[ContainerSpec] = []  # every `docker run`, in order
        self.inputs: dict[str, bytes] = {}  # container name -> what its stdin was given
        self.timeouts: dict[str, float | None] = {}  # container name -> the timeout it was run under
        self.builds: list[tuple[str, tuple[str, ...]]] = []  # (tag, build args) of every build
        self.live: dict[str, dict[str, object]] = {}  # container name -> labels, files, state
        self.built: list[str] = []
        self.platforms: dict[str, str] = {}  # tag -> the --platform it was built with ('' for none)
        self.started = threading.Event()  # set when a hanging suite has started
        self._killed = threading.Event()

    def _docker(self, args: Sequence[str], **kwargs: object) -> Completed:
        raise AssertionError(f"the fake engine does not stand in for `docker {' '.join(args)}`")

    def version(self) -> str:
        return "fake-1.0"

    def endpoint(self) -> str:
        return "unix:///run/fake-docker.sock"

    def asked_for(self) -> bool:
        return False

    def registry_mirrors(self) -> tuple[str, ...]:
        return ()

    def manifest(self, ref: str) -> Completed:
        return Completed(returncode=1, output="dial tcp: lookup registry: no such host")

    def image_id(self, ref: str) -> str | None:
        return self.present.get(ref)

    def image_facts(self, ref: str) -> dict[str, object]:
        return {"tags": [ref], "labels": dict(self.labels.get(ref, {}))} if ref in self.present else {}

    def references(self, repository: str) -> tuple[str, ...]:
        return tuple(ref for ref in self.present if ref.startswith(f"{repository}:"))

    def platform_of(self, image: str) -> str:
        return self.platforms.get(image, "")

    def build(self, context: bytes, *, target: str, tag: str, build_args: Sequence[str], labels: Mapping[str, str],
              log: Path, timeout: float, platform: str = "") -> Completed:  # fmt: skip
        self.builds.append((tag, tuple(build_args)))
        self.platforms[tag] = platform
        if target in self.broken_stages:
            log.write_text("Step 2/5 : RUN exit 3\ndeliberately broken build\n")
            return Completed(returncode=1, output="Step 2/5 : RUN exit 3\ndeliberately broken build\n")
        if target in self.unbuildable_stages:
            said = f"\x1b[0mmcplab-unavailable: {UNBUILDABLE}\n"
            return Completed(returncode=1, output=f"Step 3/9 : RUN ...\n{said}returned a non-zero code: 1\n")
        self.present[tag] = _id(tag)
        self.built.append(tag)
        return Completed(returncode=0, output=f"Successfully tagged {tag}\n")

    def run(self, spec: ContainerSpec, *, timeout: float | None, log: Path | None = None,
            input: bytes | None = None) -> Completed:  # fmt: skip
        self.runs.append(spec)
        self.timeouts[spec.name] = timeout
        if input is not None:
            self.inputs[spec.name] = input
        if spec.args[:2] == ("-c", FACTS_PROBE):  # what the interpreter is
            arch = next((a for a in ARCHES.values() if a.platform == self.platforms.get(spec.image)), ARCHES["amd64"])
            facts = {"version": self.python_version, "implementation": self.implementation,
                     "free_threaded": self.free_threaded, "machine": arch.machine,
                     "byteorder": "big" if arch.big_endian else "little", "maxsize": 2 ** (arch.bits - 1) - 1}
            return Completed(returncode=0, output=json.dumps(facts) + "\n")
        if spec.entrypoint == "/bin/sh" and spec.args[2] == "probe":  # the first answer's measurement
            samples = {"server": [50.0, 60.0, 55.0], "bare": [20.0, 25.0, 22.0]}
            return Completed(returncode=0, output=json.dumps(samples) + "\n")
        # A suite, measured: tests/<suite> in the test image, or the install driver in the install image.
        assert spec.args[:3] == ("-c", MEASURE, "mcplab-measure"), spec.args
        suite = suite_of(spec)
        junit_path = next(a for a in spec.args if a.startswith("--junitxml=")).partition("=")[2]
        files: dict[str, bytes] = {USAGE_FILE: self.usage.get(suite, MEASURED)}
        finished = ContainerState(exit_code=0, oom_killed=False)
        self.live[spec.name] = {"labels": dict(spec.labels), "files": files, "state": finished}
        how = self.behaviour.get(suite, "pass")
        if how == "flaky":
            how = "pass" if any(suite_of(s) == suite for s in self.runs[:-1]) else "fail"
        if how in ("pass", "fail", "stress"):
            files[junit_path] = {"pass": PASSING, "fail": FAILING, "stress": STRESSED}[how].format(suite=suite).encode()
            return Completed(returncode=1 if how == "fail" else 0, output=f"{suite}: collected 2 items\n")
        if how == "unavailable":  # what install_driver.sh says for an interpreter without zlib
            said = "mcplab-unavailable: python3.13 has no zlib and no ensurepip: pip cannot even read a wheel\n"
            return Completed(returncode=3, output=said)
        if how in ("killed", "oom"):
            self.live[spec.name]["state"] = ContainerState(exit_code=137, oom_killed=how == "oom")
            return Completed(returncode=137, output=f"tests/{suite}/test_x.py::test_a \n")
        # hang: until the harness's deadline, or until an interrupt kills the client
        self.started.set()
        if self._killed.wait(timeout):
            return Completed(returncode=-9, output="tests/x.py::test_hangs ")
        return Completed(returncode=-9, output="tests/x.py::test_hangs ", timed_out=True)


    def create(self, spec: ContainerSpec) -> Completed:
        self.live[spec.name] = {"labels": dict(spec.labels), "files": {}, "state": None}
        return Completed(returncode=0, output=spec.name)

    def read_file(self, container: str, path: str) -> bytes | None:
        files = self.live.get(container, {}).get("files", {})
        assert isinstance(files, dict)
        return files.get(path)

    def copy_in(self, source: Path | str, container: str, path: str, *, timeout: float = 300.0) -> Completed:
        return Completed(returncode=0, output="")

    def state(self, container: str) -> ContainerState | None:
        found = self.live.get(container, {}).get("state")
        return found if isinstance(found, ContainerState) else None

    def kill(self, container: str) -> Completed:
        return Completed(returncode=0, output="")

    def containers(self, *labels: str) -> tuple[str, ...]:
        def carries(name: str) -> bool:
            have = self.live[name]["labels"]
            assert isinstance(have, dict)
            return all(have.get(k) == v if v else k in have for k, _, v in (lbl.partition("=") for lbl in labels))

        return tuple(name for name in self.live if carries(name))

    def container_names(self, ids: Sequence[str]) -> dict[str, str]:
        return {i: i for i in ids}

    def remove_containers(self, *ids: str) -> int:
        for name in ids:
            self.live.pop(name, None)
        return len(ids)

    def create_volume(self, name: str, labels: Mapping[str, str]) -> Completed:
        return Completed(returncode=0, output=name)


class _Processes(Processes):
    """Host processes run for real; killing them all also ends the fake's hanging suites, as killing a real
    `docker run` client ends its wait."""

    def __init__(self, engine: FakeEngine) -> None:
        super().__init__()
        self.engine = engine

    def kill_all(self) -> int:
        self.engine._killed.set()
        return super().kill_all()


def suite_of(spec: ContainerSpec) -> str:
    """Which suite a measured suite container runs ('' for other containers)."""
    if spec.args[:3] != ("-c", MEASURE, "mcplab-measure"):
        return ""
    junit = next(a for a in spec.args if a.startswith("--junitxml="))
    return junit.rpartition("/junit-")[2].removesuffix(".xml")  # attempts.junit_in_container


def _id(ref: str) -> str:
    return "sha256:" + hashlib.sha256(ref.encode()).hexdigest()
