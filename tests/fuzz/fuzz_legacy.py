"""The legacy era under fuzz: initialize-based sessions (LEGACY.md, 2024-11-05 to 2025-11-25) over live stdio
and HTTP, step by step, with the state a session has.

A step is one message of a session's life: `initialize` (valid, or mangled), `notifications/initialized`,
`ping`, `logging/setLevel`, `resources/subscribe` and `unsubscribe`, the shared methods without `_meta`,
a call of `asks_client` (which makes the server send elicitation/create, sampling/createMessage or
roots/list), answers to ids nobody asked for, cancels, a 2026-07-28 request in the middle, and byte
mutations of all of these. Over HTTP each step also picks its Mcp-Session-Id (the session's, none, forged,
another principal's, expired, ended, garbage), its MCP-Protocol-Version, a Last-Event-ID, and sometimes is
a GET of the standalone stream or a DELETE. When the server asks the client something, this driver answers
as a client could: rightly, after a wrong or unknown id, with an error, with a result that is not an
object, or by cancelling the call.

The oracle, for every step:
- every request is answered exactly once with a well-formed JSON-RPC response carrying its id (none when
  the id cannot be read): a result that is a JSON object, or an error with a code either era uses and a
  string message; -32603 is a finding. A call the client cancelled may go unanswered (LEGACY.md §8);
- a notification, and a client's answer, is never answered (over HTTP: 202, or the documented 400 for an
  answer no request of the session waits for);
- what the server sends unasked is a notification of a known kind or a request of its own
  (`mcpserver-N` ids, elicitation/sampling/roots);
- HTTP refusals are the documented ones: 404 for a session id that is not a live session of this caller
  (unless the message is a 2026-07-28 request, which knows no sessions), 400 for a wrong
  MCP-Protocol-Version, 406 for a GET that does not accept text/event-stream, 400 for one with a Last-Event-ID
  of no event, 204 for a DELETE;
- no traceback on stderr, no crash, no hang, and a `mark` request right after is served (the server
  keeps serving).
A `Last-Event-ID` the fuzzer makes up names no event the server sent: a GET with one is 400, saying that nothing
was replayed (tests/http/test_legacy_resume.py tests real resumption).
"""

from __future__ import annotations

import collections
import json
import os
import random
import socket
import time
from typing import Any, NamedTuple, Optional

import fuzz_check
import fuzz_drive
import fuzz_gen
from fuzz_check import ABSENT, Expected
from fuzz_drive import Finding, HttpResponse, _normalise, mark_request, merged, read_response, stderr_findings

LEGACY_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
# Error codes an answer may carry, in either era (LEGACY.md §10, WIRE.md §7.1); -32603 is a server fault.
CODES = {-32700, -32600, -32601, -32602, -32002, -32020, -32021, -32022}
SERVER_REQUESTS = ("elicitation/create", "sampling/createMessage", "roots/list")
SERVER_NOTIFICATIONS = ("notifications/message", "notifications/progress", "notifications/cancelled",
                        "notifications/resources/updated", "notifications/tools/list_changed",
                        "notifications/resources/list_changed", "notifications/prompts/list_changed")
STATE_KEY = "fuzz-legacy-state-key-0123456789abcdef"  # the HTTP server's MCPSERVER_STATE_KEY, to seal ids with
SESSION_IDS = (("real", 70), ("none", 8), ("forged", 5), ("foreign", 5), ("expired", 4), ("ended", 4),
               ("garbage", 4))
ASK_ANSWERS = ("right", "right", "right", "wrong-then-right", "unknown-then-right", "error", "not-an-object",
               "cancel")


class Step(NamedTuple):
    """One message of a session (data: the body or stdio line), and over HTTP how it is sent."""

    data: bytes
    family: str
    verb: str = "POST"  # or GET, DELETE (HTTP)
    session: str = "real"
    version: str = "session"  # the MCP-Protocol-Version header: the session's, a wrong one, or none
    last_event_id: Optional[str] = None
    accept: str = "application/json, text/event-stream"


def _envelope(method: str, params: Any, rng: random.Random, notification: bool = False) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if not notification:
        message["id"] = fuzz_gen.request_id(rng) if rng.random() < 0.15 else rng.randrange(1_000_000)
    if params is not None:
        message["params"] = params
    return message


def initialize_params(rng: random.Random) -> dict[str, Any]:
    capabilities: dict[str, Any] = {}
    for name in ("elicitation", "sampling", "roots"):
        if rng.random() < 0.7:
            capabilities[name] = {"listChanged": True} if name == "roots" else {}
    return {"protocolVersion": rng.choice(LEGACY_VERSIONS), "capabilities": capabilities,
            "clientInfo": {"name": "fuzz-client", "version": "1.0"}}


def mangled_initialize(rng: random.Random) -> Any:
    params: Any = initialize_params(rng)
    roll = rng.randrange(9)
    if roll == 0:
        params["protocolVersion"] = rng.choice(["2099-01-01", "", None, 20241105, "2024-11-05 ", "2026-07-28",
                                                fuzz_gen.big_string(rng, 5000)])
    elif roll == 1:
        del params["protocolVersion"]
    elif roll == 2:
        params["capabilities"] = fuzz_gen.hostile_value(rng)
    elif roll == 3:
        params["clientInfo"] = rng.choice([None, "x", [], {"name": fuzz_gen.big_string(rng, 6000)}])
    elif roll == 4:
        params["capabilities"] = {"elicitation": {"x" * 100: "y" * 5000}}  # past the 4 KiB a session id carries
    elif roll == 5:
        params = rng.choice([None, [], "x", 0])
    elif roll == 6:
        params["_meta"] = fuzz_gen.broken_meta(rng)
    elif roll == 7:
        params[rng.choice(["capabilities", "clientInfo"])] = fuzz_gen.Raw("1e999")
    else:
        params = fuzz_gen.duplicate_keys([("protocolVersion", "2025-06-18"), ("protocolVersion", "2099-01-01"),
                                          ("capabilities", {}), ("clientInfo", {"name": "x", "version": "1"})])
    return _envelope("initialize", params, rng)


class LegacyGen:
    """Steps of legacy sessions, drawn from a seeded `random.Random`."""

    FAMILIES = (("initialize", 3), ("initialize-mangled", 4), ("initialized", 5), ("ping", 6), ("setLevel", 7),
                ("subscribe", 7), ("shared", 20), ("asks", 14), ("response", 6), ("cancel", 4), ("modern", 4),
                ("bytes", 12))
    HTTP_FAMILIES = (("get", 5), ("delete", 2))

    def __init__(self, target: fuzz_gen.Target, http: bool):
        self.target = target
        self.http = http
        self.modern = fuzz_gen.Generator(target, large=0)
        families = self.FAMILIES + (self.HTTP_FAMILIES if http else ())
        self.families = [name for name, _ in families]
        self.weights = [weight for _, weight in families]

    def message(self, family: str, rng: random.Random) -> Any:
        if family == "initialize":
            return _envelope("initialize", initialize_params(rng), rng)
        if family == "initialize-mangled":
            return mangled_initialize(rng)
        if family == "initialized":
            params = rng.choice([None, {}, {"_meta": {}}, fuzz_gen.hostile_value(rng)])
            return _envelope("notifications/initialized", params, rng, notification=rng.random() < 0.85)
        if family == "ping":
            return _envelope("ping", rng.choice([None, {}, {"_meta": {"progressToken": 1}}, []]), rng)
        if family == "setLevel":
            level = rng.choice([*LOG_LEVELS, *LOG_LEVELS, "DEBUG", "", None, 3, "verbose", ["info"]])
            return _envelope("logging/setLevel", rng.choice([{"level": level}, {"level": level}, {}, None]), rng)
        if family == "subscribe":
            uri = rng.choice([*self.target.resources, *self.target.resources, "notes://nothing", "", 5, None,
                              "file:///etc/passwd"])
            method = rng.choice(["resources/subscribe", "resources/subscribe", "resources/unsubscribe"])
            return _envelope(method, {"uri": uri} if uri is not None else {}, rng)
        if family == "shared":
            message = self.modern.valid_request(rng)
            message["params"].pop("_meta", None)  # a legacy request: no 2026-07-28 _meta
            if rng.random() < 0.1:
                message["params"]["_meta"] = {"progressToken": rng.choice(["p", 7])}
            return message
        if family == "asks":
            arguments: dict[str, Any] = {"kind": rng.choice(["elicit", "sample", "roots"])}
            params: dict[str, Any] = {"name": "asks_client", "arguments": arguments}
            if rng.random() < 0.2:
                params["_meta"] = {"progressToken": rng.choice(["p", 9])}
            return _envelope("tools/call", params, rng)
        if family == "response":
            answer_id = rng.choice(["mcpserver-1", "mcpserver-999999", "mcpserver-0", 1, "1", None, [], ""])
            body = rng.choice([{"result": {"action": "accept", "content": {}}}, {"result": {"roots": []}},
                               {"error": {"code": -1, "message": "no"}}, {"result": 5}, {"result": {}, "error": {}}])
            return {"jsonrpc": "2.0", "id": answer_id, **body}
        if family == "cancel":
            request_id = rng.choice([rng.randrange(1_000_000), "mcpserver-1", None, [], "x"])
            return _envelope("notifications/cancelled", {"requestId": request_id, "reason": "fuzz"}, rng,
                             notification=True)
        if family == "modern":
            return self.modern.valid_request(rng)
        raise AssertionError(family)

    def step(self, rng: random.Random, must_initialize: bool) -> Step:
        family = "initialize" if must_initialize else rng.choices(self.families, self.weights)[0]
        session = "real" if must_initialize else rng.choices(*zip(*SESSION_IDS))[0]
        if must_initialize and self.http:
            session = "none"
        extra: dict[str, Any] = {}
        if self.http:
            version = rng.choices(["session", "none", "wrong"], [80, 12, 8])[0]
            last_event_id = rng.choice([None, None, None, "0", "1", "-1", "abc", "9" * 400, "\u00e9", " 1", "1\t"])
            accept = rng.choices(["application/json, text/event-stream", "application/json", "text/event-stream",
                                  "*/*"], [80, 10, 5, 5])[0]
            extra = {"session": "none" if family == "initialize" and not must_initialize and rng.random() < 0.7
                     else session, "version": version, "last_event_id": last_event_id, "accept": accept}
        if family in ("get", "delete"):
            return Step(b"", family, family.upper(), **extra)
        if family == "bytes":
            base = self.message(rng.choice([f for f in self.families if f not in ("bytes", "get", "delete")]), rng)
            return Step(fuzz_gen.mutate_bytes(fuzz_gen.to_bytes(base, rng), rng), family, **extra)
        return Step(fuzz_gen.to_bytes(self.message(family, rng), rng), family, **extra)


# ---------------------------------------------------------------------------------------------
# The oracle


def check_answer(response: Any, expected: Expected) -> Optional[str]:
    """None when `response` is a well-formed JSON-RPC answer to the message, in either era's terms."""
    if not isinstance(response, dict) or response.get("jsonrpc") != "2.0":
        return 'answer is not a JSON-RPC object with "jsonrpc": "2.0"'
    if expected.id is ABSENT:
        if "id" in response and response["id"] is not None:
            return f"answer carries id {response['id']!r} but the message had no readable id"
    elif type(response.get("id")) is not type(expected.id) or response["id"] != expected.id:
        return f"answer carries id {response.get('id')!r}, not the request's {expected.id!r}"
    if ("result" in response) == ("error" in response):
        return "answer has neither or both of result and error"
    if set(response) - {"jsonrpc", "id", "result", "error"}:
        return f"answer has unexpected members {sorted(set(response) - {'jsonrpc', 'id', 'result', 'error'})}"
    if "result" in response:
        return None if isinstance(response["result"], dict) else "result is not an object"
    error = response["error"]
    if not (isinstance(error, dict) and type(error.get("code")) is int and isinstance(error.get("message"), str)):
        return f"malformed error object {error!r:.200}"
    if error["code"] == -32603:
        return f"internal error (-32603): {error['message']!r:.200}"
    if error["code"] not in CODES:
        return f"error code {error['code']} is not one either era sends"
    return None


def unasked_problem(message: dict[str, Any]) -> Optional[str]:
    """What is wrong with a message the server sent unasked (a notification, or a request of its own)."""
    method = message.get("method")
    if "id" in message:
        if method not in SERVER_REQUESTS:
            return f"the server sent a request {str(method)[:60]!r}"
        if not (isinstance(message["id"], str) and message["id"].startswith("mcpserver-")):
            return f"the server's request has id {message['id']!r}, not one of its own"
        return None
    if method not in SERVER_NOTIFICATIONS:
        return f"unexpected notification {str(method)[:60]!r}"
    return None


def is_response(message: Any) -> bool:
    return isinstance(message, dict) and "method" not in message


def judge_responses(expectations: list[Expected], responses: list[Any], optional: set[Any]) -> list[Finding]:
    """Responses to the messages a step sent, paired by id; `optional` holds ids of calls the client cancelled
    (which may go unanswered)."""
    findings = []
    wanted = [e for e in expectations if e.answered]
    for response in responses:
        answer_id = response.get("id", ABSENT) if isinstance(response, dict) else ABSENT
        match = next((e for e in wanted if (e.id is ABSENT and answer_id in (ABSENT, None))
                      or (e.id is not ABSENT and type(e.id) is type(answer_id) and e.id == answer_id)), None)
        if match is None:
            unanswered = [e for e in expectations if not e.answered]
            what = ("a notification" if any(e.notification for e in unanswered) else "a client response"
                    if unanswered else "an id no request had")
            findings.append(Finding("extra-answer", f"{what} was answered", json.dumps(response)[:300]))
            continue
        wanted.remove(match)
        problem = check_answer(response, match)
        if problem:
            kind = "internal-error" if problem.startswith("internal error") else "bad-answer"
            findings.append(Finding(kind, _normalise(problem), problem))
    for missing in wanted:
        if not (missing.id is not ABSENT and any(type(o) is type(missing.id) and o == missing.id for o in optional)):
            findings.append(Finding("no-answer", "a request got no answer", f"expected id {missing.id!r}"))
    return findings


def client_answer(request: dict[str, Any], how: str) -> list[dict[str, Any]]:
    """What a client sends back for the server's `request`, answering `how`."""
    right = {"elicitation/create": {"action": "accept", "content": {"ok": True}},
             "sampling/createMessage": {"role": "assistant", "content": {"type": "text", "text": "hi"},
                                        "model": "fuzz"},
             "roots/list": {"roots": [{"uri": "file:///tmp", "name": "tmp"}]}}[request["method"]]
    answer = {"jsonrpc": "2.0", "id": request["id"], "result": right}
    if how == "wrong-then-right":
        return [dict(answer, id=request["id"] + "0"), answer]
    if how == "unknown-then-right":
        return [dict(answer, id=7), answer]
    if how == "error":
        return [{"jsonrpc": "2.0", "id": request["id"], "error": {"code": -1, "message": "the user said no"}}]
    if how == "not-an-object":
        return [{"jsonrpc": "2.0", "id": request["id"], "result": ["not", "an", "object"]}]
    return [answer]


def _is_client_response(data: bytes) -> bool:
    """An answer of the client's (to a request of the server's), as the server parses one."""
    parsed, message = fuzz_check.decode(data)
    return (parsed and isinstance(message, dict) and message.get("jsonrpc") == "2.0" and "method" not in message
            and "id" in message and ("result" in message or "error" in message))


def _is_modern(data: bytes) -> bool:
    """A 2026-07-28 request: served as such whatever the session id says."""
    parsed, message = fuzz_check.decode(data)
    if not (parsed and isinstance(message, dict) and isinstance(message.get("method"), str) and "id" in message):
        return False
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return (message.get("jsonrpc") == "2.0" and type(message["id"]) in (str, int) and isinstance(meta, dict)
            and fuzz_gen.META_VERSION in meta)


# ---------------------------------------------------------------------------------------------
# stdio: one process is one session; a fresh process now and then


class LegacyStdio(fuzz_drive.LiveStdio):
    """A stdio server driven through legacy sessions: each process holds one, from its initialize."""

    name = "legacy-stdio"

    def start(self) -> None:
        super().start()
        self.initialized = False
        self.sessions = getattr(self, "sessions", -1) + 1
        self.asked: collections.Counter[str] = getattr(self, "asked", collections.Counter())

    def check_step(self, step: Step, rng: random.Random) -> list[Finding]:
        expectations = [fuzz_check.expect(s, http=False) for s in fuzz_check.stdio_segments(step.data)]
        self.marks += 1
        n = self.marks
        self.writes.put(step.data + b"\n")
        responses: list[Any] = []
        findings: list[Finding] = []
        optional: set[Any] = set()
        deadline = time.monotonic() + self.hang_timeout
        wanted = sum(e.answered for e in expectations)
        marked = False
        while True:
            if not marked and len(responses) >= wanted - len(optional):
                self.writes.put(mark_request(n) + b"\n")
                marked = True
            try:
                line = self.answers.get(timeout=max(0.0, deadline - time.monotonic()))
            except Exception:  # queue.Empty
                line = b"" if self.process is not None and self.process.poll() is None else None
                state = "hung" if line == b"" else "died"
                return self._lost(findings, step, state)
            if line is None:
                return self._lost(findings, step, "died")
            try:
                message = json.loads(line)
            except ValueError:
                findings.append(Finding("bad-answer", "stdout line is not JSON", line[:300].decode("latin-1")))
                continue
            if isinstance(message, dict) and message.get("id") == f"fuzz-mark-{n}":
                break
            if is_response(message):
                responses.append(message)
                continue
            problem = unasked_problem(message) if isinstance(message, dict) else "a server message is not an object"
            if problem:
                findings.append(Finding("bad-unasked", _normalise(problem), json.dumps(message)[:300]))
            elif "id" in message:  # the server asks: answer as a client would (each answer itself gets no answer)
                how = rng.choice(ASK_ANSWERS)
                self.asked[how] += 1
                if how == "cancel":
                    call = next((e.id for e in expectations if e.answered and e.id is not ABSENT), None)
                    if call is not None:
                        optional.add(call)
                        self.writes.put(fuzz_gen.to_bytes({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                                           "params": {"requestId": call, "reason": "fuzz"}}) + b"\n")
                        continue
                    how = "right"
                for answer in client_answer(message, how):
                    self.writes.put(fuzz_gen.to_bytes(answer) + b"\n")
        logged, _ = self.stderr.until(f"fuzz-mark {n}\n", 5.0)
        findings += stderr_findings(logged, self.fail_on_purpose)
        findings += judge_responses(expectations, responses, optional)
        if step.family == "initialize" and any("protocolVersion" in r.get("result", {}) for r in responses
                                               if isinstance(r, dict) and isinstance(r.get("result"), dict)):
            self.initialized = True
        return merged(findings)

    def _lost(self, findings: list[Finding], step: Step, state: str) -> list[Finding]:
        logged, _ = self.stderr.until("\0", 0.5)
        what = fuzz_drive.where_in_text(logged) if "Traceback" in logged else f"after {fuzz_drive.describe(step.data)}"
        findings.append(Finding("crash" if state == "died" else "hang", f"legacy stdio server {state} ({what})",
                                (logged or self.stderr.tail())[-800:]))
        self.start()
        return merged(findings)


# ---------------------------------------------------------------------------------------------
# HTTP: sessions by Mcp-Session-Id, on one long-lived server


def _sse_events(sock: socket.socket, buffer: bytearray, deadline: float, chunked: bool) -> Any:
    """The JSON messages of an SSE response body as they arrive (one `data:` line each)."""
    body = bytearray()

    def fill() -> bool:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise socket.timeout("stream deadline")
        sock.settimeout(remaining)
        data = sock.recv(1 << 16)
        buffer.extend(data)
        return bool(data)

    while True:
        if chunked:
            while b"\r\n" not in buffer:
                if not fill():
                    raise ConnectionError("the stream ended inside a chunk size")
            size_line, _, _ = bytes(buffer).partition(b"\r\n")
            size = int(size_line.split(b";")[0], 16)
            while len(buffer) < len(size_line) + 2 + size + 2:
                if not fill():
                    raise ConnectionError("the stream ended inside a chunk")
            start = len(size_line) + 2
            body.extend(buffer[start:start + size])
            del buffer[:start + size + 2]
            ended = size == 0
        else:
            ended = not fill()
            body.extend(buffer)
            buffer.clear()
        while b"\n\n" in body:
            frame, _, rest = bytes(body).partition(b"\n\n")
            body[:] = rest
            data = [line[5:].strip() for line in frame.split(b"\n") if line.startswith(b"data:")]
            if any(data):  # an event with an id and empty data primes a resumable stream: no message
                yield json.loads(b"\n".join(data))
        if ended:
            return


class LegacyHttp(fuzz_drive.LiveHttp):
    """An HTTP server driven through legacy sessions by Mcp-Session-Id."""

    name = "legacy-http"

    def __init__(self, **options: Any):
        from mcpserver._state import Sealer

        self.sealer = Sealer(STATE_KEY)
        self.session: Optional[str] = None
        self.revision = LEGACY_VERSIONS[-1]
        self.ended: list[str] = []
        self.sessions = 0
        self.asked: collections.Counter[str] = collections.Counter()
        super().__init__(**options)

    def start(self) -> None:
        self.env = {**os.environ, "MCPSERVER_STATE_KEY": STATE_KEY}
        super().start()
        self.session = None

    def session_header(self, choice: str, rng: random.Random) -> Optional[str]:
        value = {"r": self.revision, "c": {}, "i": {}, "w": "", "n": "00"}
        if choice == "real":
            return self.session
        if choice == "forged":
            return self.sealer.seal_value("session", value, 3600)[:-4] + "AAAA"
        if choice == "foreign":  # validly sealed, for another principal
            return self.sealer.seal_value("session", dict(value, w="subject mallory"), 3600)
        if choice == "expired":
            return self.sealer.seal_value("session", value, -10)
        if choice == "ended":
            return rng.choice(self.ended) if self.ended else self.sealer.seal_value("session", value, -10)
        if choice == "garbage":
            return rng.choice(["", "x", "1.2.3", "a" * 9000, "\u00e9", "v1..", "../../etc/passwd"])
        return None

    def headers(self, step: Step, rng: random.Random, session: Optional[str]) -> list[tuple[str, str]]:
        headers = [("Content-Type", "application/json"), ("Accept", step.accept)]
        if session is not None:
            headers.append(("Mcp-Session-Id", session))
        if step.version == "session" and session is not None:
            headers.append(("MCP-Protocol-Version", self.revision))
        elif step.version == "wrong":
            headers.append(("MCP-Protocol-Version", rng.choice(["2024-11-05", "2099-01-01", "2026-07-28", "x"])))
        if step.last_event_id is not None:
            headers.append(("Last-Event-ID", step.last_event_id))
        return headers

    def raw(self, verb: str, data: bytes, headers: list[tuple[str, str]]) -> bytes:
        lines = [f"{verb} {self.path} HTTP/1.1", f"Host: 127.0.0.1:{self.port}"]
        lines += [f"{name}: {value}" for name, value in headers]
        if verb == "POST":
            lines.append(f"Content-Length: {len(data)}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8") + (data if verb == "POST" else b"")

    def check_step(self, step: Step, rng: random.Random) -> list[Finding]:
        self.marks += 1
        n = self.marks
        session = self.session_header(step.session, rng)
        live = step.session == "real" and session is not None
        raw = self.raw(step.verb, step.data, self.headers(step, rng, session))
        findings: list[Finding] = []
        try:
            findings += self._exchange(step, raw, live, rng)
        except (socket.timeout, TimeoutError):
            findings.append(Finding("hang", f"legacy HTTP: no end of the answer ({step.family} {step.verb})",
                                    repr(step.data[:200])))
        except (ConnectionError, OSError, ValueError) as exc:
            findings.append(Finding("transport", _normalise(f"legacy HTTP: {exc}"), repr(step.data[:200])))
        died = self.process is None or self.process.poll() is not None
        mark = None if died else self.roundtrip(self.request_bytes(mark_request(n), None), self.hang_timeout)[0]
        logged, _ = self.stderr.until(f"fuzz-mark {n}\n", 5.0 if mark is not None else 0.5)
        findings += stderr_findings(logged, self.fail_on_purpose)
        if mark is None or mark.status != 200:
            findings.append(Finding("crash" if died else "transport", "legacy HTTP server unusable after a step",
                                    (logged or self.stderr.tail())[-800:]))
            self.start()
        return merged(findings)

    def _exchange(self, step: Step, raw: bytes, live: bool, rng: random.Random) -> list[Finding]:
        sock = self.connect()
        buffer = bytearray()
        deadline = time.monotonic() + self.hang_timeout
        try:
            sock.sendall(raw)
            head = read_response(sock, buffer, deadline, head_only=True)
            if head is None:
                return [Finding("transport", "legacy HTTP: closed without a response", repr(step.data[:200]))]
            if step.verb != "POST":
                return self._judge_verb(step, head, live, sock, buffer, deadline)
            if head.headers.get("content-type", "").startswith("text/event-stream"):
                return self._judge_stream(step, head, live, sock, buffer, deadline, rng)
            response = self._body(head, sock, buffer, deadline)
        finally:
            sock.close()
        return self._judge_post(step, response, live)

    @staticmethod
    def _body(head: HttpResponse, sock: socket.socket, buffer: bytearray, deadline: float) -> HttpResponse:
        length = int(head.headers.get("content-length", "0") or 0)
        while len(buffer) < length:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise socket.timeout("body deadline")
            sock.settimeout(remaining)
            data = sock.recv(1 << 20)
            if not data:
                raise ConnectionError("closed inside a response body")
            buffer.extend(data)
        return head._replace(body=bytes(buffer[:length]))

    def _judge_verb(self, step: Step, head: HttpResponse, live: bool, sock: socket.socket, buffer: bytearray,
                    deadline: float) -> list[Finding]:
        """A GET (the standalone stream: its head is enough, then we hang up) or a DELETE."""
        accepts = any(kind in step.accept for kind in ("text/event-stream", "*/*"))
        if step.session == "none":
            expected = {405}  # GET and DELETE are a session's only
        elif not live:
            expected = {404}
        elif step.verb == "DELETE":
            expected = {204}
        elif not accepts:
            expected = {406}
        else:  # no id the fuzzer makes up is one the server sent: nothing to replay, and it says so
            expected = {200} if step.last_event_id is None else {400}
        if head.status in expected:
            if step.verb == "DELETE" and live and self.session is not None:
                self.ended.append(self.session)
                self.session = None
            if head.status == 200 and not head.headers.get("content-type", "").startswith("text/event-stream"):
                return [Finding("status", "legacy HTTP: a GET stream that is not text/event-stream",
                                head.headers.get("content-type", ""))]
            return []
        body = b"" if head.status == 200 else self._body(head, sock, buffer, deadline).body
        return [Finding("status", f"legacy HTTP: {step.verb} {'a live session' if live else step.session} got "
                                  f"{head.status}, not {'/'.join(map(str, sorted(expected)))}", repr(body[:300]))]

    def _judge_post(self, step: Step, response: HttpResponse, live: bool) -> list[Finding]:
        expected = fuzz_check.expect(step.data, http=True)
        modern = _is_modern(step.data)
        bad_session = step.session != "none" and not live
        if not any(kind in step.accept for kind in ("application/json", "*/*")):  # refused on its head, first
            return [] if response.status == 406 else [
                Finding("status", f"legacy HTTP: a POST not accepting JSON got {response.status}, not 406",
                        repr(response.body[:300]))]
        if bad_session and not modern:
            if response.status == 404:
                return []
            return [Finding("status", f"legacy HTTP: a {step.session} session id got {response.status}, not 404",
                            repr(response.body[:300]))]
        if live and not modern and step.version == "wrong" and response.status == 400:
            return []  # not the session's revision: 400, the body unspecified (LEGACY.md §4.5)
        answer_of_client = live and _is_client_response(step.data)
        if response.status == 202:
            if expected.answered and not answer_of_client:
                return [Finding("no-answer", "legacy HTTP: 202 for a request", repr(step.data[:200]))]
            return []
        if response.status == 400 and response.headers.get("content-type", "").startswith("text/plain"):
            if answer_of_client:
                return []  # an answer no request of this session waits for: refused, as documented
            return [Finding("status", "legacy HTTP: 400 text for a message that is not a stray answer",
                            repr(response.body[:300]))]
        if not response.headers.get("content-type", "").startswith("application/json"):
            return [Finding("status", f"legacy HTTP: {response.status} {response.headers.get('content-type', '')}",
                            repr(response.body[:300]))]
        try:
            answer = json.loads(response.body)
        except ValueError:
            return [Finding("bad-answer", "legacy HTTP: a JSON body that is not JSON", repr(response.body[:300]))]
        findings = judge_responses([expected], [answer], set())
        if step.family == "initialize" and response.status == 200 and isinstance(answer.get("result"), dict):
            session = response.headers.get("mcp-session-id")
            if session is None and step.session == "none":
                findings.append(Finding("bad-answer", "legacy HTTP: an initialize answered without Mcp-Session-Id",
                                        repr(response.body[:300])))
            elif session is not None:
                self.session, self.revision = session, str(answer["result"].get("protocolVersion"))
                self.sessions += 1
        return findings

    def _judge_stream(self, step: Step, head: HttpResponse, live: bool, sock: socket.socket, buffer: bytearray,
                      deadline: float, rng: random.Random) -> list[Finding]:
        expected = fuzz_check.expect(step.data, http=True)
        findings: list[Finding] = []
        responses: list[Any] = []
        optional: set[Any] = set()
        chunked = head.headers.get("transfer-encoding", "").lower() == "chunked"
        for message in _sse_events(sock, buffer, deadline, chunked):
            if is_response(message):
                responses.append(message)
                continue
            problem = unasked_problem(message) if isinstance(message, dict) else "a stream message is not an object"
            if problem:
                findings.append(Finding("bad-unasked", _normalise(problem), json.dumps(message)[:300]))
            elif "id" in message:
                how = rng.choice(ASK_ANSWERS)
                self.asked[how] += 1
                findings += self._answer(message, how, expected, optional)
        return findings + judge_responses([expected], responses, optional)

    def _answer(self, request: dict[str, Any], how: str, call: Expected, optional: set[Any]) -> list[Finding]:
        """Answer the server's request on another connection, as the session's client; each answer must be
        202 (it was waited for) or 400 (a wrong or unknown id)."""
        if how == "cancel" and call.id is not ABSENT:
            optional.add(call.id)
            answers = [{"jsonrpc": "2.0", "method": "notifications/cancelled",
                        "params": {"requestId": call.id, "reason": "fuzz"}}]
        else:
            answers = client_answer(request, "right" if how == "cancel" else how)
        findings = []
        for answer in answers:
            stray = answer.get("id", request["id"]) != request["id"]
            headers = [("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream"),
                       ("Mcp-Session-Id", self.session or ""), ("MCP-Protocol-Version", self.revision)]
            response, problem = self.roundtrip(self.raw("POST", fuzz_gen.to_bytes(answer), headers), self.hang_timeout)
            status = response.status if response is not None else problem
            if status != (400 if stray else 202):
                findings.append(Finding("status", f"legacy HTTP: the client's {'stray ' if stray else ''}answer to "
                                                  f"the server's request got {status}",
                                        repr(response.body[:300]) if response else problem))
        return findings


# ---------------------------------------------------------------------------------------------
# A run


def drive(driver: Any, generator: LegacyGen, seed: int, count: int, record: Any, restart_every: int = 400) -> int:
    """`count` steps through `driver`, each judged; record(index, step, findings) for each. A stdio driver's
    session is started afresh every `restart_every` steps on average (a process is one session)."""
    transport = driver.name
    for index in range(count):
        rng = random.Random(f"{seed}:{transport}:{index}")
        if transport == "legacy-stdio" and index and rng.random() < 1 / restart_every:
            driver.start()
        must = transport == "legacy-http" and driver.session is None
        step = generator.step(rng, must_initialize=must or (transport == "legacy-stdio" and not driver.initialized
                                                            and rng.random() < 0.5))
        record(index, step, driver.check_step(step, rng))
    return count
