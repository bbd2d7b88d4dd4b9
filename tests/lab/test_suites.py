"""The suites and measurements added for issues 11, 15, 16, 17 and 19 through the real scheduler against the
fake engine (fake_engine.py): what each container is given, what comes back in the records. The real engine
runs every one of them in `make matrix`, and test_engine_suites.py runs them against the real engine."""

from __future__ import annotations

import json
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from matrix import conformance
from matrix.attempts import cpuinfo_reporting
from matrix.build import BuildPlan, Unbuildable, plan_build
from matrix.cell import availability, base_plans
from matrix.install import Distribution
from matrix.lab import Lab
from matrix.model import Outcome, Suite, SuiteResult
from matrix.plan import Selection
from matrix.processes import Completed
from matrix.suites import STRESSED
from matrix.table import parse_cells

from .fake_engine import UNBUILDABLE, FakeEngine, suite_of
from .test_cell import a_lab, outcomes, run

TABLE = {
    "schema": 1,
    "cell": [
        {"name": "fx-bookworm", "family": "debian", "release": "bookworm", "python": "3.11",
         "base": "debian:bookworm", "python_from": "distro"},
        {"name": "fx-pypy", "family": "debian", "release": "trixie", "python": "3.11", "implementation": "pypy",
         "base": "debian:trixie", "python_from": "distro"},
        {"name": "fx-sid", "family": "debian", "release": "sid", "python": "3.14", "base": "debian:sid",
         "python_from": "distro"},
        {"name": "fx-free", "family": "debian", "release": "sid", "python": "3.14", "flavour": "free-threaded",
         "base": "debian:sid", "python_from": "builder", "bootstrap": {"method": "builder"}, "stress": 3},
    ],
}  # fmt: skip
BOOKWORM, PYPY, _, FREE = parse_cells(TABLE)


def suites(*names: Suite) -> Selection:
    return Selection(suites=names)


def test_hostile_runs_in_the_test_image_like_unit_and_its_skips_keep_their_reasons(tmp_path: Path) -> None:
    engine = FakeEngine(present=["debian:bookworm"], suites={"hostile": "stress"})
    result = run(a_lab(tmp_path, engine, selection=suites(Suite.HOSTILE)))["fx-bookworm"]
    assert outcomes(result) == {"hostile": "passed"}
    (spec,) = [s for s in engine.runs if suite_of(s) == "hostile"]
    assert spec.image.startswith("mcplab/debian:bookworm-py3.11-test-") and spec.network == "none"
    hostile = result.suite(Suite.HOSTILE)
    assert hostile is not None and hostile.skipped == 1
    assert [(s.test_id, s.reason) for s in hostile.skips] == [
        ("tests/hostile/test_x.py::test_c", "cannot make a PID namespace here")]


def wheel_of(tmp_path: Path, twine_ok: bool = True) -> Distribution:
    wheel = tmp_path / "dist" / "mcpserver-9.9-py3-none-any.whl"
    wheel.parent.mkdir(parents=True, exist_ok=True)
    wheel.write_bytes(b"PK-not-really-a-wheel")
    said = "\x1b[32mPASSED\x1b[0m" if twine_ok else "Checking dist\n\x1b[31mFAILED\x1b[0m: long_description missing"
    twine = Completed(returncode=0 if twine_ok else 1, output=said)
    return Distribution(wheel=wheel, sdist=tmp_path / "dist" / "mcpserver-9.9.tar.gz", twine=twine)


@pytest.mark.parametrize("twine_ok", [True, False])
def test_install_gives_the_wheel_to_the_install_image_and_joins_the_hosts_checks(tmp_path: Path, twine_ok: bool
                                                                                  ) -> None:  # fmt: skip
    engine = FakeEngine(present=["debian:bookworm"])
    lab = a_lab(tmp_path, engine, selection=suites(Suite.INSTALL), retries=0)
    made = wheel_of(tmp_path, twine_ok)
    lab.distributions.get = lambda: made  # type: ignore[method-assign]
    result = run(lab)["fx-bookworm"]
    (spec,) = [s for s in engine.runs if s.entrypoint == "/bin/sh" and "install" in s.args]
    assert spec.image.startswith("mcplab/debian:bookworm-py3.11-install-") and spec.user == "mcp"
    assert spec.env["MCPLAB_PIP"] == "/opt/pytest/pip-25-py3-none-any.whl" and spec.network == "none"
    assert engine.inputs[spec.name] == made.wheel.read_bytes()  # the wheel travels on stdin: any engine
    install = result.suite(Suite.INSTALL)
    assert install is not None and install.tests == 4  # the cell's two, and the host's twine check and file list
    if twine_ok:
        assert install.outcome is Outcome.PASSED
    else:
        assert install.outcome is Outcome.FAILED
        (failure,) = install.failures
        assert failure.test_id == "distribution.py::test_twine_check_passes"
        assert "FAILED: long_description missing" in failure.details  # colour codes gone: the XML stays readable


def test_a_wheel_without_every_file_of_the_package_fails_the_install_suite_naming_them(tmp_path: Path) -> None:
    from dataclasses import replace

    from matrix.build import ContextFile
    from matrix.install import missing_from

    made = wheel_of(tmp_path)
    with zipfile.ZipFile(made.wheel, "w") as wheel:
        wheel.writestr("mcpserver/__init__.py", "")
    sources = [ContextFile(arcname=f"server/mcpserver/{name}", data=b"", mode=0o644)
               for name in ("__init__.py", "store/__init__.py", "py.typed")]  # fmt: skip
    assert missing_from(made.wheel, sources) == ("mcpserver/py.typed", "mcpserver/store/__init__.py")
    lab = a_lab(tmp_path, FakeEngine(present=["debian:bookworm"]), selection=suites(Suite.INSTALL), retries=0)
    lab.distributions.get = lambda: replace(made, missing=missing_from(made.wheel, sources))  # type: ignore[method-assign]
    install = run(lab)["fx-bookworm"].suite(Suite.INSTALL)
    assert install is not None and install.outcome is Outcome.FAILED
    (failure,) = install.failures
    assert failure.test_id == "distribution.py::test_the_wheel_holds_every_source_file"
    assert "lacks 2 files of server/mcpserver: mcpserver/py.typed, mcpserver/store/__init__.py" in failure.message


def test_an_interpreter_that_cannot_install_a_wheel_makes_only_that_suite_unavailable(tmp_path: Path) -> None:
    engine = FakeEngine(present=["debian:bookworm"], suites={"install": "unavailable"})
    lab = a_lab(tmp_path, engine, selection=suites(Suite.UNIT, Suite.INSTALL))
    lab.distributions.get = lambda: wheel_of(tmp_path)  # type: ignore[method-assign]
    result = run(lab)["fx-bookworm"]
    install = result.suite(Suite.INSTALL)
    assert install is not None and install.outcome is Outcome.UNAVAILABLE
    assert install.message.startswith("python3.13 has no zlib and no ensurepip")
    assert result.outcome is Outcome.PASSED  # the unit suite's pass stands; the report says why install did not


def test_a_distribution_that_cannot_be_built_is_an_error_in_every_cell(tmp_path: Path) -> None:
    from matrix.install import DistributionError

    engine = FakeEngine(present=["debian:bookworm"])
    lab = a_lab(tmp_path, engine, selection=suites(Suite.INSTALL))

    def broken() -> Distribution:
        raise DistributionError("`python -m build` failed (no network); see dist.log")

    lab.distributions.get = broken  # type: ignore[method-assign]
    install = run(lab)["fx-bookworm"].suite(Suite.INSTALL)
    assert install is not None and install.outcome is Outcome.ERROR and "python -m build" in install.message


def test_conformance_serves_everything_py_published_on_loopback_and_removes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = FakeEngine(present=["debian:bookworm"])
    started: list[object] = []
    engine.start = lambda spec: started.append(spec) or Completed(returncode=0, output="id")  # type: ignore[method-assign]
    engine.logs = lambda name: ""  # type: ignore[method-assign]
    monkeypatch.setattr(conformance, "wait_ready", lambda url, deadline=30.0: True)
    lab = a_lab(tmp_path, engine, selection=suites(Suite.CONFORMANCE))
    asked: list[str] = []

    def profile(url: str, **_: object) -> SuiteResult:
        asked.append(url)
        return SuiteResult(suite=Suite.CONFORMANCE, outcome=Outcome.PASSED, tests=50, passed=37, skipped=13)

    lab.conformance.run = profile  # type: ignore[method-assign]
    result = run(lab)["fx-bookworm"]
    (spec,) = started
    port = spec.publish[0].split(":")[1]  # type: ignore[attr-defined]
    assert spec.publish == (f"127.0.0.1:{port}:{port}",) and spec.network == "bridge"  # type: ignore[attr-defined]
    args = " ".join(spec.args)  # type: ignore[attr-defined]
    assert "--host 0.0.0.0" in args and "--insecure-no-auth" in args
    assert f"--allow-origin http://127.0.0.1:{port}" in args
    assert args.endswith("/opt/mcpserver/examples/everything.py")
    assert asked == [f"http://127.0.0.1:{port}/mcp"]
    assert result.suite(Suite.CONFORMANCE).counts == "37 passed, 13 skipped ⚠ 26% skipped"  # type: ignore[union-attr]
    assert engine.live == {}


def test_the_relay_forwards_both_ways_from_loopback() -> None:
    import socket
    import threading

    upstream = socket.create_server(("127.0.0.1", 0))

    def echo_upper() -> None:
        client, _ = upstream.accept()
        with client:
            client.sendall(client.recv(100).upper())

    threading.Thread(target=echo_upper, daemon=True).start()
    relay = conformance.Relay()
    relay.start(("127.0.0.1", upstream.getsockname()[1]))
    try:
        with socket.create_connection(("127.0.0.1", relay.port), timeout=5) as sock:
            sock.sendall(b"hello")
            assert sock.recv(100) == b"HELLO"
    finally:
        relay.close()
        upstream.close()


def test_the_first_answer_is_measured_after_the_suites_and_changes_no_outcome(tmp_path: Path) -> None:
    engine = FakeEngine(present=["debian:bookworm"], suites={"unit": "fail"})
    result = run(a_lab(tmp_path, engine, selection=suites(Suite.UNIT)))["fx-bookworm"]
    assert result.outcome is Outcome.FAILED  # a verdict of the suites alone
    probes = [i for i, s in enumerate(engine.runs) if s.entrypoint == "/bin/sh" and s.args[2:3] == ("probe",)]
    assert probes == [len(engine.runs) - 1]  # last: after the cell's suites
    probe = engine.runs[probes[0]]
    assert probe.image.startswith("mcplab/debian:bookworm-py3.11-runtime-") and probe.network == "none"
    assert probe.args[-2:] == ("11", "/opt/mcpserver/examples/demo.py")
    first = result.first_answer
    assert first is not None and (first.median_ms, first.bare_median_ms, first.runs) == (55.0, 22.0, 3)
    assert not first.cached and first.produced_by
    # The same runtime image again: the measurement is remembered, not made again; a new image is measured.
    again = FakeEngine(present=["debian:bookworm", *engine.built], suites={"unit": "fail"})
    second = run(a_lab(tmp_path, again, selection=suites(Suite.UNIT)))["fx-bookworm"].first_answer
    assert second is not None and second.cached and second.produced_by == first.produced_by
    assert not [s for s in again.runs if s.args[2:3] == ("probe",)]
    fresh = FakeEngine(present=["debian:bookworm", *engine.built], suites={"unit": "fail"})
    (runtime,) = [tag for tag in engine.built if "-runtime-" in tag]
    fresh.present[runtime] = "sha256:the-same-tag-built-again"
    third = run(a_lab(tmp_path, fresh, selection=suites(Suite.UNIT)))["fx-bookworm"].first_answer
    assert third is not None and not third.cached


def test_an_interrupted_run_measures_nothing(tmp_path: Path) -> None:
    engine = FakeEngine(present=["debian:bookworm"])
    lab = a_lab(tmp_path, engine, selection=suites(Suite.UNIT))
    lab.request_stop("stopped on purpose")
    run(lab)
    assert not [s for s in engine.runs if s.args[2:3] == ("probe",)]


def test_a_pypy_cell_has_its_own_interpreter_tags_and_pytest_folder(tmp_path: Path) -> None:
    engine = FakeEngine(present=["debian:trixie"], python_version="3.11.11", implementation="PyPy 7.3.19")
    result = run(a_lab(tmp_path, engine, selection=suites(Suite.UNIT)), (PYPY,))["fx-pypy"]
    assert result.outcome is Outcome.PASSED
    assert (result.python_version, result.implementation) == ("3.11.11", "PyPy 7.3.19")
    tags = [tag for tag, _ in engine.builds]
    assert tags and all(tag.startswith("mcplab/debian:trixie-pypy3.11-") for tag in tags)
    assert {"INTERPRETER=pypy3.11", "PACKAGE=pypy3"} <= set(engine.builds[0][1])
    (unit,) = [s for s in engine.runs if suite_of(s) == "unit"]
    assert unit.volumes[0][0].startswith("mcplab-pytest-pypy3.11-")
    facts = [s for s in engine.runs if s.entrypoint == "pypy3.11"]
    assert len(facts) == 1  # the interpreter is asked by its own name


BIG_CACHE = {"name": "fx-pypy-big", "like": "fx-pypy", "cpu_cache": "480 MiB", "suites": ["payload"]}
VARIANTS = parse_cells({"schema": 1, "cell": [*TABLE["cell"], BIG_CACHE]})  # type: ignore[list-item]


def test_a_big_cache_variant_runs_its_cells_images_with_a_cpuinfo_saying_so_and_pytests_own_nursery(
        tmp_path: Path) -> None:  # fmt: skip
    engine = FakeEngine(present=["debian:trixie"], implementation="PyPy 7.3.19")
    results = run(a_lab(tmp_path, engine), (PYPY, VARIANTS[-1]))
    assert [s.suite for s in results["fx-pypy-big"].suites] == [Suite.PAYLOAD]
    assert len({tag for tag, _ in engine.builds}) == len(engine.builds)  # built once, for both cells
    (plain,) = [s for s in engine.runs if suite_of(s) == "payload" and "fx-pypy-payload" in s.name]
    (big,) = [s for s in engine.runs if suite_of(s) == "payload" and "fx-pypy-big" in s.name]
    assert plain.binds == () and len(big.binds) == 1 and big.binds[0][1] == "/proc/cpuinfo"
    assert big.binds[0][0].endswith("/cpuinfo-491520KB")  # in the run's workdir, gone with it
    nursery = {"PYPY_GC_NURSERY": "4MB", "MCPTEST_DRIVER_ONLY": "PYPY_GC_NURSERY"}
    assert dict(big.env) == {**nursery, "MCPLAB_CELL": "fx-pypy-big"} and dict(plain.env) == {**nursery,
                                                                                              "MCPLAB_CELL": "fx-pypy"}
    assert f"type=bind,source={big.binds[0][0]},target=/proc/cpuinfo,readonly" in big.argv()


def test_the_cpuinfo_a_variant_is_shown_is_this_machines_with_each_cache_size_replaced(tmp_path: Path) -> None:
    real = tmp_path / "cpuinfo"
    real.write_text("processor\t: 0\ncache size\t: 512 KB\nflags\t: fpu\n\nprocessor\t: 1\ncache size\t: 512 KB\n")
    assert cpuinfo_reporting(491520, real) == ("processor\t: 0\ncache size\t: 491520 KB\nflags\t: fpu\n\n"
                                                "processor\t: 1\ncache size\t: 491520 KB\n")
    real.write_text("processor\t: 0\nBogoMIPS\t: 50.00\n")  # arm64 reports no cache: it is said once
    assert cpuinfo_reporting(512, real) == "processor\t: 0\ncache size\t: 512 KB\nBogoMIPS\t: 50.00\n"


def test_a_variant_is_unavailable_where_the_engine_cannot_see_this_machines_files(tmp_path: Path) -> None:
    engine = FakeEngine(present=["debian:trixie"])
    engine.endpoint = lambda: "tcp://10.0.0.2:2376"  # type: ignore[method-assign]
    result = run(a_lab(tmp_path, engine), (VARIANTS[-1],))["fx-pypy-big"]
    assert result.outcome is Outcome.UNAVAILABLE
    assert "which the engine at tcp://10.0.0.2:2376 cannot see" in result.message
    assert not [s for s in engine.runs if suite_of(s)]


def test_the_free_threaded_cell_stresses_only_the_concurrency_suites_and_counts_the_repetitions(tmp_path: Path
                                                                                                 ) -> None:  # fmt: skip
    engine = FakeEngine(present=["debian:sid"], suites={"unit": "stress", "http": "stress"}, python_version="3.14.2",
                        free_threaded=True)  # fmt: skip
    lab = a_lab(tmp_path, engine, selection=suites(Suite.UNIT, Suite.HTTP, Suite.PAYLOAD))
    result = run(lab, (FREE,))["fx-free"]
    assert result.flavour == "free-threaded"
    stressed = {suite_of(s): dict(s.env) for s in engine.runs if suite_of(s)}
    cell = {"MCPLAB_CELL": "fx-free"}
    assert stressed == {"unit": {**cell, "MCPSERVER_STRESS": "3"}, "http": {**cell, "MCPSERVER_STRESS": "3"},
                        "payload": cell}
    assert {s.value for s in STRESSED} == {"unit", "http"}
    unit = result.suite(Suite.UNIT)
    assert unit is not None and unit.repetitions == 2 and unit.counts == "3 passed, 1 skipped ⚠ 25% skipped (2 stress)"
    assert any(tag.startswith("mcplab/debian:sid-py3.14t-builder-") for tag, _ in engine.builds)


def test_a_recipe_that_says_this_machine_cannot_build_it_makes_the_cell_unavailable(tmp_path: Path) -> None:
    engine = FakeEngine(present=["debian:sid"], unbuildable_stages=["builder"])
    lab = a_lab(tmp_path, engine, selection=suites(Suite.UNIT))
    result = run(lab, (FREE,))["fx-free"]
    assert result.outcome is Outcome.UNAVAILABLE
    assert result.message == f"{UNBUILDABLE} (the builder stage's build said so)"
    assert result.log_tail.startswith("build log: ") and "build-fx-free-builder.log" in result.log_tail
    # The next run knows without building, and says since when; --list says the same; --no-cache builds again.
    again = FakeEngine(present=["debian:sid"], unbuildable_stages=["builder"])
    second = run(a_lab(tmp_path, again, selection=suites(Suite.UNIT)), (FREE,))["fx-free"]
    assert second.outcome is Outcome.UNAVAILABLE and again.builds == []
    assert second.message.startswith(result.message + f"; found by run {lab.run_id} on ")
    plans = base_plans([FREE], again, {})
    state, why = availability(FREE, plans, {}, engine=again, root=lab.options.root,
                              unbuildable=Unbuildable(tmp_path / "cache/unbuildable"))  # fmt: skip
    assert (state, why) == ("unavailable", second.message)
    fresh = FakeEngine(present=["debian:sid"], unbuildable_stages=["builder"])
    run(a_lab(tmp_path, fresh, selection=suites(Suite.UNIT), use_cache=False), (FREE,))
    assert [tag for tag, _ in fresh.builds] == [plan_of(lab, fresh).tag("builder")]


def plan_of(lab: Lab, engine: FakeEngine) -> BuildPlan:
    return plan_build(FREE, lab.options.root, "debian:sid", engine.image_id("debian:sid") or "")


def test_list_calls_a_compiled_python_unchecked_until_it_was_built_here(tmp_path: Path) -> None:
    engine = FakeEngine(present=["debian:sid"])
    lab = a_lab(tmp_path, engine)
    nothing = Unbuildable(tmp_path / "unbuildable")
    state, why = availability(FREE, base_plans([FREE], engine, {}), {}, engine=engine, root=lab.options.root,
                              unbuildable=nothing)  # fmt: skip
    assert state == "unchecked" and "not checked until built: the builder stage compiles python3.14t" in why
    engine.present[plan_of(lab, engine).tag("builder")] = "sha256:built"
    state, _ = availability(FREE, base_plans([FREE], engine, {}), {}, engine=engine, root=lab.options.root,
                            unbuildable=nothing)  # fmt: skip
    assert state == "available"


def test_results_with_the_new_fields_survive_the_json_round_trip(tmp_path: Path) -> None:
    from matrix import records

    engine = FakeEngine(present=["debian:bookworm"], suites={"unit": "stress"})
    result = run(a_lab(tmp_path, engine, selection=suites(Suite.UNIT)))["fx-bookworm"]
    result = replace(result, duration=1.0)
    back, _, _ = records.from_json(records.to_json([result], records.Environment()))
    assert back == (result,)
    assert json.loads(records.to_json([result], records.Environment()))["cells"][0]["first_answer"]["runs"] == 3


def test_a_cell_that_compiles_its_python_is_built_in_the_background_before_it_has_a_job_slot(tmp_path: Path) -> None:
    from matrix.cell import base_plans
    from matrix.schedule import _prefetch_work

    engine = FakeEngine(present=["debian:sid", "debian:trixie"])
    lab = a_lab(tmp_path, engine, selection=suites(Suite.UNIT))
    plans = base_plans((PYPY, FREE), engine, {})
    work = _prefetch_work(lab, (PYPY, FREE), plans)
    compiles = [item for item in work if getattr(item, "func", None).__name__ == "_compile"]  # type: ignore[union-attr]
    assert [item.args[1].name for item in compiles] == ["fx-free"]  # type: ignore[attr-defined]  # PyPy is a package
    compiles[0]()
    assert [tag.split(":")[1].rsplit("-", 2)[1] for tag, _ in engine.builds] == ["builder", "python", "runtime", "test",
                                                                               "install"]  # fmt: skip
    assert run(lab, (FREE,))["fx-free"].outcome is Outcome.PASSED and len(engine.builds) == 5  # found built
