"""What a correct answer to a fuzzed message looks like, decided without asking the server.

The oracle reads the message as JSON-RPC 2.0 and WIRE.md say a server must: a notification (a message
with a string method and no id; a malformed one is ignored, WIRE.md §8) or, on stdio, a client's
response gets no answer; anything else gets exactly one, carrying the request's
id when the id can be read and is valid (a string or an integer), and no id otherwise. Each answer
is then checked as a JSON-RPC response (and, for a sample, against the official 2026-07-28 schema).
"""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple, Optional

from mcpserver._json import MAX_JSON_DEPTH

# Error codes a 2026-07-28 server may send (WIRE.md §7.1); -32603 is allowed on the wire but is always a
# server fault, so the fuzzer reports it.
KNOWN_CODES = {-32700, -32600, -32601, -32602, -32603, -32020, -32021, -32022}
# HTTP status each code must travel with (WIRE.md §16.9); -32602 is 400 for _meta problems, else 200.
STATUS_OF_CODE = {-32700: (400,), -32600: (400,), -32601: (404,), -32602: (200, 400), -32603: (200, 500),
                  -32020: (400,), -32021: (400,), -32022: (400,)}
RESULT_OF = {
    "server/discover": "DiscoverResult", "tools/list": "ListToolsResult", "tools/call": "CallToolResult",
    "resources/list": "ListResourcesResult", "resources/templates/list": "ListResourceTemplatesResult",
    "resources/read": "ReadResourceResult", "prompts/list": "ListPromptsResult", "prompts/get": "GetPromptResult",
}
ERROR_OF = {-32700: "ParseError", -32600: "InvalidRequestError", -32601: "MethodNotFoundError",
            -32602: "InvalidParamsError", -32603: "InternalError"}
RESPONSE_ERROR_OF = {-32020: "HeaderMismatchError", -32022: "UnsupportedProtocolVersionError",
                     -32021: "MissingRequiredClientCapabilityError"}

ABSENT = object()  # "the answer must carry no id"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):  # 1e999 parses to infinity, which no answer could carry
        raise ValueError("number out of range")
    return value


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > 4300:  # what Pythons from 3.11 refuse anyway (int parsing is quadratic)
        raise ValueError("integer too long")
    return int(text)


_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite, parse_int=_bounded_int)
_CLOSED_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)  # linear here: only run on text that parsed
_BRACKET = re.compile(r"[\[\]{}]")


class Expected(NamedTuple):
    answered: bool
    id: Any  # the id the answer must carry, or ABSENT
    method: Optional[str]  # when the message is a request with a string method
    notification: bool
    progress_token: Any = None  # a request's _meta.progressToken (a string or an integer), else None


def decode(data: bytes) -> tuple[bool, Any]:
    """(parsed, value): the message as the server must read it, or (False, None) when it is not JSON
    the server accepts (bad UTF-8, bad JSON, NaN/Infinity, a number beyond a double's range, an integer
    of more than 4,300 digits, a BOM, nesting past the limit)."""
    try:
        text = data.decode("utf-8")
        if text.startswith("\ufeff"):
            return False, None
        value = _DECODER.decode(text)
    except (ValueError, RecursionError):
        return False, None
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH and _depth(text) > MAX_JSON_DEPTH:
        return False, None
    return True, value


def _depth(text: str) -> int:
    depth = deepest = 0
    for bracket in _BRACKET.findall(_CLOSED_STRING.sub("", text)):
        if bracket in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def expect(data: bytes, http: bool) -> Expected:
    parsed, message = decode(data)
    if not parsed or not isinstance(message, dict):
        return Expected(True, ABSENT, None, False)
    raw_id = message.get("id", ABSENT)
    valid_id = raw_id if type(raw_id) in (str, int) else ABSENT
    if message.get("jsonrpc") != "2.0":
        return Expected(True, valid_id, None, False)
    if "method" not in message:
        if ("result" in message or "error" in message) and "id" in message:
            return Expected(http, valid_id, None, False)  # a client's response: ignored on stdio, refused over HTTP
        return Expected(True, valid_id, None, False)
    method = message["method"]
    if not isinstance(method, str):
        return Expected(True, valid_id, None, False)
    if "id" not in message:  # a notification, well-formed or not, is never answered
        return Expected(False, ABSENT, method, True)
    params = message.get("params", {})
    meta = params.get("_meta") if isinstance(params, dict) else None
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    return Expected(True, valid_id, method, False, token if type(token) in (str, int) else None)


def check_notifications(notifications: list[Any], expected: list[Expected]) -> Optional[str]:
    """Server notifications sent while handling the messages: only notifications/progress, only for a
    request that asked for it with a progressToken, its progress increasing (WIRE.md §8)."""
    tokens = [e.progress_token for e in expected if e.answered and e.progress_token is not None]
    last: dict[Any, float] = {}
    for note in notifications:
        if not isinstance(note, dict) or note.get("jsonrpc") != "2.0" or "id" in note:
            return f"malformed notification {str(note)[:200]}"
        if note.get("method") != "notifications/progress":
            return f"unexpected notification {note.get('method')!r}"
        params = note.get("params")
        token = params.get("progressToken") if isinstance(params, dict) else None
        if not any(type(token) is type(t) and token == t for t in tokens):
            return f"progress for token {token!r}, which no request here asked for"
        progress = params.get("progress")
        if isinstance(progress, bool) or not isinstance(progress, (int, float)):
            return f"progress value {progress!r} is not a number"
        key = (type(token), token)
        if key in last and not progress > last[key]:
            return f"progress went from {last[key]} to {progress}"
        last[key] = progress
    return None


def stdio_segments(line: bytes) -> list[bytes]:
    """What a stdio server reads from one written line: a message per newline, trailing CR dropped, blank
    lines (ASCII whitespace only) skipped."""
    out = []
    for segment in line.split(b"\n"):
        if segment.endswith(b"\r"):
            segment = segment[:-1]
        if segment.strip():
            out.append(segment)
    return out


def check_response(response: Any, expected: Expected) -> Optional[str]:
    """None when `response` is a valid JSON-RPC answer to the message; else what is wrong."""
    if not isinstance(response, dict):
        return f"answer is not a JSON object: {type(response).__name__}"
    if response.get("jsonrpc") != "2.0":
        return 'answer lacks "jsonrpc": "2.0"'
    if expected.id is ABSENT:
        if "id" in response:
            return f"answer carries id {response['id']!r} but the message had no readable id"
    elif "id" not in response:
        return f"answer lacks the request's id {expected.id!r}"
    elif type(response["id"]) is not type(expected.id) or response["id"] != expected.id:
        return f"answer carries id {response['id']!r}, not the request's {expected.id!r}"
    if ("result" in response) == ("error" in response):
        return "answer has neither or both of result and error"
    extra = set(response) - {"jsonrpc", "id", "result", "error"}
    if extra:
        return f"answer has unexpected members {sorted(extra)}"
    if "error" in response:
        error = response["error"]
        if not (isinstance(error, dict) and type(error.get("code")) is int and isinstance(error.get("message"), str)):
            return f"malformed error object {error!r:.200}"
        if error["code"] not in KNOWN_CODES:
            return f"error code {error['code']} is not one a 2026-07-28 server sends"
        if error["code"] == -32603:
            return f"internal error (-32603): {error['message']!r:.200}"
        return None
    result = response["result"]
    if not isinstance(result, dict) or result.get("resultType") != "complete":
        return "result is not an object with resultType \"complete\""
    return None


def check_status(status: int, response: Optional[dict[str, Any]]) -> Optional[str]:
    """The HTTP status fits the JSON-RPC answer (WIRE.md §16.9)."""
    if response is None:
        return None if status == 202 else f"status {status} without a JSON-RPC body"
    if "result" in response:
        return None if status == 200 else f"status {status} for a result"
    code = response.get("error", {}).get("code")
    allowed = STATUS_OF_CODE.get(code, ())
    if status not in allowed:
        return f"status {status} for error {code} (expected {' or '.join(map(str, allowed))})"
    return None


class SchemaCheck:
    """Validation against the vendored official schema, one cached validator per definition."""

    def __init__(self, schema: dict[str, Any]):
        import jsonschema  # the test extra's; only needed for the sample

        self._jsonschema = jsonschema
        self.schema = schema
        self._validators: dict[str, Any] = {}

    def _validator(self, definition: str) -> Any:
        validator = self._validators.get(definition)
        if validator is None:
            wrapped = {"$schema": self.schema["$schema"], "$defs": self.schema["$defs"],
                       "$ref": f"#/$defs/{definition}"}
            validator = self._validators[definition] = self._jsonschema.Draft202012Validator(wrapped)
        return validator

    def problem(self, response: dict[str, Any], method: Optional[str]) -> Optional[str]:
        """None when the answer conforms: as a JSON-RPC message and as its method's result or error."""
        checks = [("JSONRPCMessage", response)]
        if "result" in response:
            checks.append(("JSONRPCResultResponse", response))
            if method in RESULT_OF:
                checks.append((RESULT_OF[method], response["result"]))
        else:
            checks.append(("JSONRPCErrorResponse", response))
            code = response["error"]["code"]
            if code in RESPONSE_ERROR_OF:
                checks.append((RESPONSE_ERROR_OF[code], response))
            elif code in ERROR_OF:
                checks.append((ERROR_OF[code], response["error"]))
        for definition, instance in checks:
            error = self._jsonschema.exceptions.best_match(self._validator(definition).iter_errors(instance))
            if error is not None:
                where = "/".join(str(p) for p in error.absolute_path)
                return f"not a valid {definition} at /{where}: {error.message[:200]}"
        return None
