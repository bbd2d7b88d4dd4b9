"""make fuzz: millions of structure-aware and byte-mutated JSON-RPC messages through the protocol core and
through live stdio and HTTP servers, judged message by message.

    python tests/fuzz/fuzz.py                      # the full run: 1,000,000 core, 100,000 stdio, 100,000 HTTP,
                                                   # 20,000 legacy-session steps over each of stdio and HTTP
    python tests/fuzz/fuzz.py --core 20000 --stdio 0 --http 0 --seed 7
    python tests/fuzz/fuzz.py --replay tests/fuzz/corpus/*.json

Every message comes from (seed, transport, index) alone, so one failure replays without the others.
What counts as a failure: anything escaping the core, a -32603 or a traceback in the server's log, an
answer that is not valid JSON-RPC or lacks the request's id (or carries one it could not have read), an
answered notification, an HTTP status that does not fit the answer, an answer in the sample that the
official schema rejects, a server that dies or hangs, one HTTP request answered twice, and a message that
takes far longer than linear time in its size (the budget is a multiple of the cost of echoing as many
bytes, measured in the same run). The scaling check then times each long repetitive shape at doubling
sizes against the same reference. Each distinct failure is minimised, saved to the corpus directory
and printed with its seed; known ones (fuzz_known.py) are reported but do not fail the run. The legacy
streams (fuzz_legacy.py) drive initialize-based sessions step by step, with their own oracle; a finding
there depends on the session's state, so it is saved as found, not minimised.
"""

from __future__ import annotations

import argparse
import base64
import collections
import hashlib
import json
import multiprocessing
import os
import random
import signal
import sys
import time
from typing import Any, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
# The checkout's server/ for this process and for the live servers it starts (an installed mcpserver, as in
# `make fuzz`'s venv, is the same code).
sys.path[:0] = [HERE, os.path.join(ROOT, "server")]
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [os.path.join(ROOT, "server"), os.environ.get("PYTHONPATH")]))

import fuzz_check  # noqa: E402
import fuzz_drive  # noqa: E402
import fuzz_gen  # noqa: E402
import fuzz_known  # noqa: E402
import fuzz_legacy  # noqa: E402
from fuzz_drive import Finding  # noqa: E402

DEFAULT_CORPUS = os.path.join(ROOT, ".cache", "fuzz", "corpus")
HARD_CAP = 120.0  # seconds one in-process message may run before its worker is killed and the message reported


def open_shapes() -> set[str]:
    """The repetitive families whose super-linear cost is a bug fuzz_known.py lists as open: short runs
    leave them to the scaling check (a strict xfail each) instead of paying seconds per message."""
    return {f"repetitive:{kind}" for kind in fuzz_gen.REPETITIVE_KINDS
            if fuzz_known.known(f"superlinear: {kind} ")}


def shown(text: str) -> str:
    """Text safe to print: lone surrogates (a fuzzed method name, say) escaped."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def rng_for(seed: int, transport: str, index: int) -> random.Random:
    return random.Random(f"{seed}:{transport}:{index}")


def fuzz_server() -> Any:
    import fuzz_server as module

    return module


def schema_check() -> Optional[fuzz_check.SchemaCheck]:
    try:
        return fuzz_check.SchemaCheck(fuzz_gen.load_schema())
    except ImportError:  # jsonschema comes with the test extra; without it the sample is skipped
        return None


class Occurrence:
    """One distinct failure: how often, and the first message that showed it."""

    def __init__(self, finding: Finding, transport: str, seed: int, index: int, message: fuzz_gen.Message):
        self.finding = finding
        self.transport = transport
        self.seed = seed
        self.index = index
        self.message = message
        self.count = 0
        self.minimal: Optional[fuzz_gen.Message] = None
        self.saved: Optional[str] = None

    @property
    def label(self) -> Optional[str]:
        return fuzz_known.known(self.finding.signature)


class Run:
    """Counts and distinct failures of a whole run."""

    def __init__(self, seed: int):
        self.seed = seed
        self.messages: collections.Counter[str] = collections.Counter()
        self.families: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
        self.seconds: dict[str, float] = {}
        self.failures: dict[tuple[str, str], Occurrence] = {}
        self.notes: list[str] = []
        self.scaling: list[tuple[str, fuzz_drive.Scaling]] = []

    def record(self, transport: str, index: int, message: fuzz_gen.Message, findings: list[Finding],
               count: int = 1) -> None:
        for finding in findings:
            key = (transport, finding.signature)
            occurrence = self.failures.get(key)
            if occurrence is None:
                occurrence = self.failures[key] = Occurrence(finding, transport, self.seed, index, message)
                label = occurrence.label
                print(shown(f"  {'known ' + label if label else 'NEW'}: {transport} #{index} ({message.family}) "
                            f"{finding.signature} -- {finding.detail[:200]}"), flush=True)
            occurrence.count += count


# ---------------------------------------------------------------------------------------------
# The core, in worker processes: a message that never returns is reported and its worker replaced


def _core_worker(worker: int, jobs: int, seed: int, first: int, quota: int, large: float, sample_every: int,
                 progress: Any, results: Any, dumps_path: str, disabled: set[str]) -> None:
    """Messages first, first + jobs, ... until `quota` have been driven (a shape already found slow is
    skipped and replaced by the next)."""
    module = fuzz_server()
    excluded = module.TOUCHES_PROCESS + module.NOT_FUZZED
    generator = fuzz_gen.Generator(fuzz_gen.Target.of(module.server, exclude=excluded), large=large)
    core = fuzz_drive.Core(module.server, module.FAIL_ON_PURPOSE, schema_check(), sample_every)
    core.budget.calibrate(core.timer)
    if worker == 0 and first < jobs:
        results.put(("note", f"core: {core.budget.describe()}"))
    dumps = fuzz_drive.Dumps(dumps_path)
    seen: set[str] = set()
    families: collections.Counter[str] = collections.Counter()
    counts: collections.Counter[str] = collections.Counter()
    done = driven = 0
    index = first - jobs
    while driven < quota:
        index += jobs
        progress.value = index
        message = generator.message(rng_for(seed, "core", index))
        if message.family in disabled:
            families["skipped (shape already found slow)"] += 1
            continue
        findings = core.check(message, index, dumps)
        families[message.family] += 1
        done += 1
        driven += 1
        for finding in findings:
            counts[finding.signature] += 1
            if finding.signature not in seen:
                seen.add(finding.signature)
                results.put(("finding", index, finding, message))
            if finding.kind == "slow" and message.family.startswith("repetitive:"):
                disabled.add(message.family)
                results.put(("disabled", message.family))
        if done % 500 == 0:
            results.put(("counts", worker, done, dict(families), dict(counts)))
            done, families, counts = 0, collections.Counter(), collections.Counter()
    results.put(("counts", worker, done, dict(families), dict(counts)))
    results.put(("sampled", core.sampled))
    results.put(("done", worker))
    dumps.close()


def run_core(run: Run, count: int, jobs: int, large: float, sample_every: int, workdir: str,
             disabled: set[str]) -> None:
    if count <= 0:
        return
    started = time.perf_counter()
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    workers: dict[int, Any] = {}
    sampled = 0

    quotas = [count // jobs + (worker < count % jobs) for worker in range(jobs)]
    driven = [0] * jobs

    def launch(worker: int, first: int) -> None:
        progress = context.Value("q", first)
        dumps_path = os.path.join(workdir, f"core-{worker}.dumps")
        quota = quotas[worker] - driven[worker]
        process = context.Process(target=_core_worker, args=(worker, jobs, run.seed, first, quota, large,
                                                              sample_every, progress, results, dumps_path,
                                                              set(disabled)), daemon=True)
        process.start()
        workers[worker] = [process, progress, first, time.monotonic(), dumps_path]

    for worker in range(jobs):
        launch(worker, worker)
    finished: set[int] = set()
    last_report = time.monotonic()
    while len(finished) < jobs:
        try:
            item = results.get(timeout=1.0)
        except Exception:  # queue.Empty
            item = None
        if item is not None:
            kind = item[0]
            if kind == "finding":
                _, index, finding, message = item
                run.record("core", index, message, [finding], count=0)
            elif kind == "counts":
                _, worker, done, families, counts = item
                driven[worker] += done
                run.messages["core"] += done
                run.families["core"].update(families)
                for signature, n in counts.items():
                    occurrence = run.failures.get(("core", signature))
                    if occurrence is not None:
                        occurrence.count += n
            elif kind == "disabled":
                disabled.add(item[1])
            elif kind == "sampled":
                sampled += item[1]
            elif kind == "note":
                run.notes.append(item[1])
                print(item[1], flush=True)
            elif kind == "done":
                finished.add(item[1])
        now = time.monotonic()
        for worker, state in workers.items():
            process, progress, last, since, dumps_path = state
            if worker in finished:
                continue
            if progress.value != last:
                state[2], state[3] = progress.value, now
                continue
            if process.is_alive() and now - since < HARD_CAP:
                continue
            index = progress.value
            module = fuzz_server()
            target = fuzz_gen.Target.of(module.server, exclude=module.TOUCHES_PROCESS + module.NOT_FUZZED)
            message = fuzz_gen.Generator(target, large=large).message(rng_for(run.seed, "core", index))
            if process.is_alive():
                os.kill(process.pid, signal.SIGUSR1)  # its stack, into the dumps file, before it goes
                time.sleep(0.5)
                process.kill()
                where = _dumped_where(dumps_path) or f"in {message.family}"
                finding = Finding("slow", where, f"still running after {HARD_CAP:g} s: worker killed")
            else:
                finding = Finding("crash", f"worker exited {process.exitcode}", f"at message {index}")
            process.join()
            if message.family.startswith("repetitive:"):
                disabled.add(message.family)
            run.record("core", index, message, [finding])
            run.messages["core"] += 1
            driven[worker] += 1
            launch(worker, index + jobs)
        if now - last_report > 30:
            last_report = now
            rate = run.messages["core"] / (time.perf_counter() - started)
            print(f"core: {run.messages['core']:,} messages, {rate:,.0f}/s, {len(run.failures)} distinct failures",
                  flush=True)
    for process, *_ in workers.values():
        process.join(10)
    run.seconds["core"] = time.perf_counter() - started
    run.notes.append(f"core: {sampled:,} answers validated against the official schema")


def _dumped_where(path: str) -> Optional[str]:
    """Where the main thread was in the last stack dump of a worker that had to be killed."""
    try:
        with open(path, "rb") as file:
            file.seek(max(0, os.path.getsize(path) - 20_000))
            text = file.read().decode("utf-8", "replace")
    except OSError:
        return None
    return fuzz_drive.where_in_dumps(text[text.rfind("(most recent call first):") - 20:])


# ---------------------------------------------------------------------------------------------
# A core in a child process, for messages that may never return: triage and minimisation of slow ones


def _sandbox_main(connection: Any, dumps_path: str) -> None:
    module = fuzz_server()
    core = fuzz_drive.Core(module.server, module.FAIL_ON_PURPOSE)
    core.budget.calibrate(core.timer)
    dumps = fuzz_drive.Dumps(dumps_path)
    connection.send("ready")
    while True:
        try:
            data, headers, family = connection.recv()
        except EOFError:
            return
        connection.send(core.check(fuzz_gen.Message(data, headers, family), 0, dumps))


class Sandbox:
    """The core in a child process: a message that runs past `timeout` is reported slow, where the child
    was (from its stack dump), and the child replaced."""

    def __init__(self, workdir: str, timeout: float = 30.0):
        self.dumps_path = os.path.join(workdir, "sandbox.dumps")
        self.timeout = timeout
        self.process: Any = None
        self.connection: Any = None

    def _start(self) -> None:
        context = multiprocessing.get_context("spawn")
        self.connection, child = context.Pipe()
        self.process = context.Process(target=_sandbox_main, args=(child, self.dumps_path), daemon=True)
        self.process.start()
        if not self.connection.poll(60) or self.connection.recv() != "ready":
            raise RuntimeError("the sandbox core did not start")

    def check(self, message: fuzz_gen.Message) -> list[Finding]:
        if self.process is None or not self.process.is_alive():
            self._start()
        self.connection.send((message.data, message.headers, message.family))
        if self.connection.poll(self.timeout):
            try:
                return list(self.connection.recv())
            except EOFError:
                pass
        if self.process.is_alive():
            os.kill(self.process.pid, signal.SIGUSR1)
            time.sleep(0.3)
        where = _dumped_where(self.dumps_path) or "in an unknown place"
        self.close()
        return [Finding("slow", where, f"still running after {self.timeout:g} s")]

    def where(self, message: fuzz_gen.Message) -> Optional[str]:
        """Where the core spends its time on a message that is slow (None when the core is not slow on it)."""
        module = fuzz_server()
        if any(f" {name}" in fuzz_drive.describe(message.data) for name in module.TOUCHES_PROCESS):
            return None
        if message.family.startswith("repetitive:"):  # the same shape, small: as telling, far quicker
            message = fuzz_gen.Message(fuzz_gen.repetitive(message.family.split(":", 1)[1], 1000), None,
                                       message.family)
        slow = [f for f in self.check(message) if f.kind == "slow"]
        return slow[0].where.removeprefix("in ") if slow else None

    def close(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.join()
            self.connection.close()
        self.process = None


# ---------------------------------------------------------------------------------------------
# Live servers


LIVE_EXCLUDED = ("raises", "returns", "prints", "reads_stdin", "spawns_child", "mark", "asks_client")


def probes() -> list[fuzz_gen.Message]:
    """Every misbehaving tool once (the random stream leaves them out of live runs: one that kills or
    blocks the server would cost a restart or a timeout each time)."""
    module = fuzz_server()
    calls: list[tuple[str, dict[str, Any]]] = [("raises", {"kind": k}) for k in module._RAISABLE]
    calls += [("returns", {"kind": k}) for k in module._RETURNABLE]
    calls += [("prints", {"text": "progress " * 50, "chunk": 7}), ("prints", {"text": "line", "newline": True}),
              ("reads_stdin", {}), ("spawns_child", {})]
    # The shapes of issue 11's one-line reports, every run: numbers past a double, a name that is a list.
    calls += [("json_cat", {"text": "1e999"}), ("json_cat", {"text": "[" * 64 + "]" * 64}),
              ("keywords", {"amount": fuzz_gen.Raw("1" + "0" * 400)}),
              ("keywords", {"amount": 1, "count": fuzz_gen.Raw("7" + "0" * 400)}),
              ("argv_echo", {"word": "w", "n": -5, "x": 1e308, "flag": True}),
              ("argv_echo", {"word": "-rf", "n": 1, "x": 1, "flag": False})]
    out = []
    for name, arguments in calls:
        data = fuzz_gen.to_bytes(fuzz_gen._tool_call(name, arguments))
        out.append(fuzz_gen.Message(data, None, f"probe:{name}"))
    named = fuzz_gen._tool_call("echo", {"text": "x"})
    for odd in (["echo"], {"name": "echo"}, 5, None):
        named["params"]["name"] = odd
        headers = [("Content-Type", "application/json"), ("MCP-Protocol-Version", fuzz_gen.VERSION),
                   ("Mcp-Method", "tools/call"), ("Mcp-Name", "echo")]
        out.append(fuzz_gen.Message(fuzz_gen.to_bytes(named), headers, "probe:name"))
    for token in ("t1", 7):
        call = fuzz_gen._tool_call("progress_steps", {"steps": 5})
        call["params"]["_meta"]["progressToken"] = token
        out.append(fuzz_gen.Message(fuzz_gen.to_bytes(call), None, "probe:progress"))
    return out


def live_message(generator: fuzz_gen.Generator, seed: int, transport: str, index: int,
                 framing_share: float = 0.05) -> fuzz_gen.Message:
    """Message `index` of a live run: over HTTP, a share of them are requests with broken framing."""
    rng = rng_for(seed, transport, index)
    if transport == "http" and rng.random() < framing_share:
        return fuzz_gen.Message(fuzz_drive.framing_request(rng, "/mcp"), None, "framing")
    return generator.message(rng)


def run_live(run: Run, transport: str, count: int, large: float, sandbox: Sandbox, disabled: set[str],
             framing_share: float = 0.05) -> None:
    if count <= 0:
        return
    module = fuzz_server()
    started = time.perf_counter()
    target = fuzz_gen.Target.of(module.server, exclude=LIVE_EXCLUDED)
    generator = fuzz_gen.Generator(target, large=large)
    driver: Any = (fuzz_drive.LiveStdio(fail_on_purpose=module.FAIL_ON_PURPOSE) if transport == "stdio" else
                   fuzz_drive.LiveHttp(fail_on_purpose=module.FAIL_ON_PURPOSE, gen_target=target))
    driver.triage = sandbox.where
    try:
        driver.budget.calibrate(driver.timer)
        run.notes.append(f"{transport}: {driver.budget.describe()}")
        print(run.notes[-1], flush=True)
        for number, message in enumerate(probes()):
            run.record(transport, -1 - number, message, driver.check(message))
            run.families[transport][message.family.split(":")[0]] += 1
            run.messages[transport] += 1
        disabled = set(disabled)
        last_report = time.monotonic()
        index = -1
        while run.messages[transport] < count + len(probes()):
            index += 1
            message = live_message(generator, run.seed, transport, index, framing_share)
            if message.family == "framing":
                findings = driver.framing(message.data, driver.hang_timeout)
            else:
                if message.family in disabled:
                    run.families[transport]["skipped (shape already found slow)"] += 1
                    continue
                findings = driver.check(message, index)
                if any(f.kind in ("slow", "hang") for f in findings) and message.family.startswith("repetitive:"):
                    disabled.add(message.family)
            run.families[transport][message.family] += 1
            run.messages[transport] += 1
            run.record(transport, index, message, findings)
            if index and index % 20_000 == 0:
                driver.budget.calibrate(driver.timer)
            if time.monotonic() - last_report > 30:
                last_report = time.monotonic()
                rate = run.messages[transport] / (time.perf_counter() - started)
                print(f"{transport}: {run.messages[transport]:,} messages, {rate:,.0f}/s, restarts "
                      f"{driver.restarts}", flush=True)
        run.notes.append(f"{transport}: server restarted {driver.restarts} times")
    finally:
        driver.stop()
    run.seconds[transport] = time.perf_counter() - started


def run_legacy(run: Run, transport: str, count: int) -> None:
    """`count` steps of legacy sessions through a live server (transport: legacy-stdio or legacy-http)."""
    if count <= 0:
        return
    module = fuzz_server()
    started = time.perf_counter()
    target = fuzz_gen.Target.of(module.server, exclude=LIVE_EXCLUDED)
    generator = fuzz_legacy.LegacyGen(target, http=transport == "legacy-http")
    driver: Any = (fuzz_legacy.LegacyStdio(fail_on_purpose=module.FAIL_ON_PURPOSE) if transport == "legacy-stdio"
                   else fuzz_legacy.LegacyHttp(fail_on_purpose=module.FAIL_ON_PURPOSE, gen_target=target))
    last_report = time.monotonic()

    def record(index: int, step: fuzz_legacy.Step, findings: list[Finding]) -> None:
        nonlocal last_report
        family = step.family if step.verb == "POST" else step.verb
        run.families[transport][family] += 1
        run.messages[transport] += 1
        run.record(transport, index, fuzz_gen.Message(step.data, None, f"legacy:{family}:{step.session}"), findings)
        if time.monotonic() - last_report > 30:
            last_report = time.monotonic()
            print(f"{transport}: {run.messages[transport]:,} steps, {driver.sessions:,} sessions", flush=True)

    try:
        fuzz_legacy.drive(driver, generator, run.seed, count, record)
        run.notes.append(f"{transport}: {driver.sessions:,} sessions; the server's own requests answered "
                         + ", ".join(f"{how} {n:,}" for how, n in sorted(driver.asked.items()))
                         + f"; server restarted {driver.restarts} times")
    finally:
        driver.stop()
    run.seconds[transport] = time.perf_counter() - started


# ---------------------------------------------------------------------------------------------
# Super-linear shapes


def run_scaling(run: Run, transports: list[str], sizes: list[int], kinds: tuple[str, ...]) -> None:
    module = fuzz_server()
    for transport in transports:
        started = time.perf_counter()
        if transport == "core":
            driver: Any = fuzz_drive.Core(module.server, module.FAIL_ON_PURPOSE)
        else:
            driver = _live_driver(transport, module)
        try:
            for kind in kinds:
                result = fuzz_drive.scaling(kind, driver.timer, sizes)
                run.scaling.append((transport, result))
                if result.superlinear:
                    data = fuzz_gen.repetitive(kind, result.sizes[0])
                    message = fuzz_gen.Message(data, None, f"scaling:{kind}")
                    run.record(f"{transport}-scaling", 0, message,
                               [Finding("superlinear", f"{kind} ({_scaling_where(kind, module)})", result.describe())])
        finally:
            if transport != "core":
                driver.stop()
            else:
                driver.close()
        run.seconds[f"scaling {transport}"] = time.perf_counter() - started


def _scaling_where(kind: str, module: Any) -> str:
    """Where the core spends its time on this shape, at a size that takes a moment."""
    core = fuzz_drive.Core(module.server, module.FAIL_ON_PURPOSE)
    try:
        size = 1000
        while size < 1_000_000 and core.timer(fuzz_gen.repetitive(kind, size)) < 0.05:
            size *= 2
        return fuzz_drive.hotspot(lambda: core.timer(fuzz_gen.repetitive(kind, size))).removeprefix("in ")
    finally:
        core.close()


# ---------------------------------------------------------------------------------------------
# Minimising, saving, replaying


def reproduces(transport: str, finding: Finding, message: fuzz_gen.Message, driver: Any) -> bool:
    if transport == "http" and message.family == "framing":
        findings = driver.framing(message.data, driver.hang_timeout)
    else:
        findings = driver.check(message)
    return any(f.signature == finding.signature for f in findings)


def minimise_all(run: Run, seconds: float, sandbox: Sandbox) -> None:
    """Shrink each distinct failure's message while it still shows the same signature: a repetitive shape
    to the smallest size that still fails, anything else structurally and then byte by byte. Slow ones
    are replayed in the sandbox, so no replay can run for ever."""
    module = fuzz_server()
    core = fuzz_drive.Core(module.server, module.FAIL_ON_PURPOSE)
    core.budget.calibrate(core.timer)
    live: dict[str, Any] = {}
    try:
        for (transport, _), occurrence in sorted(run.failures.items(), key=lambda item: item[0]):
            base = transport.split("-")[0]
            finding, original = occurrence.finding, occurrence.message
            if finding.kind == "superlinear" or base == "legacy":  # a legacy step needs its session's history
                continue
            if base == "core":
                driver: Any = sandbox if finding.kind == "slow" else core
            else:
                driver = live.get(base)
                if driver is None:
                    driver = live[base] = _live_driver(base, module)
                    driver.budget.calibrate(driver.timer)
                    driver.triage = sandbox.where

            def still_fails(data: bytes, headers: Any, original: fuzz_gen.Message = original, driver: Any = driver,
                            finding: Finding = finding, base: str = base) -> bool:
                return reproduces(base, finding, fuzz_gen.Message(data, headers, original.family), driver)

            if original.family.startswith("repetitive:"):
                kind = original.family.split(":", 1)[1]
                size = 500
                while size < len(original.data):
                    data = fuzz_gen.repetitive(kind, size)
                    if still_fails(data, original.headers):
                        occurrence.minimal = fuzz_gen.Message(data, original.headers, original.family)
                        break
                    size *= 2
                continue
            if not still_fails(original.data, original.headers):
                continue  # not reproducible on its own (it needed the server's state): keep it as found
            data, headers = fuzz_drive.minimise(original.data, original.headers, still_fails, seconds=seconds)
            occurrence.minimal = fuzz_gen.Message(data, headers, original.family)
    finally:
        core.close()
        for driver in live.values():
            driver.stop()


def _live_driver(transport: str, module: Any) -> Any:
    if transport == "stdio":
        return fuzz_drive.LiveStdio(fail_on_purpose=module.FAIL_ON_PURPOSE)
    return fuzz_drive.LiveHttp(fail_on_purpose=module.FAIL_ON_PURPOSE, gen_target=fuzz_gen.Target.of(module.server))


def save(occurrence: Occurrence, directory: str) -> str:
    message = occurrence.minimal or occurrence.message
    signature = occurrence.finding.signature
    name = f"{occurrence.transport}-{occurrence.finding.kind}-{hashlib.sha1(signature.encode()).hexdigest()[:10]}.json"
    entry: dict[str, Any] = {
        "signature": signature, "transport": occurrence.transport, "family": message.family,
        "seed": occurrence.seed, "index": occurrence.index, "detail": occurrence.finding.detail[:2000],
        "headers": message.headers, "known": occurrence.label,
    }
    entry.update(encode_data(message.data))
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, name)
    with open(path, "w", encoding="utf-8") as file:
        json.dump(entry, file, indent=1, ensure_ascii=False)
        file.write("\n")
    return path


def encode_data(data: bytes) -> dict[str, Any]:
    """Readable text when the bytes are short UTF-8, else base64 (of zlib when large)."""
    try:
        if len(data) <= 4000:
            return {"text": data.decode("utf-8")}
    except UnicodeDecodeError:
        pass
    if len(data) > 4000:
        import zlib

        return {"zlib_base64": base64.b64encode(zlib.compress(data, 9)).decode("ascii")}
    return {"base64": base64.b64encode(data).decode("ascii")}


def decode_data(entry: dict[str, Any]) -> bytes:
    if "text" in entry:
        return str(entry["text"]).encode("utf-8", "surrogatepass")
    if "base64" in entry:
        return base64.b64decode(entry["base64"])
    import zlib

    return zlib.decompress(base64.b64decode(entry["zlib_base64"]))


def load_entry(path: str) -> tuple[dict[str, Any], fuzz_gen.Message]:
    with open(path, encoding="utf-8") as file:
        entry = json.load(file)
    headers = [tuple(h) for h in entry["headers"]] if entry.get("headers") is not None else None
    return entry, fuzz_gen.Message(decode_data(entry), headers, entry.get("family", "corpus"))  # type: ignore[arg-type]


def replay(path: str, drivers: dict[str, Any]) -> list[Finding]:
    """The findings a corpus entry still shows, through the transport it was found on."""
    entry, message = load_entry(path)
    transport = entry["transport"].split("-")[0]
    driver = drivers[transport]
    if transport == "http" and message.family == "framing":
        return list(driver.framing(message.data, driver.hang_timeout))
    if entry["transport"].endswith("scaling"):
        kind = message.family.split(":", 1)[1]
        result = fuzz_drive.scaling(kind, driver.timer, [1000, 2000, 4000, 8000, 16_000, 32_000, 64_000])
        return [Finding("superlinear", kind, result.describe())] if result.superlinear else []
    return list(driver.check(message))


# ---------------------------------------------------------------------------------------------
# Report


def report(run: Run, started: float) -> int:
    print("\n== fuzz run, seed", run.seed, f"({time.perf_counter() - started:.0f} s)")
    for transport in ("core", "stdio", "http", "legacy-stdio", "legacy-http"):
        if run.messages[transport]:
            seconds = run.seconds.get(transport, 0.0)
            print(f"{transport}: {run.messages[transport]:,} messages in {seconds:.0f} s "
                  f"({run.messages[transport] / max(seconds, 1e-9):,.0f}/s); families: "
                  + ", ".join(f"{k} {v:,}" for k, v in sorted(run.families[transport].items())))
    for note in run.notes:
        print("  " + note)
    if run.scaling:
        print("scaling (best of 3 at doubling sizes; the exponent is growth beyond the echo reference's):")
        for transport, result in run.scaling:
            flag = "SUPER-LINEAR " if result.superlinear else ""
            print(f"  {transport:5} {flag}{result.describe()}")
    new = [o for o in run.failures.values() if o.label is None]
    print(f"distinct failures: {len(run.failures)} ({len(new)} new)")
    for occurrence in sorted(run.failures.values(), key=lambda o: (o.label is not None, o.transport)):
        label = f"known: {occurrence.label}" if occurrence.label else "NEW"
        message = occurrence.minimal or occurrence.message
        data = message.data[:300].decode("utf-8", "backslashreplace")
        print(shown(f"- [{label}] {occurrence.transport}: {occurrence.finding.signature} x{occurrence.count}\n"
              f"    seed {occurrence.seed} index {occurrence.index} ({occurrence.message.family}); "
              f"{occurrence.finding.detail[:300]}\n"
              f"    minimal ({len(message.data)} bytes): {data}{'...' if len(message.data) > 300 else ''}"
              + (f"\n    headers: {message.headers}" if message.headers is not None else "")
              + (f"\n    saved: {os.path.relpath(occurrence.saved, ROOT)}" if occurrence.saved else "")))
    return 1 if new else 0


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=None, help="default: a random one (printed)")
    parser.add_argument("--core", type=int, default=1_000_000, help="messages through the core")
    parser.add_argument("--stdio", type=int, default=100_000, help="messages through a live stdio server")
    parser.add_argument("--http", type=int, default=100_000, help="messages through a live HTTP server")
    parser.add_argument("--legacy-stdio", type=int, default=20_000, help="legacy-session steps over live stdio")
    parser.add_argument("--legacy-http", type=int, default=20_000, help="legacy-session steps over live HTTP")
    parser.add_argument("--jobs", type=int, default=max(1, min(2, os.cpu_count() or 1)), help="core workers")
    parser.add_argument("--large", type=float, default=0.002, help="share of strings from 64 KB to 1 MB")
    parser.add_argument("--sample-every", type=int, default=25, help="validate every Nth core answer against "
                        "the official schema (0: never)")
    parser.add_argument("--scaling", default="core,stdio,http", help="transports for the scaling check ('' for none)")
    parser.add_argument("--scaling-max", type=int, default=256_000, help="largest size in the scaling check")
    parser.add_argument("--minimise-seconds", type=float, default=60.0, help="per distinct failure")
    parser.add_argument("--corpus", default=DEFAULT_CORPUS, help="where failures are saved")
    parser.add_argument("--skip-open-shapes", action=argparse.BooleanOptionalAction, default=True,
                        help="leave repetitive shapes of open super-linear bugs to the scaling check")
    parser.add_argument("--replay", nargs="+", metavar="FILE", help="replay corpus entries and exit")
    args = parser.parse_args(argv)
    if args.replay:
        return _replay_main(args.replay)

    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 32)
    print(f"fuzz: seed {seed} (rerun with --seed {seed}); core {args.core:,}, stdio {args.stdio:,}, "
          f"http {args.http:,}, legacy stdio {args.legacy_stdio:,}, legacy http {args.legacy_http:,}", flush=True)
    run = Run(seed)
    started = time.perf_counter()
    workdir = os.path.join(ROOT, ".cache", "fuzz")
    os.makedirs(workdir, exist_ok=True)
    sandbox = Sandbox(workdir)
    skipped = open_shapes() if args.skip_open_shapes else set()
    if skipped:
        print(f"fuzz: the random streams leave out {', '.join(sorted(skipped))}: super-linear by a bug listed as "
              "open in fuzz_known.py (the scaling check still measures them)", flush=True)
    run_core(run, args.core, args.jobs, args.large, args.sample_every, workdir, set(skipped))
    run_live(run, "stdio", args.stdio, args.large, sandbox, skipped)
    run_live(run, "http", args.http, args.large, sandbox, skipped)
    run_legacy(run, "legacy-stdio", args.legacy_stdio)
    run_legacy(run, "legacy-http", args.legacy_http)
    transports = [t for t in args.scaling.split(",") if t]
    if transports:
        sizes = [1000]
        while sizes[-1] * 2 <= args.scaling_max:
            sizes.append(sizes[-1] * 2)
        print(f"scaling: {len(fuzz_gen.REPETITIVE_KINDS)} shapes at {sizes[0]:,} to {sizes[-1]:,} bytes", flush=True)
        run_scaling(run, transports, sizes, fuzz_gen.REPETITIVE_KINDS)
    if run.failures:
        print(f"minimising {len(run.failures)} distinct failures", flush=True)
        minimise_all(run, args.minimise_seconds, sandbox)
        for occurrence in run.failures.values():
            occurrence.saved = save(occurrence, args.corpus)
    sandbox.close()
    status = report(run, started)
    summary = {"seed": seed, "messages": dict(run.messages), "seconds": run.seconds,
               "failures": [{"transport": o.transport, "signature": o.finding.signature, "count": o.count,
                             "known": o.label, "index": o.index, "saved": o.saved} for o in run.failures.values()],
               "scaling": [{"transport": t, "kind": r.kind, "sizes": r.sizes, "seconds": r.seconds,
                            "reference": r.reference, "exponent": r.exponent, "superlinear": r.superlinear}
                           for t, r in run.scaling]}
    with open(os.path.join(workdir, "last-run.json"), "w", encoding="utf-8") as file:
        json.dump(summary, file, indent=1)
    return status


def _replay_main(paths: list[str]) -> int:
    module = fuzz_server()
    drivers: dict[str, Any] = {}
    failed = 0
    try:
        for path in paths:
            entry, _ = load_entry(path)
            transport = entry["transport"].split("-")[0]
            if transport not in drivers:
                drivers[transport] = (fuzz_drive.Core(module.server, module.FAIL_ON_PURPOSE) if transport == "core"
                                      else _live_driver(transport, module))
                drivers[transport].budget.calibrate(drivers[transport].timer)
            findings = replay(path, drivers)
            failed += bool(findings)
            print(shown(f"{'FAILS' if findings else 'passes'}: {os.path.basename(path)} ({entry['signature']})"))
            for finding in findings:
                print(shown(f"    {finding.signature}: {finding.detail[:300]}"))
    finally:
        for driver in drivers.values():
            driver.stop() if hasattr(driver, "stop") else driver.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
