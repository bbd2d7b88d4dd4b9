"""Messages for the fuzzer: structure-aware JSON-RPC for MCP 2026-07-28, byte-level mutations of valid
messages, HTTP headers that mirror or contradict the body, and families of long repetitive inputs.

Everything is drawn from a `random.Random` the caller seeds, and nothing iterates a set or a hash, so
one (seed, index) gives the same bytes on every Python from 3.9 on. Values that Python's json module
cannot write (1e999, 10**400 as digits, NaN, duplicate keys, nesting 100,000 deep, invalid UTF-8) are
`Raw` JSON text placed verbatim.
"""

from __future__ import annotations

import base64
import json
import os
import random
import re
from typing import Any, Callable, NamedTuple, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCHEMA_PATH = os.path.join(ROOT, "spec", "schema-2026-07-28.json")
VERSION = "2026-07-28"
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_INFO = "io.modelcontextprotocol/clientInfo"
NAMED_BY = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri",  # what Mcp-Name carries
            "tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId"}
# Methods of earlier revisions that clients still send (WIRE.md §2); not in the 2026-07-28 schema.
RETIRED_METHODS = ("initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe",
                   "notifications/initialized")
# A subscriptions/listen request stays open until cancelled, so no one-message-one-answer driver can send
# it; the server's own tests (tests/unit/test_subscriptions.py) cover it.
STREAMING_METHODS = ("subscriptions/listen",)


class Raw:
    """JSON text written as it is."""

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return f"Raw({self.text[:40]!r}{'...' if len(self.text) > 40 else ''})"


def json_kind(value: Any) -> str:
    """"an array", "an object", "a string"...: a decoded JSON value's type, for messages."""
    if value is None:
        return "null"
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "an array",
            dict: "an object"}.get(type(value), type(value).__name__)


class Message(NamedTuple):
    """One message to send: the bytes (a stdio line without its newline, or an HTTP body), the HTTP
    header lines (None: the driver mirrors the body as a conforming client would), and the family
    that made it."""

    data: bytes
    headers: Optional[list[tuple[str, str]]]
    family: str


# ---------------------------------------------------------------------------------------------
# Writing values as JSON text

_SURROGATE = re.compile("[\ud800-\udfff]")


def to_text(value: Any, rng: Optional[random.Random] = None) -> str:
    """JSON text of `value`; Raw parts verbatim. With `rng`, the style (spacing, escaping) varies."""
    raws: list[str] = []

    def placeholder(obj: Any) -> Any:
        if isinstance(obj, Raw):
            raws.append(obj.text)
            return f"\x00R{len(raws) - 1}\x00"
        if isinstance(obj, (set, frozenset, tuple)):
            return list(obj)
        raise TypeError(f"cannot write {type(obj).__name__} as JSON")

    spaced = rng is not None and rng.random() < 0.2
    text = json.JSONEncoder(separators=None if spaced else (",", ":"), ensure_ascii=spaced, allow_nan=True,
                            default=placeholder).encode(value)
    for index in range(len(raws) - 1, -1, -1):  # from the last, so R1 never matches inside R10
        text = text.replace(f'"\\u0000R{index}\\u0000"', raws[index])
    return text


def to_bytes(value: Any, rng: Optional[random.Random] = None) -> bytes:
    text = to_text(value, rng)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates (only ever inside strings): escaped, or as the invalid UTF-8 they make
        if rng is not None and rng.random() < 0.3:
            return text.encode("utf-8", "surrogatepass")
        return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text).encode("utf-8")


def duplicate_keys(pairs: list[tuple[str, Any]]) -> Raw:
    """An object that names a key twice (the last wins in Python, the first elsewhere)."""
    return Raw("{" + ",".join(json.dumps(k) + ":" + to_text(v) for k, v in pairs) + "}")


# ---------------------------------------------------------------------------------------------
# Hostile values

UNICODE_EDGES = [
    "", " ", "\x00", "\x7f", "\u0085", "\u00a0", "\u2028", "\u2029", "\ufeff", "\ufffe", "\uffff", "\ud7ff",
    "\ue000", "\U0010ffff", "\U0001f600", "e\u0301", "\u202eevil", "\u200b", "ǅ", "ß", "İ", "\u0130i",
    "東京", "\U0001d54f", "\r\n", "\t", "\\", '"', "/", "</script>", "%00", "${jndi:x}", "{{7*7}}", "\x1b[31m",
    "NaN", "Infinity", "null", "true", "-0", "1e999", "0x10", "=?base64?AAAA?=", "=?base64?", "?=",
]
LONE_SURROGATES = [Raw('"\\ud800"'), Raw('"\\udfff"'), Raw('"a\\ud83d"'), Raw('"\\ude00b"'), Raw('"\\udfff\\ud800"')]
NUMBER_TOKENS = [
    "0", "-0", "1", "-1", "0.0", "-0.0", "1.0", "1.5", "0.1", "1e999", "-1e999", "1e-999", "1E+2", "1e308", "2e308",
    "4.9e-324", "9007199254740991", "9007199254740993", "18446744073709551616", "-9223372036854775809",
    "1" + "0" * 400, "-" + "9" * 400, "1" + "0" * 4299, "1" + "0" * 4300, "0." + "0" * 400 + "1",
    "123456789012345678901234567890.5", "1e" + "9" * 30, "100000000000000000000.0",
]
BAD_TOKENS = ["NaN", "Infinity", "-Infinity", "01", "1.", ".5", "+1", "0x1F", "1e", "--1", "undefined", "'x'",
              "tru", "nul", "\"\\x41\"", "\"\\u12\"", "\"\t\"", "[1,]", "{\"a\":1,}", "{'a':1}", "[1 2]"]


def nested(depth: int, rng: random.Random, inner: str = "0") -> Raw:
    """Arrays, objects or both nested `depth` levels."""
    style = rng.randrange(3)
    if style == 0:
        return Raw("[" * depth + inner + "]" * depth)
    if style == 1:
        return Raw('{"a":' * depth + inner + "}" * depth)
    opens, closes = [], []
    for _ in range(depth):
        if rng.random() < 0.5:
            opens.append("[")
            closes.append("]")
        else:
            opens.append('{"k":')
            closes.append("}")
    return Raw("".join(opens) + inner + "".join(reversed(closes)))


def depth_near_limit(rng: random.Random) -> int:
    return rng.choice([1, 2, 8, 30, 59, 60, 61, 62, 63, 64, 65, 66, 100, 1000, 5000, 100_000])


def big_string(rng: random.Random, size: int) -> str:
    unit = rng.choice(["x", "ab", "é", "東", "😀", '"', "\\", "\n", "\x00", "a b", "\u2028", "%", "/", "-", "."])
    return (unit * (size // len(unit) + 1))[:size]


def size_choice(rng: random.Random, large: float) -> int:
    """A string length: mostly small, sometimes kilobytes, with probability `large` up to a megabyte."""
    roll = rng.random()
    if roll < large:
        return rng.choice([65_536, 100_000, 300_000, 1_000_000])
    if roll < 0.1:
        return rng.choice([1000, 4096, 10_000, 32_768])
    return rng.choice([0, 1, 2, 5, 16, 63, 64, 65, 127, 128, 200])


def hostile_string(rng: random.Random, large: float) -> Any:
    roll = rng.random()
    if roll < 0.35:
        return rng.choice(UNICODE_EDGES)
    if roll < 0.45:
        return rng.choice(LONE_SURROGATES)
    if roll < 0.75:
        return big_string(rng, size_choice(rng, large))
    return "".join(rng.choice(UNICODE_EDGES) for _ in range(rng.randrange(1, 8)))


def hostile_value(rng: random.Random, large: float = 0.002) -> Any:
    """Any JSON value, biased to the edges: types, numbers, strings, nesting, sizes."""
    roll = rng.random()
    if roll < 0.25:
        return hostile_string(rng, large)
    if roll < 0.45:
        return Raw(rng.choice(NUMBER_TOKENS))
    if roll < 0.55:
        return rng.choice([None, True, False, 0, -1, 1, 2**31, 2**53, -(2**63), 0.5, [], {}, [None], {"": None}])
    if roll < 0.62:
        return nested(depth_near_limit(rng), rng, to_text(rng.choice([0, "x", None, []])))
    if roll < 0.7:
        return duplicate_keys([("a", 1), ("a", rng.choice([2, "x", None]))])
    if roll < 0.78:
        count = size_choice(rng, large) // 4
        return [rng.choice([0, "a", None, [], {}]) for _ in range(min(count, 10_000))]
    if roll < 0.84:
        count = min(size_choice(rng, large) // 8, 5000)
        return {f"k{i}": i for i in range(count)}
    if roll < 0.92:
        return {rng.choice(UNICODE_EDGES): hostile_value(rng, large) for _ in range(rng.randrange(1, 4))}
    return [hostile_value(rng, large) for _ in range(rng.randrange(0, 4))]


# ---------------------------------------------------------------------------------------------
# Instances of a JSON Schema: the official one for envelopes and params, the tools' for arguments


class SchemaGen:
    """Generates instances of JSON Schemas: valid ones, and ones broken in one place."""

    def __init__(self, root: dict[str, Any]):
        self.root = root

    def resolve(self, ref: str, root: Any) -> Any:
        node = root
        for part in ref[2:].split("/") if ref != "#" else ():
            part = part.replace("~1", "/").replace("~0", "~")
            node = node[int(part)] if isinstance(node, list) else node[part]
        return node

    def valid(self, schema: Any, rng: random.Random, root: Any = None, depth: int = 0) -> Any:
        """A value the schema most likely accepts (patterns and formats are only approximated)."""
        root = self.root if root is None else root
        if schema is True or schema == {} or schema is None:
            return rng.choice(["x", 1, None, True, [], {}])
        if schema is False:
            return "no value is allowed"
        if depth > 12:
            return None
        if "$ref" in schema:
            return self.valid(self.resolve(schema["$ref"], root), rng, root, depth + 1)
        if "const" in schema:
            return schema["const"]
        if "enum" in schema:
            return rng.choice(schema["enum"])
        for keyword in ("oneOf", "anyOf"):
            if keyword in schema:
                return self.valid(rng.choice(schema[keyword]), rng, root, depth + 1)
        if "allOf" in schema:
            merged: dict[str, Any] = {}
            for sub in schema["allOf"]:
                sub = self.resolve(sub["$ref"], root) if isinstance(sub, dict) and "$ref" in sub else sub
                if isinstance(sub, dict):
                    merged.update(sub)
            return self.valid(merged, rng, root, depth + 1)
        kind = schema.get("type")
        if isinstance(kind, list):
            kind = rng.choice(kind)
        if kind is None:
            kind = "object" if "properties" in schema else rng.choice(["string", "integer", "object"])
        if kind == "object":
            return self._object(schema, rng, root, depth)
        if kind == "array":
            return self._array(schema, rng, root, depth)
        if kind == "string":
            return self._string(schema, rng)
        if kind == "integer":
            return self._number(schema, rng, integer=True)
        if kind == "number":
            return self._number(schema, rng, integer=False)
        if kind == "boolean":
            return rng.random() < 0.5
        return None

    def _object(self, schema: dict[str, Any], rng: random.Random, root: Any, depth: int) -> dict[str, Any]:
        properties = schema.get("properties", {})
        required = list(schema.get("required", ()))
        value = {}
        for name in properties:
            if name in required or rng.random() < 0.5:
                value[name] = self.valid(properties[name], rng, root, depth + 1)
        for name in required:
            if name not in value:
                value[name] = rng.choice(["x", 1])
        for name, needed in schema.get("dependentRequired", {}).items():
            if name in value:
                for other in needed:
                    value.setdefault(other, self.valid(properties.get(other, True), rng, root, depth + 1))
        extra = schema.get("additionalProperties", True)
        patterns = schema.get("patternProperties", {})
        if patterns and rng.random() < 0.5:
            value["KEY_" + str(rng.randrange(10))] = self.valid(next(iter(patterns.values())), rng, root, depth + 1)
        elif extra is not False and not properties and rng.random() < 0.5:
            value["key" + str(rng.randrange(100))] = self.valid(extra if isinstance(extra, dict) else True, rng,
                                                                root, depth + 1)
        return value

    def _array(self, schema: dict[str, Any], rng: random.Random, root: Any, depth: int) -> list[Any]:
        prefix = schema.get("prefixItems", [])
        items = schema.get("items", True)
        if isinstance(items, list):
            prefix, items = items, False
        low = max(schema.get("minItems", 0), len(prefix) if items is False else 0)
        high = schema.get("maxItems", low + 4)
        count = rng.randint(low, max(low, min(high, low + 4)))
        value = [self.valid(prefix[i], rng, root, depth + 1) if i < len(prefix)
                 else self.valid(items if items is not False else True, rng, root, depth + 1) for i in range(count)]
        if items is False:
            value = value[:len(prefix)]
        if "contains" in schema and not value:
            value.append(self.valid(schema["contains"], rng, root, depth + 1))
        if schema.get("uniqueItems"):
            unique: list[Any] = []
            for item in value:
                if item not in unique:
                    unique.append(item)
            value = unique
        return value

    def _string(self, schema: dict[str, Any], rng: random.Random) -> str:
        low, high = schema.get("minLength", 0), schema.get("maxLength", 24)
        if schema.get("pattern") or schema.get("format") in ("uri", "email"):
            candidates = ["abc", "a-b-c", "x1", "user@example.com", "https://example.com/a", "m1", "20:00"]
            return rng.choice([c for c in candidates if low <= len(c) <= high] or ["a" * max(low, 1)])
        length = rng.randint(low, max(low, min(high, low + 12)))
        alphabet = rng.choice(["abcdefghij", "aé東😀 ", "0123456789", "ABC-_."])
        return "".join(rng.choice(alphabet) for _ in range(length))

    def _number(self, schema: dict[str, Any], rng: random.Random, *, integer: bool) -> Any:
        low = schema.get("minimum", schema.get("exclusiveMinimum", -100))
        high = schema.get("maximum", schema.get("exclusiveMaximum", 100))
        if "exclusiveMinimum" in schema:
            low += 1
        if "exclusiveMaximum" in schema:
            high -= 1
        step = schema.get("multipleOf")
        if step:
            return step * rng.randint(int(low / step), int(high / step)) if high >= low else step
        if integer or rng.random() < 0.5:
            return rng.randint(int(min(low, high)), int(max(low, high)))
        return round(rng.uniform(low, high), 3)

    def broken(self, schema: Any, rng: random.Random, root: Any = None) -> Any:
        """A value that breaks the schema somewhere (or nearly does): a wrong type, a missing or extra
        key, a bound crossed, a hostile value in a valid place."""
        root = self.root if root is None else root
        value = self.valid(schema, rng, root)
        return self._break(value, schema, rng, root, 0)

    def _break(self, value: Any, schema: Any, rng: random.Random, root: Any, depth: int) -> Any:
        if isinstance(schema, dict) and "$ref" in schema and depth < 12:
            schema = self.resolve(schema["$ref"], root)
        if isinstance(value, dict) and value and rng.random() < 0.6 and depth < 12:
            key = rng.choice(list(value))
            properties = schema.get("properties", {}) if isinstance(schema, dict) else {}
            copy = dict(value)
            copy[key] = self._break(value[key], properties.get(key, True), rng, root, depth + 1)
            return copy
        if isinstance(value, list) and value and rng.random() < 0.5 and depth < 12:
            index = rng.randrange(len(value))
            copy = list(value)
            items = schema.get("items", True) if isinstance(schema, dict) else True
            copy[index] = self._break(value[index], items if isinstance(items, dict) else True, rng, root, depth + 1)
            return copy
        roll = rng.random()
        if isinstance(value, dict) and roll < 0.3:
            copy = dict(value)
            if copy and rng.random() < 0.5:
                del copy[rng.choice(list(copy))]
            else:
                copy[rng.choice(["extra", "", "__proto__", "_meta", "constructor"])] = hostile_value(rng)
            return copy
        if isinstance(value, list) and roll < 0.3:
            return value * rng.choice([2, 50]) if value else [hostile_value(rng)]
        if isinstance(value, (int, float)) and not isinstance(value, bool) and roll < 0.5:
            return Raw(rng.choice([*NUMBER_TOKENS, "1e999", "1" + "0" * 400, "-1e999"]))
        if isinstance(value, str) and roll < 0.4:
            return rng.choice([value * rng.choice([2, 100, 5000]), value + rng.choice(UNICODE_EDGES),
                               " " + value, value.upper(), rng.choice(LONE_SURROGATES)])
        return hostile_value(rng)


def load_schema() -> dict[str, Any]:
    with open(SCHEMA_PATH, encoding="utf-8") as file:
        loaded: dict[str, Any] = json.load(file)
    return loaded


# ---------------------------------------------------------------------------------------------
# What the target offers, read from its own definitions (what tools/list would say)


class Target(NamedTuple):
    tools: list[dict[str, Any]]  # tool definitions (name, inputSchema, ...)
    resources: list[str]
    templates: list[str]
    prompts: list[dict[str, Any]]

    @classmethod
    def of(cls, server: Any, exclude: tuple[str, ...] = ()) -> Target:
        return cls([t.definition for t in server.tools.values() if t.name not in exclude],
                   list(server.resources), [t.uri_template for t in server.resource_templates],
                   [p.definition for p in server.prompts.values()])

    def header_params(self, tool_name: Any) -> list[tuple[str, tuple[str, ...]]]:
        """(header name, argument path) of a tool's x-mcp-header annotations."""
        for tool in self.tools:
            if tool["name"] == tool_name:
                found: list[tuple[str, tuple[str, ...]]] = []
                _walk_headers(tool["inputSchema"], (), found)
                return found
        return []


def _walk_headers(node: Any, path: tuple[str, ...], found: list[tuple[str, tuple[str, ...]]]) -> None:
    for name, sub in (node.get("properties") or {}).items() if isinstance(node, dict) else ():
        if isinstance(sub, dict):
            if "x-mcp-header" in sub:
                found.append((sub["x-mcp-header"], (*path, name)))
            _walk_headers(sub, (*path, name), found)


# ---------------------------------------------------------------------------------------------
# Messages


def standard_meta(rng: random.Random) -> dict[str, Any]:
    meta: dict[str, Any] = {META_VERSION: VERSION, META_CAPABILITIES: {}}
    if rng.random() < 0.7:
        meta[META_INFO] = {"name": "fuzz", "version": "1"}
    if rng.random() < 0.1:
        meta["progressToken"] = rng.choice(["p1", 7])
    if rng.random() < 0.1:
        meta["traceparent"] = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    if rng.random() < 0.1:
        meta[META_CAPABILITIES] = rng.choice([{"sampling": {}}, {"elicitation": {}}, {"roots": {"listChanged": True}},
                                              {"experimental": {"x": {}}}])
    return meta


def broken_meta(rng: random.Random) -> Any:
    meta = standard_meta(rng)
    roll = rng.randrange(14)
    if roll == 0:
        del meta[META_VERSION]
    elif roll == 1:
        del meta[META_CAPABILITIES]
    elif roll == 2:
        meta[META_VERSION] = rng.choice(["2025-06-18", "2025-11-25", "2026-07-29", "2026-07-28 ", "", "2026-7-28",
                                         "2026-07-28\x00", "\u0032026-07-28", "DRAFT-2026-v1"])
    elif roll == 3:
        meta[META_VERSION] = hostile_value(rng)
    elif roll == 4:
        meta[META_CAPABILITIES] = hostile_value(rng)
    elif roll == 5:
        return hostile_value(rng)
    elif roll == 6:
        return None
    elif roll == 7:
        return duplicate_keys([(META_VERSION, "1999-01-01"), (META_VERSION, VERSION),
                               (META_CAPABILITIES, {})])
    elif roll == 8:
        meta[META_INFO] = hostile_value(rng)
    elif roll == 9:
        meta["progressToken"] = hostile_value(rng)
    elif roll == 10:
        for i in range(rng.choice([10, 1000, 20_000])):
            meta[f"com.example/k{i}"] = i
    elif roll == 11:
        meta[rng.choice(["io.modelcontextprotocol/logLevel", "dev.mcp/x", "com.example.mcp/y", "-bad/key", ""])] = \
            hostile_value(rng)
    elif roll == 12:
        meta[META_VERSION.upper()] = VERSION
        del meta[META_VERSION]
    else:
        meta[META_CAPABILITIES] = {"sampling": hostile_value(rng), "extensions": {"a/b": hostile_value(rng)}}
    return meta


def request_id(rng: random.Random) -> Any:
    """An id of every JSON type, valid ones most often."""
    roll = rng.random()
    if roll < 0.35:
        return rng.randrange(1_000_000)
    if roll < 0.6:
        return rng.choice(["a", "", "1", "id-" + str(rng.randrange(1000)), "東京😀", "\u2028", "\x00", "null",
                           " 1 ", "=?base64?eA==?="])
    if roll < 0.7:
        return rng.choice([0, -1, 2**53, 2**53 + 1, 2**63, -(2**64), 10**30])
    if roll < 0.75:
        return rng.choice(LONE_SURROGATES)
    if roll < 0.8:
        return big_string(rng, rng.choice([1000, 70_000]))
    return rng.choice([None, True, False, 1.5, 1.0, -0.0, Raw("1e999"), Raw("1" + "0" * 400), Raw("1E2"), [], {},
                       [1], {"id": 1}, Raw("-0"), Raw("0.0")])


class Generator:
    """Draws one message at a time; `message(rng)` is everything a driver needs."""

    FAMILIES = (
        ("valid", 25), ("spec", 12), ("arguments", 15), ("envelope", 10), ("meta", 8), ("hostile", 6),
        ("bytes", 16), ("repetitive", 3), ("notification", 5),
    )

    def __init__(self, target: Target, schema: Optional[dict[str, Any]] = None, large: float = 0.002,
                 repetitive_sizes: tuple[int, ...] = (1000, 4000, 16_000, 64_000)):
        self.target = target
        self.repetitive_sizes = repetitive_sizes
        self.schema = schema or load_schema()
        self.gen = SchemaGen(self.schema)
        self.large = large
        defs = self.schema["$defs"]
        self.requests = [name for name, d in defs.items() if name.endswith("Request")
                         and isinstance(d.get("properties", {}).get("method", {}).get("const"), str)
                         and d["properties"]["method"]["const"] not in STREAMING_METHODS]
        self.notifications = [name for name, d in defs.items() if name.endswith("Notification")
                              and isinstance(d.get("properties", {}).get("method", {}).get("const"), str)]
        self.methods = [defs[n]["properties"]["method"]["const"] for n in self.requests + self.notifications]
        self.families = [name for name, _ in self.FAMILIES]
        self.weights = [weight for _, weight in self.FAMILIES]
        self.builders: dict[str, Callable[[random.Random], Any]] = {
            "valid": self.valid_request, "spec": self.spec_message, "arguments": self.tool_call_broken,
            "envelope": self.broken_envelope, "meta": self.broken_meta_request, "hostile": self.hostile_request,
            "notification": self.notification,
        }

    # -- the pieces ------------------------------------------------------------------------------

    def envelope(self, method: str, params: Any, rng: random.Random, id: Any = None) -> dict[str, Any]:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rng.randrange(1_000_000) if id is None else id,
                                   "method": method}
        if params is not None:
            message["params"] = params
        return message

    def tool_arguments(self, tool: dict[str, Any], rng: random.Random, broken: bool) -> Any:
        schema = tool["inputSchema"]
        if broken:
            return self.gen.broken(schema, rng, root=schema)
        return self.gen.valid(schema, rng, root=schema)

    def resource_uri(self, rng: random.Random) -> Any:
        roll = rng.random()
        if roll < 0.4 and self.target.resources:
            return rng.choice(self.target.resources)
        if roll < 0.85 and self.target.templates:
            template = rng.choice(self.target.templates)
            return _fill_template(template, rng, self.large)
        return rng.choice(["", "movies://", "file:///etc/passwd", "file:///project/../../etc/passwd", "x://y",
                           "notes://readme?x=1", "notes://README", big_string(rng, 1000)])

    def valid_request(self, rng: random.Random) -> dict[str, Any]:
        method = rng.choice(["server/discover", "tools/list", "tools/call", "tools/call", "tools/call",
                             "resources/list", "resources/templates/list", "resources/read", "prompts/list",
                             "prompts/get"])
        params: dict[str, Any] = {"_meta": standard_meta(rng)}
        if method == "tools/call" and self.target.tools:
            tool = rng.choice(self.target.tools)
            params["name"] = tool["name"]
            if rng.random() < 0.9:
                params["arguments"] = self.tool_arguments(tool, rng, broken=False)
        elif method == "resources/read":
            params["uri"] = self.resource_uri(rng)
        elif method == "prompts/get" and self.target.prompts:
            prompt = rng.choice(self.target.prompts)
            params["name"] = prompt["name"]
            params["arguments"] = {a["name"]: rng.choice(["x", "", "東京", big_string(rng, size_choice(rng, 0))])
                                   for a in prompt.get("arguments", []) if a.get("required") or rng.random() < 0.5}
        elif method.endswith("/list") and rng.random() < 0.3:
            params["cursor"] = rng.choice([_cursor(rng), "", "dG9vbHM6NA==", "dG9vbHM6OTk5", "=", "%%%"])
        return self.envelope(method, params, rng, id=request_id(rng) if rng.random() < 0.2 else None)

    def spec_message(self, rng: random.Random) -> dict[str, Any]:
        """A request or notification of any method in the 2026-07-28 schema, implemented here or not."""
        name = rng.choice(self.requests + self.notifications)
        message = self.gen.valid(self.schema["$defs"][name], rng)
        if isinstance(message, dict):
            params = message.get("params")
            if isinstance(params, dict) and name.endswith("Request"):
                params["_meta"] = standard_meta(rng)
        return message

    def tool_call_broken(self, rng: random.Random) -> dict[str, Any]:
        params: dict[str, Any] = {"_meta": standard_meta(rng)}
        roll = rng.random()
        if roll < 0.75 and self.target.tools:
            tool = rng.choice(self.target.tools)
            params["name"] = tool["name"]
            params["arguments"] = self.tool_arguments(tool, rng, broken=True)
        elif roll < 0.85:
            params["name"] = rng.choice([t["name"] for t in self.target.tools] or ["echo"])
            params["arguments"] = hostile_value(rng, self.large)
        else:
            params["name"] = hostile_value(rng, self.large)
            if rng.random() < 0.5:
                params["arguments"] = {}
        if rng.random() < 0.05:
            params["requestState"] = hostile_value(rng)
        if rng.random() < 0.05:
            params["inputResponses"] = hostile_value(rng)
        return self.envelope("tools/call", params, rng)

    def broken_envelope(self, rng: random.Random) -> Any:
        message: dict[str, Any] = self.valid_request(rng)
        roll = rng.randrange(12)
        if roll == 0:
            fullwidth = "\uff12.\uff10"
            message["jsonrpc"] = rng.choice(["1.0", "2.1", 2.0, 2, None, "", "2.0 ", [], fullwidth])
        elif roll == 1:
            del message["jsonrpc"]
        elif roll == 2:
            message["id"] = request_id(rng)
        elif roll == 3:
            message["method"] = rng.choice([None, 5, [], {}, "", " tools/list", "Tools/List", "tools/list\x00",
                                            "tools/list/", "TOOLS/CALL", "tools\\list", big_string(rng, 5000),
                                            *self.methods, *RETIRED_METHODS])
        elif roll == 4:
            del message["method"]
        elif roll == 5:
            message["params"] = rng.choice([None, [], "x", 0, True, [{"_meta": {}}]])
        elif roll == 6:
            message.pop("params", None)
        elif roll == 7:
            message = {k: v for k, v in message.items() if k != "method"}
            message[rng.choice(["result", "error"])] = rng.choice([{}, None, {"code": 1, "message": "x"}])
        elif roll == 8:
            return [message] if rng.random() < 0.7 else []
        elif roll == 9:
            return rng.choice([None, 1, "x", True, Raw("1e999"), Raw('"\\ud800"')])
        elif roll == 10:
            message[rng.choice(["extra", "ID", "Method", "__proto__"])] = hostile_value(rng)
        else:
            return duplicate_keys([(k, v) for k, v in message.items()] + [("id", request_id(rng))])
        return message

    def broken_meta_request(self, rng: random.Random) -> dict[str, Any]:
        message = self.valid_request(rng)
        meta = broken_meta(rng)
        if meta is None:
            del message["params"]["_meta"]
        else:
            message["params"]["_meta"] = meta
        return message

    def hostile_request(self, rng: random.Random) -> dict[str, Any]:
        """A valid request with one value anywhere replaced by a hostile one."""
        message = self.valid_request(rng)
        return self.gen._break(message, True, rng, {}, 0)

    def notification(self, rng: random.Random) -> Any:
        method = rng.choice([self.schema["$defs"][n]["properties"]["method"]["const"] for n in self.notifications]
                            + ["notifications/cancelled", "notifications/initialized", "tools/list", "x/y"])
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        roll = rng.random()
        if roll < 0.4:
            message["params"] = {"requestId": request_id(rng), "reason": "user"}
        elif roll < 0.6:
            message["params"] = {"_meta": standard_meta(rng)}
        elif roll < 0.8:
            message["params"] = hostile_value(rng)
        return message

    # -- the whole message ---------------------------------------------------------------------------

    def message(self, rng: random.Random) -> Message:
        family = rng.choices(self.families, self.weights)[0]
        if family == "bytes":
            base = self.builders["valid" if rng.random() < 0.7 else "spec"](rng)
            data = mutate_bytes(to_bytes(base, rng), rng)
        elif family == "repetitive":
            kind = rng.choice(REPETITIVE_KINDS)
            data = repetitive(kind, rng.choice(self.repetitive_sizes))
            family = f"repetitive:{kind}"
        else:
            data = to_bytes(self.builders[family](rng), rng)
        headers = None if rng.random() < 0.6 else http_headers(data, self.target, rng)
        return Message(data, headers, family)


def _cursor(rng: random.Random) -> str:
    kind = rng.choice(["tools", "resources", "prompts", "resourceTemplates", "x"])
    offset = rng.choice(["4", "8", "0", "-1", "99999", "1e3", " 4", "4x", "9" * 5000])
    return base64.urlsafe_b64encode(f"{kind}:{offset}".encode()).decode()


def _fill_template(template: str, rng: random.Random, large: float) -> str:
    out, position = [], 0
    while True:
        start = template.find("{", position)
        if start < 0:
            out.append(template[position:])
            return "".join(out)
        end = template.find("}", start)
        out.append(template[position:start])
        out.append(rng.choice(["m1", "octo", "a/b", "txt", "2026-07-28", "x.y", "", "%2F", "..", "東京",
                               big_string(rng, size_choice(rng, large))]))
        position = end + 1


# ---------------------------------------------------------------------------------------------
# Byte-level mutation

_SPECIAL_BYTES = [b'"', b"\\", b"[", b"]", b"{", b"}", b",", b":", b"\x00", b"\xff", b"\xc0\x80", b"\xed\xa0\x80",
                  b"\xf4\x90\x80\x80", b"\xe2\x80\xa8", b"\n", b"\r", b"\r\n", b" ", b"\t", b"\xef\xbb\xbf", b"1e999",
                  b"NaN", b"-", b"0", b'\\u', b'\\ud800', b"null", b"true"]


def mutate_bytes(data: bytes, rng: random.Random) -> bytes:
    """1 to 6 random edits: flip, delete, insert, duplicate, truncate, splice special tokens."""
    buf = bytearray(data)
    for _ in range(rng.choice([1, 1, 2, 3, 6])):
        if not buf:
            buf += rng.choice(_SPECIAL_BYTES)
            continue
        at = rng.randrange(len(buf))
        roll = rng.randrange(9)
        if roll == 0:
            buf[at] ^= 1 << rng.randrange(8)
        elif roll == 1:
            del buf[at:at + rng.choice([1, 1, 2, 8, 64])]
        elif roll == 2:
            buf[at:at] = rng.choice(_SPECIAL_BYTES)
        elif roll == 3:
            end = min(len(buf), at + rng.choice([1, 4, 16, 256]))
            buf[at:at] = buf[at:end] * rng.choice([1, 2, 100])
        elif roll == 4:
            del buf[at:]
        elif roll == 5:
            buf[at] = rng.randrange(256)
        elif roll == 6:
            buf[at:at] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 8)))
        elif roll == 7:  # an opening bracket run: past the depth pre-check's fast path
            buf[at:at] = rng.choice([b"[", b"{", b'{"a":', b'["']) * rng.choice([2, 65, 200])
        else:
            digits = [i for i, b in enumerate(buf) if 0x30 <= b <= 0x39]
            if digits:
                i = rng.choice(digits)
                buf[i:i + 1] = rng.choice([b"1e999", b"1" + b"0" * 400, b"-0", b"9" * 4301, b"0.5"])
    return bytes(buf)


# ---------------------------------------------------------------------------------------------
# Long repetitive inputs: the shapes that make regexes, validators and buffers super-linear.
# Each family builds a message of about `size` bytes from a repeated unit; the scaling check runs
# each at doubling sizes and compares the time with a linear reference measured alongside.

REPETITIVE_KINDS = (
    "unclosed_string_escapes", "unclosed_string_quotes", "brackets_then_string", "many_strings",
    "unique_strings", "unique_rows", "duplicate_strings", "contains_bag", "many_properties", "pattern_slug",
    "template_reserved", "template_adjacent", "template_repo", "long_method", "long_tool_name", "many_meta",
    "number_digits", "whitespace", "escapes_in_string", "prompt_arguments", "cursor", "header_param",
    "stdout_progress", "deep_then_garbage",
)


def _tool_call(name: str, arguments: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"_meta": {META_VERSION: VERSION, META_CAPABILITIES: {}}, "name": name, "arguments": arguments}}


def _request(method: str, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method,
            "params": {"_meta": {META_VERSION: VERSION, META_CAPABILITIES: {}}, **params}}


def repetitive(kind: str, size: int) -> bytes:
    """A message of about `size` bytes of the named repetitive shape."""
    n = max(1, size)
    if kind == "unclosed_string_escapes":
        return ("[" * 65 + '"' + '\\"' * (n // 2)).encode()
    if kind == "unclosed_string_quotes":
        return ("[" * 65 + '"a' + '\\"a' * (n // 3)).encode()
    if kind == "brackets_then_string":
        return ('{"a":' * 40 + "[" * 30 + '"' + "x" * n).encode()
    if kind == "many_strings":
        return ("[" * 65 + '"",' * (n // 3)).encode()
    if kind == "deep_then_garbage":
        return ("[" * (n // 2) + '"' * (n // 2)).encode()
    if kind == "unique_strings":
        return to_bytes(_tool_call("keywords", {"amount": 1, "tags": [f"t{i}" for i in range(n // 8)]}))
    if kind == "duplicate_strings":
        return to_bytes(_tool_call("derived", {"tags": ["same"] * (n // 7), "scores": [], "pair": [1, "a"],
                                               "counts": {}, "choice": "a"}))
    if kind == "unique_rows":
        return to_bytes(_tool_call("keywords", {"amount": 1, "rows": [[i, i + 1] for i in range(n // 12)]}))
    if kind == "contains_bag":
        return to_bytes(_tool_call("keywords", {"amount": 1, "bag": ["x"] * (n // 4) + [1]}))
    if kind == "many_properties":
        return to_bytes(_tool_call("keywords", {"amount": 1, "labels": {f"k{i}": "v" for i in range(n // 10)}}))
    if kind == "pattern_slug":
        return to_bytes(_tool_call("keywords", {"amount": 1, "slug": "a-" * (n // 2) + "!"}))
    if kind == "template_reserved":
        return to_bytes(_request("resources/read", uri="file:///" + "." * n + "/"))
    if kind == "template_adjacent":
        return to_bytes(_request("resources/read", uri="weather://" + "-" * n + "/"))
    if kind == "template_repo":
        return to_bytes(_request("resources/read", uri="repo://" + "/" * n + "x"))
    if kind == "long_method":
        return to_bytes({"jsonrpc": "2.0", "id": 1, "method": "tools/" * (n // 6), "params": {}})
    if kind == "long_tool_name":
        return to_bytes(_tool_call("x" * n, {}))
    if kind == "many_meta":
        meta = {META_VERSION: VERSION, META_CAPABILITIES: {}}
        meta.update({f"com.example/k{i}": i for i in range(n // 20)})
        return to_bytes({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}})
    if kind == "number_digits":
        return to_bytes(_tool_call("add", {"a": Raw("1" * min(n, 4300)), "b": Raw("0." + "5" * n)}))
    if kind == "whitespace":
        return (" " * (n // 2) + to_text(_request("tools/list")) + "\t" * (n // 2)).encode()
    if kind == "escapes_in_string":
        return to_bytes(_tool_call("echo", {"text": Raw('"' + "\\u00e9\\n" * (n // 8) + '"')}))
    if kind == "prompt_arguments":
        return to_bytes(_request("prompts/get", name="summarise",
                                 arguments={"text": "x", **{f"a{i}": "v" for i in range(n // 10)}}))
    if kind == "cursor":
        return to_bytes(_request("tools/list", cursor="A" * n))
    if kind == "header_param":
        return to_bytes(_tool_call("mirrored", {"region": "r", "note": "n" * n}))
    if kind == "stdout_progress":
        return to_bytes(_tool_call("prints", {"text": "#" * n, "chunk": 8}))
    raise ValueError(f"unknown repetitive kind {kind!r}")


# ---------------------------------------------------------------------------------------------
# HTTP headers


def encode_header_value(value: str) -> str:
    """As a 2026-07-28 client sends Mcp-Name and Mcp-Param-*: plain when safe, else =?base64?...?=."""
    if value.isascii() and value.isprintable() and value == value.strip() and not (
            value.startswith("=?base64?") and value.endswith("?=")):
        return value
    return "=?base64?" + base64.b64encode(value.encode("utf-8", "surrogatepass")).decode() + "?="


def mirrored_headers(message: Any, target: Target) -> list[tuple[str, str]]:
    """The headers a conforming client sends with `message` (a decoded body)."""
    headers = [("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream")]
    if not isinstance(message, dict) or "id" not in message:
        return headers
    params = message.get("params") if isinstance(message.get("params"), dict) else {}
    meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
    version = meta.get(META_VERSION)
    headers.append(("MCP-Protocol-Version", version if isinstance(version, str) else VERSION))
    method = message.get("method")
    if isinstance(method, str):
        headers.append(("Mcp-Method", method))
    field = NAMED_BY.get(method) if isinstance(method, str) else None
    if field is not None and isinstance(params.get(field), str):
        headers.append(("Mcp-Name", encode_header_value(params[field])))
    if method == "tools/call":
        arguments = params.get("arguments")
        for name, path in target.header_params(params.get("name")):
            value: Any = arguments
            for key in path:
                value = value.get(key) if isinstance(value, dict) else None
            if value is None:
                continue
            text = ("true" if value else "false") if isinstance(value, bool) else \
                str(value) if isinstance(value, (int, float)) else value if isinstance(value, str) else None
            if text is not None:
                headers.append(("Mcp-Param-" + name, encode_header_value(text)))
    return headers


def _latin1_safe(value: str) -> str:
    return value.encode("utf-8", "surrogatepass").decode("latin-1")


def http_headers(data: bytes, target: Target, rng: random.Random) -> list[tuple[str, str]]:
    """Headers that mirror the body (as parsed, where it parses) and then, mostly, contradict it."""
    try:
        message = json.loads(data)
    except (ValueError, RecursionError):
        message = None
    headers = mirrored_headers(message, target)
    for _ in range(rng.choice([0, 1, 1, 2, 3])):
        headers = _contradict(headers, rng)
    return headers


def _contradict(headers: list[tuple[str, str]], rng: random.Random) -> list[tuple[str, str]]:
    headers = list(headers)
    names = [name for name, _ in headers]
    roll = rng.randrange(16)
    if roll == 0 and headers:
        del headers[rng.randrange(len(headers))]
    elif roll == 1 and headers:
        i = rng.randrange(len(headers))
        name, value = headers[i]
        headers[i] = (name, rng.choice([value.upper(), value.lower(), " " + value + " ", value + "x", value[:-1],
                                        "", value + "\t", value + ",", _latin1_safe(value + "é")]))
    elif roll == 2 and headers:
        i = rng.randrange(len(headers))
        headers.insert(i, (headers[i][0], rng.choice(["2025-06-18", "tools/list", "other", headers[i][1]])))
    elif roll == 3:
        headers = [(name.replace("-", "_") if rng.random() < 0.5 else name, value) for name, value in headers]
    elif roll == 4:
        headers = [(name.lower() if rng.random() < 0.5 else name.upper(), value) for name, value in headers]
    elif roll == 5:
        headers.append((rng.choice(["Mcp-Name", "Mcp-Param-Region", "Mcp-Param-Count", "Mcp-Param-Flag",
                                    "Mcp-Param-Zone", "Mcp-Param-Unknown"]),
                        rng.choice(["=?base64?" + base64.b64encode(b"echo").decode() + "?=", "=?base64?!!!?=",
                                    "=?base64??=", "=?base64?/w==?=", "=?BASE64?ZWNobw==?=", "42", "42.0", "true",
                                    "TRUE", "r", "=?base64?" + "A" * 4000 + "?="])))
    elif roll == 6:
        headers = [(n, v) for n, v in headers if n.lower() != "content-type"]
        headers.append(("Content-Type", rng.choice(["application/json; charset=utf-8", "text/plain",
                                                     "application/json;charset=latin-1", "APPLICATION/JSON",
                                                     "application/jsonx", "", "application/json, text/plain",
                                                     "multipart/form-data; boundary=x"])))
    elif roll == 7:
        headers = [(n, v) for n, v in headers if n.lower() != "accept"]
        headers.append(("Accept", rng.choice(["text/event-stream", "*/*", "application/*", "text/html", "",
                                              "application/json;q=0", "image/png, */*;q=0.1"])))
    elif roll == 8:
        headers.append(("Origin", rng.choice(["http://localhost:3000", "http://127.0.0.1", "https://evil.example",
                                              "null", "http://[::1]:8080", "http://localhost.evil.example", ""])))
    elif roll == 9:
        headers.append(("Host", rng.choice(["evil.example", "localhost", "127.0.0.1:1", "[::1]", "", "LOCALHOST"])))
    elif roll == 10:
        headers.append(("Mcp-Session-Id", "abc"))
        headers.append(("Last-Event-ID", "7"))
    elif roll == 11:
        headers.append(("X-Long", "x" * rng.choice([100, 8000, 40_000])))
    elif roll == 12:
        headers.append(("Authorization", rng.choice(["Bearer x", "Basic eDp4", "Bearer", ""])))
    elif roll == 13:
        for i in range(rng.choice([10, 60, 99])):
            headers.append((f"X-Many-{i}", "v"))
    elif roll == 14 and names:
        i = rng.randrange(len(headers))
        headers[i] = (headers[i][0], _latin1_safe(rng.choice(UNICODE_EDGES[:30])) or "\x01")
    else:
        headers.append(("Mcp-Method", rng.choice(["tools/call", "Tools/Call", "server/discover"])))
    return headers
