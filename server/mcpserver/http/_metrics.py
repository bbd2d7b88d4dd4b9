"""Prometheus metrics (`--metrics`, `create_app(metrics=True)`): GET /metrics in the text exposition format 0.0.4,
written with the standard library.

Rules of this module:
- Requests are counted and timed by a middleware, the outermost, so every request the server answers with its
  own code is counted by method, outcome and era, whatever the transport. A request the core refuses before any
  handler (malformed, a header mismatch, an unsupported version, an unknown method) reaches no middleware: the
  app counts it with every other answer of 400 or more, as a refusal by status (401, 429, 503...).
- Gauges are read when scraped, never kept up to date per request: calls in flight, listen streams, legacy
  sessions, tasks by status, and the process's resident memory, CPU time, threads and open descriptors.
- Every label value is bounded: methods are those the server serves (no other request reaches the middleware),
  eras its five revisions, outcomes the six of OUTCOMES, statuses three digits. No client's text: a tool or
  prompt name is one the server registered, else _OTHER.
- OpenTelemetry's MCP conventions (mcpserver._semconv) in Prometheus's form, beside the mcpserver_* series:
  mcp.server.operation.duration is mcp_server_operation_duration_seconds, with the conventions' buckets and their
  attributes as labels, dots made underscores (mcp_method_name, gen_ai_tool_name, gen_ai_operation_name,
  gen_ai_prompt_name, error_type, rpc_response_status_code, network_transport, mcp_protocol_version), so
  dashboards built for other MCP servers read this one.
- Several processes (gunicorn's workers) answer one scrape together when given a directory (`directory`,
  $MCPSERVER_METRICS_DIR), as prometheus_client's multiprocess mode does: each process writes its figures there
  (a second after they change, when it is scraped, and when it exits) and whichever is scraped reads them all.
  Counters and histograms are summed over every process that wrote (a worker that exited keeps its counts: they
  never go backwards), gauges over the live ones, the process figures one series per live process (`pid`), and
  a shared task store's counts are its own, read once. Like prometheus_client's, the directory is emptied by
  whoever starts the server: a new run must not add its counts to the last one's.
"""

from __future__ import annotations

import bisect
import os
import threading
import time

from .. import _json, _log
from .._context import Cancelled, InputRequired
from .._semconv import EXECUTE_TOOL, OPERATION_BUCKETS, network_of, outcome_attributes
from ..errors import ConfigError, ProtocolError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Iterable, Optional, Union

    from .._context import Call
    from .._server import Server

    Labels = tuple[tuple[str, str], ...]
    # (family, suffix, labels, value, how several processes' values combine: SUM, LIVE, PER_PROCESS or OWN)
    Sample = tuple[str, str, Labels, float, str]
    Read = Callable[[], Iterable[tuple[Labels, float]]]
    Merge = Union[str, Callable[[], str]]

__all__ = ["CONTENT_TYPE", "OUTCOMES", "Metrics", "measure"]

log = _log.get("mcpserver.http")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
OUTCOMES = ("ok", "error", "tool_error", "input_required", "cancelled", "internal_error")
# Seconds. Prometheus's default buckets, with the long calls MCP tools make (a command tool may take 30 s).
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
SNAPSHOT_SECONDS = 1.0  # how stale another worker's figures may be in a scrape
SUM, LIVE, PER_PROCESS, OWN = "sum", "live", "per process", "own"

# Every family, in the order they are written: (name, type, help).
FAMILIES = (
    ("mcpserver_requests_total", "counter", "Requests answered, by method, outcome and era (the revision served)"),
    ("mcpserver_request_duration_seconds", "histogram", "Time from a request reaching the handler chain to its "
                                                        "result, by method"),
    ("mcpserver_requests_in_flight", "gauge", "Requests being answered now"),
    ("mcp_server_operation_duration_seconds", "histogram", "MCP request duration as observed on the receiver, from "
                                                           "the time it was received until the result was sent "
                                                           "(OpenTelemetry's mcp.server.operation.duration)"),
    ("mcpserver_http_refusals_total", "counter", "HTTP answers of 400 or more, by status (401 a missing or wrong "
                                                 "token, 429 too many tasks, 503 a bound reached or the "
                                                 "authorization server unreachable)"),
    ("mcpserver_listen_streams", "gauge", "Open subscriptions/listen streams"),
    ("mcpserver_legacy_sessions", "gauge", "Legacy (initialize) sessions whose state this process holds"),
    ("mcpserver_legacy_sessions_opened_total", "counter", "Legacy (initialize) sessions opened"),
    ("mcpserver_tasks", "gauge", "Stored tasks of the Tasks extension, by status (finished ones until their TTL)"),
    ("process_resident_memory_bytes", "gauge", "Resident memory"),
    ("process_cpu_seconds_total", "counter", "User and system CPU time"),
    ("process_threads", "gauge", "Operating-system threads"),
    ("process_open_fds", "gauge", "Open file descriptors"),
)
_TYPES = {name: kind for name, kind, _ in FAMILIES}


def _outcome(result: Any) -> str:
    if isinstance(result, dict):
        if result.get("isError") is True:
            return "tool_error"
        if result.get("resultType") == "input_required":
            return "input_required"
    return "ok"


def _process_figures() -> list[tuple[str, float]]:
    """This process's figures from /proc (Linux); none elsewhere."""
    try:
        with open("/proc/self/stat", "rb") as file:
            fields = file.read().rsplit(b")", 1)[1].split()  # after the command name, which may hold spaces
        descriptors = len(os.listdir("/proc/self/fd"))
    except OSError:
        return []
    ticks = os.sysconf("SC_CLK_TCK")
    # fields[0] is the stat file's third field (state): utime is its 14th, stime 15th, threads 20th, rss 24th
    return [("process_resident_memory_bytes", int(fields[21]) * os.sysconf("SC_PAGE_SIZE")),
            ("process_cpu_seconds_total", (int(fields[11]) + int(fields[12])) / ticks),
            ("process_threads", int(fields[17])), ("process_open_fds", descriptors)]


class Metrics:
    """One process's figures, its middleware (call it as one: `server.middleware(metrics, outermost=True)`),
    and the exposition of every process that shares its directory."""

    def __init__(self, directory: Optional[str] = None, *, http_network: str = "tcp",
                 named: Callable[[str, Optional[str]], Optional[str]] = lambda method, name: None):
        """`http_network`: how HTTP requests come ("tcp", "unix"); `named(method, name)`: the tool or prompt name a
        label may carry (one the server has, else "_OTHER"), None for a method that names neither."""
        if directory is not None and not (os.path.isdir(directory) and os.access(directory, os.W_OK | os.X_OK)):
            raise ConfigError(f"the metrics directory {directory} is not a directory this process can write to")
        self.directory = directory
        self._lock = threading.Lock()
        self._requests: dict[tuple[str, str, str], int] = {}
        self._durations: dict[str, list[float]] = {}  # method -> a count per bucket, then +Inf's, then the sum
        self._operations: dict[Labels, list[float]] = {}  # the conventions' labels -> as _durations' lists
        self.http_network, self._named = http_network, named
        self._refusals: dict[str, int] = {}
        self._in_flight = 0
        self._gauges: list[tuple[str, Merge, Read]] = [
            ("mcpserver_requests_in_flight", LIVE, lambda: [((), self._in_flight)])]
        self._sessions_opened = 0
        self._changed = False  # since the last snapshot was written
        self._writing = False  # this process's snapshot writer runs
        if directory is not None:
            import atexit

            atexit.register(self.write_snapshot)  # a worker that exits leaves its last counts
            os.register_at_fork(after_in_child=self._forked)

    # -- counting --------------------------------------------------------------------------------------------

    def __call__(self, call: Call, proceed: Callable[[], Any]) -> Any:
        """The middleware: every request counted by method, outcome and era, and timed, and timed again under
        OpenTelemetry's conventions."""
        with self._lock:
            self._in_flight += 1
        outcome, failed = "internal_error", outcome_attributes(-32603)
        try:
            result = proceed()
            outcome, failed = _outcome(result), outcome_attributes(result=result)
            return result
        except ProtocolError as refused:
            outcome, failed = "error", outcome_attributes(refused.code)
            raise
        except Cancelled:
            outcome, failed = "cancelled", outcome_attributes(cancelled=True)
            raise
        except InputRequired:
            outcome, failed = "input_required", {}
            raise
        finally:
            self._record(call, outcome, failed, call.elapsed())

    def _record(self, call: Call, outcome: str, failed: dict[str, str], seconds: float) -> None:
        method = call.method
        key = (method, outcome, call.era)
        operation = self._operation_labels(call, failed)
        with self._lock:
            self._in_flight -= 1
            self._requests[key] = self._requests.get(key, 0) + 1
            _observe(self._durations, method, BUCKETS, seconds)
            _observe(self._operations, operation, OPERATION_BUCKETS, seconds)
            self._changed_now()

    def _operation_labels(self, call: Call, failed: dict[str, str]) -> Labels:
        """The conventions' attributes of one request as labels (mcpserver._semconv), bounded: see the rules."""
        labels = [("mcp_method_name", call.method)]
        named = self._named(call.method, call.name)
        if named is not None:
            labels += ([("gen_ai_operation_name", EXECUTE_TOOL), ("gen_ai_tool_name", named)]
                       if call.method == "tools/call" else [("gen_ai_prompt_name", named)])
        labels += [(key.replace(".", "_"), value) for key, value in failed.items()]
        network = network_of(call.transport, self.http_network)
        labels += [("mcp_protocol_version", call.era), ("network_transport", network)]
        return tuple(labels)

    def refused(self, status: str) -> None:
        """The app answered with this status (400 or more)."""
        with self._lock:
            self._refusals[status] = self._refusals.get(status, 0) + 1
            self._changed_now()

    def session_opened(self) -> None:
        with self._lock:
            self._sessions_opened += 1
            self._changed_now()

    def gauge(self, family: str, merge: Merge, read: Read) -> None:
        """A gauge read when scraped: `read()` gives (labels, value) pairs; `merge` (or what it returns, when it
        is a callable) says how several processes' values combine: LIVE, summed over the live ones; OWN, this
        process's alone (a store they share)."""
        self._gauges.append((family, merge, read))

    # -- the exposition ---------------------------------------------------------------------------------------

    def render(self) -> bytes:
        """Every family, in the text exposition format: this process's figures, or every process's that shares
        the directory."""
        samples = self.samples()
        if self.directory is not None:
            self.write_snapshot(samples)
            samples = self._combined(samples)
        return _exposition(samples)

    def samples(self) -> list[Sample]:
        """This process's figures (gauges read now)."""
        with self._lock:
            requests = list(self._requests.items())
            durations = [(method, list(histogram)) for method, histogram in self._durations.items()]
            operations = [(labels, list(histogram)) for labels, histogram in self._operations.items()]
            refusals = list(self._refusals.items())
            opened = self._sessions_opened
        samples: list[Sample] = [("mcpserver_requests_total", "", (("method", method), ("outcome", outcome),
                                                                    ("era", era)), count, SUM)
                                 for (method, outcome, era), count in requests]
        for method, histogram in durations:
            samples += _histogram("mcpserver_request_duration_seconds", (("method", method),), BUCKETS, histogram)
        for labels, histogram in operations:
            samples += _histogram("mcp_server_operation_duration_seconds", labels, OPERATION_BUCKETS, histogram)
        samples.extend(("mcpserver_http_refusals_total", "", (("status", status),), count, SUM)
                       for status, count in refusals)
        samples.append(("mcpserver_legacy_sessions_opened_total", "", (), opened, SUM))
        for family, merge, read in self._gauges:
            try:
                how = merge() if callable(merge) else merge
                samples.extend((family, "", labels, value, how) for labels, value in read())
            except Exception as exc:  # a store that does not answer: the scrape goes on without its figure
                log.warning("metrics: %s could not be read: %s", family, exc)
        samples.extend((family, "", (), value, PER_PROCESS) for family, value in _process_figures())
        return samples

    def _changed_now(self) -> None:
        """Under the lock: a snapshot is due, and, in a process that shares a directory, written soon."""
        self._changed = True
        if self.directory is not None and not self._writing:
            self._writing = True
            threading.Thread(target=self._write_every_second, name="mcpserver-metrics", daemon=True).start()

    # -- several processes -------------------------------------------------------------------------------------

    def _forked(self) -> None:
        """A worker forked from a process that had figures: they are the parent's, not this one's."""
        self._lock = threading.Lock()
        self._requests, self._durations, self._refusals, self._operations = {}, {}, {}, {}
        self._in_flight = self._sessions_opened = 0
        self._changed, self._writing = True, False

    def _write_every_second(self) -> None:
        while True:
            time.sleep(SNAPSHOT_SECONDS)
            if self._changed:
                self.write_snapshot()

    def write_snapshot(self, samples: Optional[list[Sample]] = None) -> None:
        """This process's figures, to DIRECTORY/PID.json (replaced whole: a reader never sees half of it)."""
        if self.directory is None:
            return
        self._changed = False
        path = os.path.join(self.directory, f"{os.getpid()}.json")
        try:
            with open(path + ".tmp", "w", encoding="utf-8") as file:
                file.write(_json.dumps(self.samples() if samples is None else samples))
            os.replace(path + ".tmp", path)
        except OSError as exc:
            log.warning("metrics: cannot write %s: %s", path, exc)

    def _combined(self, own: list[Sample]) -> list[Sample]:
        """This process's samples with every other process's in the directory, combined by their merge rule."""
        assert self.directory is not None
        mine = os.getpid()
        combined: dict[tuple[str, str, Labels], list[Any]] = {}

        def add(samples: Iterable[Any], pid: int, alive: bool) -> None:
            for family, suffix, labels, value, merge in samples:
                if (merge == OWN and pid != mine) or (merge in (LIVE, PER_PROCESS) and not alive):
                    continue
                labels = tuple(tuple(pair) for pair in labels)
                if merge == PER_PROCESS:
                    labels = (*labels, ("pid", str(pid)))
                entry = combined.setdefault((family, suffix, labels), [family, suffix, labels, 0, merge])
                entry[3] += value

        add(own, mine, True)
        for name in os.listdir(self.directory):
            pid_text = name[:-5] if name.endswith(".json") else ""
            if not pid_text.isdigit() or int(pid_text) == mine:
                continue
            try:
                with open(os.path.join(self.directory, name), encoding="utf-8") as file:
                    theirs = _json.loads(file.read())
            except (OSError, ValueError):  # gone, or being replaced: its next snapshot counts next time
                continue
            add(theirs, int(pid_text), _alive(int(pid_text)))
        return [(family, suffix, labels, value, merge) for family, suffix, labels, value, merge in combined.values()]


def _observe(table: dict[Any, list[float]], key: Any, bounds: tuple[float, ...], seconds: float) -> None:
    """One duration into `key`'s histogram of `table`: a count per bucket, then +Inf's, then the sum."""
    histogram = table.get(key)
    if histogram is None:
        histogram = table[key] = [0.0] * (len(bounds) + 2)
    histogram[bisect.bisect_left(bounds, seconds)] += 1
    histogram[-1] += seconds


def _histogram(family: str, labels: Labels, bounds: tuple[float, ...], histogram: list[float]) -> list[Sample]:
    """A histogram's samples: its cumulative buckets, its sum and its count."""
    samples: list[Sample] = []
    cumulative = 0.0
    for bound, count in zip((*bounds, "+Inf"), histogram):
        cumulative += count
        samples.append((family, "_bucket", (*labels, ("le", str(bound))), cumulative, SUM))
    samples.append((family, "_sum", labels, histogram[-1], SUM))
    samples.append((family, "_count", labels, cumulative, SUM))
    return samples


def measure(server: Server, sessions: Callable[[], int], directory: Optional[str],
            http_network: str = "tcp") -> Metrics:
    """An app's Metrics: its middleware outermost on the app's server, and the gauges read from the server (and
    `sessions()`, how many legacy sessions the app holds); `http_network`, how the app's requests come."""
    metrics = Metrics(directory, http_network=http_network, named=lambda method, name: _named(server, method, name))
    metrics.gauge("mcpserver_listen_streams", LIVE, lambda: [((), len(server.subscriptions))])
    metrics.gauge("mcpserver_legacy_sessions", LIVE, lambda: [((), sessions())])
    metrics.gauge("mcpserver_tasks", lambda: OWN if getattr(_task_store(server), "shared", False) else LIVE,
                  lambda: _tasks(server))
    server.middleware(metrics, outermost=True)
    return metrics


def _named(server: Server, method: str, name: Optional[str]) -> Optional[str]:
    """The tool or prompt a request names, as a label: one the server has, else _OTHER (a client calling made-up
    names must not make a series per name); None for a method that names neither."""
    table: Any = server.tools if method == "tools/call" else server.prompts if method == "prompts/get" else None
    if table is None:
        return None
    return name if name is not None and name in table else "_OTHER"


def _has_tasks(server: Server) -> bool:
    return server.task_store is not None or any(tool.task != "never" for tool in server.tools.values())


def _task_store(server: Server) -> Any:
    """The server's task store, opened if it was not yet (a scrape is as good a first need as a task)."""
    from ..tasks import task_manager

    return task_manager(server).tasks.store if _has_tasks(server) else None


def _tasks(server: Server) -> list[tuple[Labels, float]]:
    """Every status's count, zeros included (a series that vanishes reads as missing data, not as none)."""
    store = _task_store(server)
    if store is None:
        return []
    from ..store import STATUSES

    counts = store.count_by_status(store.now())
    return [] if counts is None else [((("status", status),), counts.get(status, 0)) for status in STATUSES]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's: it exists
        return True
    return True


def _exposition(samples: list[Sample]) -> bytes:
    by_family: dict[str, list[Sample]] = {}
    for sample in samples:
        by_family.setdefault(sample[0], []).append(sample)
    lines = []
    for family, kind, text in FAMILIES:
        found = by_family.get(family)
        if not found:
            continue
        lines.append(f"# HELP {family} {text}")
        lines.append(f"# TYPE {family} {kind}")
        found.sort(key=_order)
        lines.extend(f"{family}{suffix}{_labels(labels)} {_number(value)}" for _, suffix, labels, value, _ in found)
    return ("\n".join(lines) + "\n").encode()


_SUFFIX_ORDER = {"": 0, "_bucket": 0, "_sum": 1, "_count": 2}


def _order(sample: Sample) -> tuple[Any, ...]:
    """Series by their labels; a histogram's buckets in rising order, then its sum and count."""
    _, suffix, labels, _, _ = sample
    others = tuple(pair for pair in labels if pair[0] != "le")
    bound = next((float(value) for name, value in labels if name == "le"), 0.0)
    return others, _SUFFIX_ORDER[suffix], bound


def _labels(labels: Labels) -> str:
    if not labels:
        return ""
    escaped = (value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"') for _, value in labels)
    return "{" + ",".join(f'{name}="{value}"' for (name, _), value in zip(labels, escaped)) + "}"


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))
