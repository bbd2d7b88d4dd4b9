"""The short fuzz run of `make test` (the full one is `make fuzz`): the same generators, drivers and
checks as tests/fuzz/fuzz.py, with small counts and a fixed seed, so a run takes well under a minute.

FUZZ_SEED picks another seed, FUZZ_COUNT another count. A finding fails the test unless fuzz_known.py
names its bug (printed either way); corpus/ holds the minimal messages of the bugs the full runs found,
replayed here, strict xfails while their bug is listed as open.
"""

import glob
import os

import fuzz
import fuzz_drive
import fuzz_gen
import fuzz_known
import fuzz_server
import pytest

SEED = int(os.environ.get("FUZZ_SEED", "20261130"))
COUNT = int(os.environ.get("FUZZ_COUNT", "5000"))
LIVE_COUNT = max(1, COUNT // 6)
CORPUS = sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "*.json")))
SIZES = (1000, 4000)  # repetitive shapes in the random stream; the scaling test goes further


def _unknown(run: fuzz.Run) -> list[str]:
    lines = []
    for occurrence in run.failures.values():
        label = occurrence.label
        shown = occurrence.message.data[:300].decode("utf-8", "backslashreplace")
        line = (f"{occurrence.transport} #{occurrence.index} {occurrence.finding.signature} x{occurrence.count}: "
                f"{occurrence.finding.detail[:200]}\n    message: {shown}")
        print(fuzz.shown(f"[{label or 'NEW'}] {line}"))
        if label is None:
            lines.append(line)
    return lines


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    box = fuzz.Sandbox(str(tmp_path_factory.mktemp("sandbox")), timeout=20)
    yield box
    box.close()


def test_core_stream():
    """COUNT messages through protocol.parse and dispatch, every answer judged, every 10th against the schema."""
    run = fuzz.Run(SEED)
    target = fuzz_gen.Target.of(fuzz_server.server, exclude=fuzz_server.TOUCHES_PROCESS + fuzz_server.NOT_FUZZED)
    generator = fuzz_gen.Generator(target, large=0, repetitive_sizes=SIZES)
    core = fuzz_drive.Core(fuzz_server.server, fuzz_server.FAIL_ON_PURPOSE, fuzz.schema_check(), sample_every=10)
    try:
        core.budget.calibrate(core.timer)
        skipped = fuzz.open_shapes()
        for index in range(COUNT):
            message = generator.message(fuzz.rng_for(SEED, "core", index))
            if message.family not in skipped:
                run.record("core", index, message, core.check(message, index))
    finally:
        core.close()
    assert core.sampled >= COUNT // 20 or fuzz.schema_check() is None
    assert not _unknown(run)


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_live_stream(transport, sandbox):
    """The misbehaving-tool probes, then LIVE_COUNT messages, through a real server process."""
    run = fuzz.Run(SEED)
    target = fuzz_gen.Target.of(fuzz_server.server, exclude=fuzz.LIVE_EXCLUDED)
    generator = fuzz_gen.Generator(target, large=0, repetitive_sizes=SIZES)
    driver = fuzz._live_driver(transport, fuzz_server)
    driver.triage = sandbox.where
    try:
        driver.budget.calibrate(driver.timer)
        for number, message in enumerate(fuzz.probes()):
            run.record(transport, -1 - number, message, driver.check(message))
        skipped = fuzz.open_shapes()
        for index in range(LIVE_COUNT):
            message = fuzz.live_message(generator, SEED, transport, index)
            if message.family in skipped:
                continue
            findings = (driver.framing(message.data, driver.hang_timeout) if message.family == "framing"
                        else driver.check(message, index))
            run.record(transport, index, message, findings)
    finally:
        driver.stop()
    assert not _unknown(run)


@pytest.mark.parametrize("transport", ["legacy-stdio", "legacy-http"])
def test_legacy_sessions(transport):
    """LIVE_COUNT steps of initialize-based sessions (fuzz_legacy.py) through a real server process: every
    request answered once, every refusal a documented one, the server's own requests answered right and
    wrong, and the server serving after each step."""
    run = fuzz.Run(SEED)
    fuzz.run_legacy(run, transport, LIVE_COUNT)
    assert run.messages[transport] == LIVE_COUNT
    assert not _unknown(run)


def _open_bug(signature: str):
    label = fuzz_known.known(signature)
    return [pytest.mark.xfail(strict=True, reason=f"{label} (open, fuzz_known.py)")] if label else []


@pytest.mark.parametrize("kind", [pytest.param(kind, marks=_open_bug(f"superlinear: {kind} "))
                                  for kind in fuzz_gen.REPETITIVE_KINDS])
def test_scaling(kind):
    """Each long repetitive shape at 250 bytes to 32 KB: time must grow like the echo reference's, not faster."""
    core = fuzz_drive.Core(fuzz_server.server, fuzz_server.FAIL_ON_PURPOSE)
    try:
        result = fuzz_drive.scaling(kind, core.timer, [250, 500, 1000, 2000, 4000, 8000, 16_000, 32_000],
                                    stop_after=0.5)
    finally:
        core.close()
    print(result.describe())
    assert not result.superlinear, result.describe()


@pytest.fixture(scope="module")
def drivers():
    made = {}

    def get(transport):
        if transport not in made:
            made[transport] = (fuzz_drive.Core(fuzz_server.server, fuzz_server.FAIL_ON_PURPOSE) if transport == "core"
                               else fuzz._live_driver(transport, fuzz_server))
            made[transport].budget.calibrate(made[transport].timer)
        return made

    yield get
    for driver in made.values():
        driver.close() if transport_of(driver) == "core" else driver.stop()


def transport_of(driver):
    return driver.name


def _corpus_params():
    for path in CORPUS:
        entry, _ = fuzz.load_entry(path)
        yield pytest.param(path, marks=_open_bug(entry["signature"]), id=os.path.basename(path)[:-5])


@pytest.mark.parametrize("path", list(_corpus_params()))
def test_corpus(path, drivers):
    """Every minimal message the full runs found still gets a correct answer in time."""
    entry, _ = fuzz.load_entry(path)
    findings = fuzz.replay(path, drivers(entry["transport"].split("-")[0]))
    assert not findings, "; ".join(f"{f.signature}: {f.detail[:300]}" for f in findings)
