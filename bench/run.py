"""The benchmark driver: every system, every metric, interleaved, for N rounds; then docs/reports/performance.md.

    python bench/run.py --venv .cache/bench-venv [--rounds 5] [--quick]

Each round starts every server afresh and runs each metric across the systems in an order that
rotates from round to round, so that every figure can be divided by its peer's figure from the same
round. Failures (a wrong, missing or late answer) are recorded for the system and round, never
turned into numbers, and never stop the run. Raw results go to bench/results/ (not committed).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from typing import Any, Callable

import clients
import compare
import measure
import profile_hot_path
import report
import systems
from clients import Timeout, WrongAnswer

RESULTS = os.path.join(systems.BENCH, "results")
DOC = os.path.join(systems.ROOT, "docs", "reports", "performance.md")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--venv", required=True, help="the benchmark venv with mcp==2.3.0 and gunicorn")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--pipelined", type=int, default=2000, help="stdio requests written ahead")
    parser.add_argument("--lockstep", type=int, default=1000, help="stdio lock-step round trips")
    parser.add_argument("--sequential", type=int, default=1000, help="HTTP keep-alive requests per system")
    parser.add_argument("--wrk-seconds", type=float, default=5.0)
    parser.add_argument("--wrk-connections", type=int, default=32)
    parser.add_argument("--wrk-more", default="8,64", help="more connection counts for wrk, comma-separated: "
                        "mcpserver and the bare server only (metric http.concurrent.N; empty: none)")
    parser.add_argument("--wrk-threads", type=int, default=1)
    parser.add_argument("--cold-starts", type=int, default=3, help="spawns per system per round")
    parser.add_argument("--echo-pipes", type=int, default=4, help="`echo REQUEST | server` runs per system per round")
    parser.add_argument("--payload-repeats", type=int, default=3)
    parser.add_argument("--progress", type=int, default=20000, help="progress notifications per steps call "
                        "(the official SDK, many times slower at it, gets a tenth)")
    parser.add_argument("--fresh-tokens", type=int, default=20, help="never-seen JWTs per algorithm per round")
    parser.add_argument("--auth-rounds", type=int, default=7, help="rounds of bench/auth_verify.py (in process)")
    parser.add_argument("--quick", action="store_true", help="2 rounds, smaller counts: to try the driver")
    parser.add_argument("--only", choices=["stdio", "http"], help="run one transport only")
    parser.add_argument("--server-dir", help="import mcpserver from this directory instead of server/ (to compare "
                        "another checkout; the report then says so)")
    parser.add_argument("--no-profile", action="store_true", help="skip the in-process profile of mcpserver")
    parser.add_argument("--no-instructions", action="store_true", help="skip the instruction counts (valgrind)")
    parser.add_argument("--doc", default=DOC, help="where to write the report (default docs/reports/performance.md)")
    parser.add_argument("--no-doc", action="store_true", help="keep the results, leave the report alone")
    return parser


def attempt(step: Callable[..., Any], *args: Any) -> dict[str, Any]:
    try:
        return {"value": step(*args)}
    except (WrongAnswer, Timeout, RuntimeError, OSError, ValueError) as exc:
        return {"error": f"{type(exc).__name__}: {exc}"[:500]}


def rotated(items: list[Any], round_index: int) -> list[Any]:
    if not items:
        return items
    shift = round_index % len(items)
    return items[shift:] + items[:shift]


class Run:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        # One interpreter for every system: the venv's, so that no system pays for what the base
        # installation's site-packages does at start-up (.pth files) and every one pays the same.
        self.venv_python = os.path.join(os.path.abspath(args.venv), "bin", "python")
        self.python = self.venv_python
        self.cold_reference = systems.cold_start_reference(self.python)
        self.log_dir = os.path.join(RESULTS, "logs")
        self.uncompiled = systems.uncompiled_system(self.python, tempfile.mkdtemp(prefix="mcpserver-bench-"))
        self.metrics: dict[str, dict[str, list[dict[str, Any]]]] = {}

    def record(self, metric: str, key: str, round_index: int, outcome: dict[str, Any]) -> None:
        outcome["round"] = round_index
        self.metrics.setdefault(metric, {}).setdefault(key, []).append(outcome)
        shown = outcome.get("value", outcome.get("error"))
        if isinstance(shown, dict):
            shown = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in shown.items())
        print(f"  [{round_index + 1}] {metric:<24} {key:<20} {shown}", flush=True)

    # -- stdio ----------------------------------------------------------------------------------

    def stdio_round(self, r: int) -> None:
        args = self.args
        every = rotated(systems.stdio_systems(self.python, self.venv_python), r)
        with_reference = rotated([*systems.stdio_systems(self.python, self.venv_python), self.cold_reference,
                                  self.uncompiled], r)
        for _ in range(args.cold_starts):
            for system in with_reference:
                self._sample("stdio.cold_start", system, r, measure.cold_start, system, self.log_dir)
        imports = attempt(measure.import_times, self.python, self.log_dir)
        if "value" in imports:
            imports = {"value": {"ms": imports["value"]["ms"]}, "modules": imports["value"]["modules"]}
        self.record("stdio.import_time", systems.OURS, r, imports)
        for _ in range(args.echo_pipes):
            for system in every:
                self._sample("stdio.echo_pipe", system, r, measure.echo_pipe, system, self.log_dir)
        sessions: dict[str, measure.StdioSession] = {}
        for system in with_reference:  # the reference runs the same workload, for its peak RSS
            started = attempt(systems.start, system, self.log_dir)
            if "error" in started:
                for metric in ("stdio.pipelined", "stdio.lockstep", "stdio.payload_result", "stdio.payload_argument"):
                    self.record(metric, system.key, r, dict(started))
                continue
            session = measure.StdioSession(started["value"])
            warmed = attempt(measure.warm_up, session)
            if "error" in warmed:
                self.record("stdio.pipelined", system.key, r, warmed)
            sessions[system.key] = session
        try:
            order = [s for s in with_reference if s.key in sessions]
            for system in order:
                self.record("stdio.pipelined", system.key, r,
                            attempt(measure.stdio_pipelined, sessions[system.key], args.pipelined))
            for system in order:
                self.record("stdio.lockstep", system.key, r,
                            attempt(measure.stdio_lockstep, sessions[system.key], args.lockstep))
            for system in order:
                self.record("stdio.rss_echo", system.key, r, self._rss(sessions[system.key].running))
            for kind in ("result", "argument"):
                for system in order:
                    self.record(f"stdio.payload_{kind}", system.key, r,
                                attempt(measure.stdio_payload, sessions[system.key], kind, args.payload_repeats))
            for system in order:
                self.record("stdio.rss_payload", system.key, r, self._rss(sessions[system.key].running))
            if systems.SDK in sessions:  # its own steps tool, on the process that ran the rest
                self.record("stdio.progress", systems.SDK, r,
                            attempt(measure.stdio_progress, sessions[systems.SDK], max(1, args.progress // 10)))
        finally:
            for session in sessions.values():
                systems.stop(session.running)
        self.requests_in_flight_round(r)
        self.legacy_stdio_round(r)

    def legacy_stdio_round(self, r: int) -> None:
        """mcpserver and the official SDK after an initialize handshake (the legacy era): pipelined and
        lock-step echo as a legacy client sends it, on processes of their own, so nothing the modern rows
        measure shares a process with a legacy session."""
        args = self.args
        metrics = ("stdio.legacy_pipelined", "stdio.legacy_lockstep")
        sessions: dict[str, measure.StdioSession] = {}
        order = rotated(systems.legacy_stdio_systems(self.python, self.venv_python), r)
        try:
            for system in order:
                started = attempt(systems.start, system, self.log_dir)
                if "error" in started:
                    for metric in metrics:
                        self.record(metric, system.key, r, dict(started))
                    continue
                session = measure.StdioSession(started["value"])
                sessions[system.key] = session
                opened = attempt(measure.legacy_handshake, session)
                if "error" in opened:
                    for metric in metrics:
                        self.record(metric, system.key, r, dict(opened))
                    systems.stop(sessions.pop(system.key).running)
            measured = [s for s in order if s.key in sessions]
            for system in measured:
                self.record("stdio.legacy_pipelined", system.key, r,
                            attempt(measure.stdio_pipelined, sessions[system.key], args.pipelined, "echo",
                                    clients.legacy_echo_line))
            for system in measured:
                self.record("stdio.legacy_lockstep", system.key, r,
                            attempt(measure.stdio_lockstep, sessions[system.key], args.lockstep, "echo",
                                    clients.legacy_echo_line))
        finally:
            for session in sessions.values():
                systems.stop(session.running)

    def requests_in_flight_round(self, r: int) -> None:
        """bench/progress_server.py on stdio: progress notifications per second, and echo with and
        without a Context, side by side in one process so that only the tool differs."""
        args = self.args
        started = attempt(systems.start, systems.progress_stdio(self.python), self.log_dir)
        if "error" in started:
            self.record("stdio.progress", systems.OURS, r, dict(started))
            for metric in ("stdio.context_pipelined", "stdio.context_lockstep"):
                for key in ("echo-plain", "echo-context"):
                    self.record(metric, key, r, dict(started))
            return
        session = measure.StdioSession(started["value"])
        try:
            tools = rotated([("echo-plain", "echo"), ("echo-context", "echo_ctx")], r)
            for key, tool in tools:
                warmed = attempt(measure.warm_up, session, 50, tool)
                if "error" in warmed:
                    self.record("stdio.context_pipelined", key, r, warmed)
            # Four passes each in mirrored order (A B B A A B B A): a drift in the machine's load hits both
            # tools alike; the round's figure is the median of a tool's passes.
            passes: dict[tuple[str, str], list[dict[str, Any]]] = {}
            for key, tool in [*tools, *reversed(tools)] * 2:
                passes.setdefault(("stdio.context_pipelined", key), []).append(
                    attempt(measure.stdio_pipelined, session, args.pipelined, tool))
                passes.setdefault(("stdio.context_lockstep", key), []).append(
                    attempt(measure.stdio_lockstep, session, args.lockstep, tool))
            for (metric, key), outcomes in passes.items():
                self.record(metric, key, r, _median_of(outcomes))
            self.record("stdio.progress", systems.OURS, r, attempt(measure.stdio_progress, session, args.progress))
            self.record("stdio.beside_held", systems.OURS, r, attempt(measure.stdio_beside_held, session, 100))
        finally:
            systems.stop(session.running)

    def _sample(self, metric: str, system: systems.System, r: int, step: Callable[..., Any], *args: Any) -> None:
        """Several samples per round: the round's figure is their median (per field, for a step that
        returns several); any failure is kept."""
        outcome = attempt(step, *args)
        entries = self.metrics.setdefault(metric, {}).setdefault(system.key, [])
        entry = next((e for e in entries if e["round"] == r), None)
        if entry is None:
            entry = {"round": r, "samples": [], "errors": []}
            entries.append(entry)
        if "error" in outcome:
            entry["errors"].append(outcome["error"])
        else:
            entry["samples"].append(outcome["value"])
        samples = entry["samples"]
        if samples and isinstance(samples[0], dict):
            entry["value"] = {field: measure.percentile([s[field] for s in samples], 0.5) for field in samples[0]}
        elif samples:
            entry["value"] = {"ms": measure.percentile(samples, 0.5)}
        if entry["errors"]:
            entry["error"] = f"{len(entry['errors'])} of {len(entry['samples']) + len(entry['errors'])} " \
                             f"failed: {entry['errors'][0]}"
        shown = outcome.get("value", outcome.get("error"))
        if isinstance(shown, dict):
            shown = ", ".join(f"{k}={v:.4g}" for k, v in shown.items())
        print(f"  [{r + 1}] {metric:<24} {system.key:<20} {shown:.4g}" if isinstance(shown, float)
              else f"  [{r + 1}] {metric:<24} {system.key:<20} {shown}", flush=True)

    def _rss(self, running: systems.Running) -> dict[str, Any]:
        if running.process.poll() is not None:
            return {"error": f"the process had exited ({running.process.returncode})"}
        return {"value": {"mib": systems.peak_rss_kib(running.process.pid) / 1024}}

    # -- HTTP -----------------------------------------------------------------------------------

    def http_round(self, r: int) -> None:
        args = self.args
        every = rotated(systems.http_systems(self.python, self.venv_python), r)
        servers: dict[str, systems.Running] = {}
        plans = {
            "http.sequential": [systems.BARE, systems.OURS, systems.OURS_LOGGED, systems.OURS_GUNICORN,
                                systems.OURS_WSGIREF, systems.SDK],
            "http.concurrent": [systems.BARE, systems.OURS, systems.OURS_LOGGED, systems.OURS_GUNICORN, systems.SDK],
            "http.payload_result": [systems.BARE, systems.OURS, systems.OURS_GUNICORN, systems.SDK],
            "http.payload_argument": [systems.BARE, systems.OURS, systems.OURS_GUNICORN, systems.SDK],
            "http.rss": [systems.BARE, systems.OURS, systems.OURS_GUNICORN, systems.SDK],
            **{f"http.concurrent.{n}": [systems.BARE, systems.OURS] for n in wrk_more(args)},
        }
        try:
            for system in every:
                started = attempt(systems.start, system, self.log_dir)
                if "error" in started:
                    for metric, keys in plans.items():
                        if system.key in keys:
                            self.record(metric, system.key, r, dict(started))
                else:
                    servers[system.key] = started["value"]

            def each(metric: str) -> list[systems.Running]:
                return [servers[s.key] for s in every if s.key in servers and s.key in plans[metric]]

            for running in each("http.sequential"):
                self.record("http.sequential", running.system.key, r,
                            attempt(measure.http_sequential, running, args.sequential))
            for metric, connections in [("http.concurrent", args.wrk_connections),
                                        *((f"http.concurrent.{n}", n) for n in wrk_more(args))]:
                for running in each(metric):
                    self.record(metric, running.system.key, r,
                                attempt(measure.http_wrk, running, args.wrk_seconds, connections, args.wrk_threads))
            for kind in ("result", "argument"):
                for running in each(f"http.payload_{kind}"):
                    self.record(f"http.payload_{kind}", running.system.key, r,
                                attempt(measure.http_payload, running, kind, args.payload_repeats))
            for running in each("http.rss"):
                self.record("http.rss", running.system.key, r, self._rss(running))
        finally:
            for running in servers.values():
                systems.stop(running)
        self.http_start_round(r)
        self.http_progress_round(r)
        self.http_auth_round(r)
        self.legacy_http_round(r)

    def legacy_http_round(self, r: int) -> None:
        """http.sequential in a legacy session: the official SDK with sessions, and mcpserver once it serves
        legacy Streamable HTTP (systems.LEGACY_HTTP_SERVED)."""
        for system in rotated(systems.legacy_http_systems(self.python, self.venv_python), r):
            started = attempt(systems.start, system, self.log_dir)
            if "error" in started:
                self.record("http.legacy_sequential", system.key, r, dict(started))
                continue
            try:
                self.record("http.legacy_sequential", system.key, r,
                            attempt(measure.http_legacy_sequential, started["value"], self.args.sequential))
            finally:
                systems.stop(started["value"])

    def http_start_round(self, r: int) -> None:
        """Exec to the first answer over HTTP, each server told its port up front."""
        for _ in range(self.args.cold_starts):
            for system in rotated(systems.ready_systems(self.python, self.venv_python), r):
                self._sample("http.ready", system, r, measure.http_ready, system, self.log_dir)

    def http_progress_round(self, r: int) -> None:
        started = attempt(systems.start, systems.progress_http(self.python), self.log_dir)
        if "error" in started:
            self.record("http.progress", systems.OURS, r, started)
            return
        try:
            self.record("http.progress", systems.OURS, r,
                        attempt(measure.http_progress, started["value"], self.args.progress))
            self.record("http.beside_held", systems.OURS, r,
                        attempt(measure.http_beside_held, started["value"], 20, 5))
        finally:
            systems.stop(started["value"])

    def http_auth_round(self, r: int) -> None:
        """Keep-alive requests with a JWT on every request (RS256, ES256; the server's cache makes all but
        the first a lookup) against the same with a static token, and with no token at all; then what a
        never-seen JWT costs. The issuer is a stand-in on 127.0.0.1 (bench/auth_server.py)."""
        args = self.args
        keys = (AUTH_NONE, AUTH_STATIC, AUTH_RS256, AUTH_ES256)
        issuer_started = attempt(systems.start, systems.authorization_server(self.python), self.log_dir)
        if "error" in issuer_started:
            for key in keys:
                self.record("http.auth", key, r, dict(issuer_started))
            return
        issuer = issuer_started["value"]
        servers: dict[str, systems.Running] = {}
        try:
            token = secrets.token_urlsafe(32)
            token_file = os.path.join(self.log_dir, "static-token")
            with open(token_file, "w") as out:
                out.write(token + "\n")
            static, oauth = systems.auth_systems(self.python, token_file, f"http://127.0.0.1:{issuer.port}")
            none = next(s for s in systems.http_systems(self.python, self.venv_python) if s.key == systems.OURS)
            for key, system in ((AUTH_NONE, none), (AUTH_STATIC, static), (AUTH_OAUTH, oauth)):
                started = attempt(systems.start, system, self.log_dir)
                if "error" in started:
                    for row in (AUTH_RS256, AUTH_ES256) if key == AUTH_OAUTH else (key,):
                        self.record("http.auth", row, r, dict(started))
                else:
                    servers[key] = started["value"]
            jwts: dict[str, list[str]] = {}
            if AUTH_OAUTH in servers:
                audience = f"http://127.0.0.1:{servers[AUTH_OAUTH].port}/mcp"
                for key, alg in ((AUTH_RS256, "RS256"), (AUTH_ES256, "ES256")):
                    fetched = attempt(_tokens, issuer.port, alg, audience, args.fresh_tokens + 1)
                    if "error" in fetched:
                        self.record("http.auth", key, r, fetched)
                    else:
                        jwts[key] = fetched["value"]
            plan = [(AUTH_NONE, servers.get(AUTH_NONE), None),
                    (AUTH_STATIC, servers.get(AUTH_STATIC), f"Bearer {token}"),
                    *[(key, servers[AUTH_OAUTH], f"Bearer {jwts[key][0]}") for key in (AUTH_RS256, AUTH_ES256)
                      if key in jwts]]
            for key, running, authorization in rotated(plan, r):
                if running is not None:
                    self.record("http.auth", key, r,
                                attempt(measure.http_sequential, running, args.sequential, authorization))
            for key in rotated([AUTH_RS256, AUTH_ES256], r):
                if key in jwts:
                    self.record("http.auth_fresh", key, r, attempt(measure.http_fresh_tokens, servers[AUTH_OAUTH],
                                                                   jwts[key][1:], jwts[key][0]))
        finally:
            for running in servers.values():
                systems.stop(running)
            systems.stop(issuer)


# The rows of the OAuth comparison: no token, a static token, and JWTs of each algorithm (one server).
AUTH_NONE, AUTH_STATIC, AUTH_OAUTH = "auth-none", systems.AUTH_STATIC, systems.AUTH_OAUTH
AUTH_RS256, AUTH_ES256 = "auth-rs256", "auth-es256"


def _tokens(port: int, alg: str, audience: str, count: int) -> list[str]:
    """`count` JWTs for `audience`, signed by the stand-in issuer (each with its own jti)."""
    query = urllib.parse.urlencode({"alg": alg, "audience": audience, "count": count})
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/token?{query}", timeout=60) as answer:
        tokens: list[str] = json.load(answer)["tokens"]
    if len(tokens) != count:
        raise ValueError(f"the issuer signed {len(tokens)} tokens, not {count}")
    return tokens


def _median_of(outcomes: list[dict[str, Any]]) -> dict[str, Any]:
    """One figure from several passes in a round: the median of each field; a failed pass fails the round."""
    failed = [o for o in outcomes if "error" in o]
    if failed:
        return dict(failed[0])
    values = [o["value"] for o in outcomes]
    return {"value": {field: statistics.median(v[field] for v in values) for field in values[0]}}


def machine() -> dict[str, Any]:
    info: dict[str, Any] = {"cores": os.cpu_count(), "kernel": platform.release(),
                            "python": platform.python_version()}
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            info["cpu"] = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")),
                               platform.machine())
        with open("/proc/meminfo") as meminfo:
            info["memory_gib"] = round(int(meminfo.readline().split()[1]) / 1024 / 1024, 1)
        with open("/etc/os-release") as release:
            info["os"] = next((line.split("=", 1)[1].strip().strip('"') for line in release
                               if line.startswith("PRETTY_NAME=")), "")
    except OSError:
        pass
    return info


def versions(venv_python: str, server_dir: str) -> dict[str, str]:
    found = {}
    script = ("import importlib.metadata as m, json; print(json.dumps({p: m.version(p) for p in "
              "('mcp', 'gunicorn', 'uvicorn', 'starlette', 'pydantic')}))")
    done = subprocess.run([venv_python, "-c", script], capture_output=True, text=True, check=False)
    if done.returncode == 0:
        found.update(json.loads(done.stdout))
    wrk = subprocess.run(["wrk", "-v"], capture_output=True, text=True, check=False)
    found["wrk"] = (wrk.stdout or wrk.stderr).split()[1] if (wrk.stdout or wrk.stderr).startswith("wrk ") else "?"
    git = subprocess.run(["git", "-C", server_dir, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                         check=False)
    found["mcpserver_commit"] = git.stdout.strip() or "?"
    dirty = subprocess.run(["git", "-C", server_dir, "status", "--porcelain", "--", "mcpserver"],
                           capture_output=True, text=True, check=False)
    if dirty.stdout.strip():
        found["mcpserver_commit"] += " (server/mcpserver modified)"
    if os.path.realpath(server_dir) != os.path.realpath(os.path.join(systems.ROOT, "server")):
        found["mcpserver_commit"] += f" imported from {server_dir}"
    return found


def _auth_verify(python: str, rounds: int) -> dict[str, Any]:
    done = subprocess.run([python, os.path.join(systems.BENCH, "auth_verify.py"), "--json", "--rounds", str(rounds)],
                          capture_output=True, text=True, env=systems.environment(), timeout=600, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"auth_verify.py failed ({done.returncode}): {done.stderr[-400:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def wrk_more(args: argparse.Namespace) -> list[int]:
    return [int(n) for n in args.wrk_more.split(",") if n.strip()]


def count_instructions(run: Run) -> None:
    """Instructions per request of mcpserver and the bare ceilings (cachegrind, bench/compare.py's counts), once:
    a count repeats to within a few thousand instructions, so rounds would add nothing but time."""
    args, python, here = run.args, run.python, systems.SERVER_DIR
    compare.compile_bytecode(python, here)  # else the first counted run of a module compiles it, counted too
    bare_stdio, demo = (list(system.argv[1:]) for system in systems.stdio_systems(python, run.venv_python)[:2])
    stdio_count, http_count = args.pipelined, max(args.sequential // 2, 50)
    counts: list[tuple[str, str, Callable[[], float]]] = [
        ("stdio.instructions", systems.BARE, lambda: compare.stdio_per_request(python, here, bare_stdio, stdio_count)),
        ("stdio.instructions", systems.OURS, lambda: compare.stdio_per_request(python, here, demo, stdio_count)),
        ("stdio.instructions", systems.OURS_LEGACY,
         lambda: compare.stdio_legacy_per_request(python, here, demo, stdio_count)),
    ]
    if args.only != "stdio":
        bare_http, ours_http = systems.http_systems(python, run.venv_python)[:2]
        counts += [("http.instructions", systems.BARE, lambda: compare.http_per_request_of(bare_http, http_count)),
                   ("http.instructions", systems.OURS, lambda: compare.http_per_request_of(ours_http, http_count))]
    for metric, key, count in counts:
        run.record(metric, key, 0, attempt(lambda counted: {"per_request": counted()}, count))


def preflight(args: argparse.Namespace) -> str:
    """What is missing, in words, or an empty string."""
    venv_python = os.path.join(args.venv, "bin", "python")
    problems = []
    if not os.path.exists(venv_python):
        problems.append(f"no benchmark venv at {args.venv} (make bench creates it)")
    elif not os.path.exists(os.path.join(args.venv, "bin", "gunicorn")):
        problems.append(f"gunicorn is missing from {args.venv}")
    if shutil.which("wrk") is None and args.only != "stdio":
        problems.append("wrk is not installed (make bench installs it: apt-get install wrk)")
    return "; ".join(problems)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.quick:
        args.rounds, args.pipelined, args.lockstep, args.sequential = 2, 500, 200, 200
        args.wrk_seconds, args.cold_starts, args.echo_pipes, args.payload_repeats = 2.0, 1, 1, 1
    problem = preflight(args)
    if problem:
        print(f"bench: {problem}", file=sys.stderr)
        return 2
    if args.server_dir:
        systems.SERVER_DIR = os.path.abspath(args.server_dir)
    run = Run(args)
    os.makedirs(RESULTS, exist_ok=True)
    shutil.rmtree(run.log_dir, ignore_errors=True)
    began = time.time()
    load_before = os.getloadavg()
    print(f"bench: {args.rounds} rounds; servers' logs in {os.path.relpath(run.log_dir, systems.ROOT)}", flush=True)
    round_loads = []
    for r in range(args.rounds):
        round_loads.append(os.getloadavg()[0])
        print(f"bench: round {r + 1} of {args.rounds} (load average {round_loads[-1]:.1f})", flush=True)
        if args.only != "http":
            run.stdio_round(r)
        if args.only != "stdio":
            run.http_round(r)
    profile = None
    if not args.no_profile and not args.server_dir:  # the profile imports server/ in this process
        print("bench: profiling mcpserver's hot paths (cProfile)", flush=True)
        profile = profile_hot_path.profile_all()
    if not args.no_instructions and shutil.which("valgrind"):
        print("bench: instructions per request (valgrind --tool=cachegrind)", flush=True)
        count_instructions(run)
    auth_verify = None
    if args.only != "stdio":
        print("bench: token verification in process (bench/auth_verify.py)", flush=True)
        auth_verify = attempt(_auth_verify, run.python, args.auth_rounds)
    results = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "seconds": round(time.time() - began),
        "load_average": {"before": list(load_before), "after": list(os.getloadavg())},
        "round_loads": round_loads,
        "machine": machine(),
        "versions": versions(run.venv_python, systems.SERVER_DIR),
        "config": {k: v for k, v in vars(args).items() if k not in ("doc", "no_doc", "venv")},
        "metrics": run.metrics,
        "profile": profile,
        "auth_verify": auth_verify,
    }
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    for name in (f"results-{stamp}.json", "latest.json"):
        with open(os.path.join(RESULTS, name), "w") as out:
            json.dump(results, out, indent=1)
    print(f"bench: results in bench/results/results-{stamp}.json ({results['seconds']} s)", flush=True)
    if not args.no_doc:
        report.write_doc(results, args.doc)
        print(f"bench: wrote {os.path.relpath(args.doc, systems.ROOT)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
