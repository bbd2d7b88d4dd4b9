"""The server the fuzzer attacks: every example's tools, resources and prompts with their real schemas,
plus what the examples do not reach.

- Every assertion keyword the validator supports, in one tool's inputSchema and in an outputSchema;
  signatures that derive uniqueItems, prefixItems, enums and nullables.
- x-mcp-header arguments, so HTTP Mcp-Param-* headers have something to mirror or contradict.
- Command tools whose output the request controls (`json_cat` prints its argument and parses it as
  JSON, `argv_echo` renders placeholders into argv).
- Tools that misbehave the ways real tools do: raise anything (BaseException included), return values
  JSON cannot carry, print to stdout without newlines, read the protocol's stdin.
- Resource templates with reserved (`{+var}`) and adjacent expansions, the shapes whose matching can
  backtrack.
- A tool that reports progress, so notifications travel on stdio and as SSE over HTTP.
- A small page size, so cursors are handed out and can be forged.

`mark` is the fuzzer's own tool: it writes a line to stderr, so everything the server logged for
the message before it is known to be on stderr when its answer arrives.
"""

import asyncio
import enum
import os
import subprocess
import sys
from typing import Any, Literal, Optional

from mcpserver import Context, Server, ToolError, ToolResult, content
from mcpserver._loader import load_target

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
EXAMPLES = os.path.join(ROOT, "server", "examples")

# Tools the generator never calls in-process (they touch the process's own stdin or stderr), and the
# ones it never calls at all (the fuzzer's sentinel).
TOUCHES_PROCESS = ("reads_stdin", "spawns_child")
NOT_FUZZED = ("mark", "asks_client")
# Tools that fail on purpose: their tracebacks in the log are expected, not findings.
FAIL_ON_PURPOSE = ("raises", "returns")

server = Server("fuzz", "1.0.0", title="Fuzz target", instructions="Everything the examples offer, and worse.",
                page_size=4)


def _include(other: Server) -> None:
    for tool in other.tools.values():
        if tool.name not in server.tools:
            server.add_tool(tool)
    server.resources = {**other.resources, **server.resources}
    server.resource_templates = (*server.resource_templates, *other.resource_templates)
    server.prompts = {**other.prompts, **server.prompts}


for _example in ("demo.py", "movies.py", "git.json"):
    _include(load_target(os.path.join(EXAMPLES, _example)))
_include(load_target(os.path.join(ROOT, "tests", "conformance", "spec_fixtures.py")))


# ---------------------------------------------------------------------------------------------
# Every assertion keyword of the validator

KEYWORDS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "amount": {"type": "number", "minimum": -1e6, "maximum": 1e6, "multipleOf": 0.01},
        "count": {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 1000, "multipleOf": 7},
        "slug": {"type": "string", "pattern": "^[a-z0-9]+(?:-[a-z0-9]+)*$", "minLength": 1, "maxLength": 64},
        "email": {"type": "string", "format": "email", "maxLength": 254},
        "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        "rows": {"type": "array", "items": {"type": "array", "items": {"type": "number"}}, "uniqueItems": True,
                 "maxItems": 100},
        "point": {"type": "array", "prefixItems": [{"type": "number"}, {"type": "number"}], "items": False},
        "labels": {"type": "object", "propertyNames": {"pattern": "^[a-z_]+$", "maxLength": 32},
                   "additionalProperties": {"type": "string"}, "maxProperties": 20},
        "env": {"type": "object", "patternProperties": {"^[A-Z_][A-Z0-9_]*$": {"type": "string"}},
                "additionalProperties": False, "minProperties": 1},
        "payment": {"type": "object",
                    "properties": {"card": {"type": "string"}, "billing": {"type": "string"}},
                    "dependentRequired": {"card": ["billing"]},
                    "dependentSchemas": {"billing": {"properties": {"billing": {"minLength": 5}}}}},
        "shape": {"oneOf": [{"$ref": "#/$defs/circle"}, {"$ref": "#/$defs/square"}]},
        "tree": {"$ref": "#/$defs/node"},
        "either": {"anyOf": [{"type": "string", "maxLength": 8}, {"type": "integer"}]},
        "natural": {"allOf": [{"type": "integer"}, {"minimum": 0}]},
        "present": {"not": {"type": "null"}},
        "unit": {"if": {"type": "string"}, "then": {"enum": ["cm", "in"]}, "else": {"type": "number"}},
        "bag": {"type": "array", "contains": {"type": "integer"}, "minContains": 1, "maxContains": 3},
        "mode": {"enum": ["fast", "slow", 1, None, {"a": [1, 2]}]},
        "version": {"const": "v1"},
        "pair": {"type": "array", "items": [{"type": "string"}, {"type": "boolean"}]},
    },
    "$defs": {
        "circle": {"type": "object", "properties": {"radius": {"type": "number", "minimum": 0}},
                   "required": ["radius"], "additionalProperties": False},
        "square": {"type": "object", "properties": {"side": {"type": "number", "minimum": 0}},
                   "required": ["side"], "additionalProperties": False},
        "node": {"type": "object", "properties": {"value": {"type": "integer"},
                                                  "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
                 "required": ["value"]},
    },
    "required": ["amount"],
    "additionalProperties": False,
}


@server.tool(input_schema=KEYWORDS_SCHEMA, annotations={"readOnlyHint": True})
def keywords(**arguments: Any) -> dict:
    """Accepts what the schema accepts; returns the names it got."""
    return {"received": sorted(arguments)}


class Colour(enum.Enum):
    RED = "red"
    GREEN = "green"


@server.tool()
def derived(tags: set[str], scores: list[float], pair: tuple[int, str], counts: dict[str, int],
            choice: Literal["a", "b", 3], colour: Colour = Colour.RED, maybe: Optional[int] = None,
            rows: Optional[list[dict[str, Any]]] = None, frozen: frozenset[int] = frozenset()) -> dict:
    """Schemas derived from a signature: sets, tuples, mappings, literals, enums, optionals."""
    return {"tags": len(tags), "scores": len(scores), "colour": colour.value, "maybe": maybe}


SHAPED_OUTPUT: dict[str, Any] = {
    "type": "object",
    "properties": {"value": {"type": ["string", "number", "array", "object", "boolean", "null"]},
                   "size": {"type": "integer", "minimum": 0}},
    "required": ["value", "size"],
    "additionalProperties": False,
}


@server.tool(output_schema=SHAPED_OUTPUT)
def shaped(value: Any = None, size: int = 0) -> dict:
    """Returns its arguments as structured content, checked against an outputSchema (size may break it)."""
    return {"value": value, "size": size}


MIRRORED_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "x-mcp-header": "Region", "maxLength": 64},
        "count": {"type": "integer", "x-mcp-header": "Count"},
        "flag": {"type": "boolean", "x-mcp-header": "Flag"},
        "where": {"type": "object", "properties": {"zone": {"type": "string", "x-mcp-header": "Zone"}}},
        "note": {"type": "string"},
    },
    "required": ["region"],
}


@server.tool(input_schema=MIRRORED_SCHEMA)
def mirrored(**arguments: Any) -> str:
    """Arguments an HTTP client mirrors into Mcp-Param-* headers."""
    return ",".join(f"{k}={arguments[k]!r}" for k in sorted(arguments))


# ---------------------------------------------------------------------------------------------
# Command tools whose output the request controls

server.command("json_cat", ["cat"], input_schema={"type": "object", "properties": {"text": {"type": "string"}},
                                                  "required": ["text"]},
               stdin={"argument": "text"}, output="json", timeout=10,
               description="Prints `text`; the server parses what it printed as JSON.")
server.command("argv_echo", ["printf", "%s|%s|%s|%s\\n", "{word}", "{n}", "{x}", "{flag}"],
               input_schema={"type": "object", "properties": {
                   "word": {"type": "string", "maxLength": 64}, "n": {"type": "integer"},
                   "x": {"type": "number"}, "flag": {"type": "boolean"}},
                   "required": ["word", "n", "x", "flag"]},
               stdin="none", timeout=10, description="Renders its arguments into argv.")


# ---------------------------------------------------------------------------------------------
# Tools that misbehave the ways real tools do

_RAISABLE = {
    "ValueError": lambda: ValueError("bad value"),
    "ToolError": lambda: ToolError("reported failure"),
    "RecursionError": lambda: RecursionError("deep"),
    "MemoryError": lambda: MemoryError(),
    "UnicodeError": lambda: UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"),
    "SystemExit": lambda: SystemExit(3),
    "KeyboardInterrupt": lambda: KeyboardInterrupt(),
    "CancelledError": lambda: asyncio.CancelledError(),
    "GeneratorExit": lambda: GeneratorExit(),
    "StopIteration": lambda: StopIteration(),
}


@server.tool()
def raises(kind: Literal[tuple(_RAISABLE)]) -> str:  # type: ignore[valid-type]
    """Raises the exception named."""
    raise _RAISABLE[kind]()


def _deep(levels: int) -> Any:
    value: Any = []
    for _ in range(levels):
        value = [value]
    return value


_RETURNABLE = {
    "nan": lambda: float("nan"),
    "inf": lambda: {"x": float("inf")},
    "huge_int": lambda: 10 ** 5000,
    "lone_surrogate": lambda: "a\ud800b",
    "surrogate_key": lambda: {"\udfff": 1},
    "deep": lambda: _deep(100_000),
    "set": lambda: {1, 2},
    "bytes": lambda: b"\x00\xff",
    "object": lambda: object(),
    "tuple_key": lambda: {(1, 2): "x"},
    "int_key": lambda: {1: "x"},
    "generator": lambda: (i for i in range(3)),
    "bad_blocks": lambda: [content.text("ok"), {"type": "text"}],
    "empty_result": lambda: ToolResult(),
    "error_result": lambda: ToolResult(content=[content.text("failed")], is_error=True),
    "structured_nan": lambda: ToolResult(structured={"v": float("nan")}),
    "none": lambda: None,
}


@server.tool()
def returns(kind: Literal[tuple(_RETURNABLE)]) -> Any:  # type: ignore[valid-type]
    """Returns a value of the kind named, JSON-friendly or not."""
    return _RETURNABLE[kind]()


@server.tool()
def prints(text: str = "", chunk: int = 10, newline: bool = False) -> str:
    """Writes `text` to stdout in `chunk`-character pieces, like a progress bar (no newline unless asked)."""
    step = max(1, chunk)
    for start in range(0, len(text), step):
        print(text[start:start + step], end="\n" if newline else "")
    return f"printed {len(text)} characters"


@server.tool()
def reads_stdin() -> str:
    """Reads a line from the process's stdin, as a careless tool might."""
    return repr(sys.stdin.readline(100))


@server.tool()
def spawns_child() -> str:
    """Starts a child that reads its inherited stdin for a moment (no stdin=DEVNULL)."""
    try:
        done = subprocess.run(["head", "-c", "1"], capture_output=True, timeout=0.5)
    except subprocess.TimeoutExpired:
        return "the child saw nothing"
    return f"the child read {done.stdout!r}"


@server.tool()
def progress_steps(steps: int = 3, ctx: Context = None) -> str:  # type: ignore[assignment]
    """Reports progress `steps` times (at most 200), when the request asked for it with a progressToken."""
    for step in range(1, max(0, min(steps, 200)) + 1):
        ctx.progress(step, steps, f"step {step}")
    return f"{steps} steps"


@server.tool()
def asks_client(kind: Literal["elicit", "sample", "roots"] = "elicit", ctx: Context = None) -> str:  # type: ignore[assignment]
    """Asks the client (in a legacy session, a request of the server's own) and says what came back. Only the
    legacy streams call it: a 2026-07-28 call of it is input_required, not the complete result they judge."""
    if kind == "elicit":
        answer: Any = ctx.elicit("Go on?", {"type": "object", "properties": {"ok": {"type": "boolean"}}})
    elif kind == "sample":
        answer = ctx.sample([{"role": "user", "content": {"type": "text", "text": "hi"}}], 10)
    else:
        answer = ctx.roots()
    return repr(answer)[:200]


@server.tool()
def mark(n: int) -> str:
    """The fuzzer's sentinel: writes a numbered line to stderr."""
    sys.stderr.write(f"fuzz-mark {n}\n")
    sys.stderr.flush()
    return str(n)


# ---------------------------------------------------------------------------------------------
# Resources and templates


@server.resource("notes://readme", name="readme", mime_type="text/plain")
def readme() -> str:
    return "read me"


@server.resource_template("file:///{+path}.{ext}", name="file-with-extension")
def file_with_extension(path: str, ext: str) -> Optional[str]:
    return f"{path} ({ext})" if ext in ("txt", "md") else None


@server.resource_template("repo://{+owner}/{+name}/{+path}.json", name="repo-file")
def repo_file(owner: str, name: str, path: str) -> Optional[str]:
    return f"{owner}/{name}: {path}" if owner == "octo" else None


@server.resource_template("weather://{city}-{date}", name="forecast")
def forecast(city: str, date: str) -> Optional[str]:
    return f"sunny in {city} on {date}" if len(date) == 10 else None


@server.prompt()
def summarise(text: str, style: str = "short") -> list:
    """Summarise a text.

    Args:
        text: What to summarise.
        style: short or long.
    """
    return [{"role": "user", "content": f"Summarise ({style}): {text}"},
            {"role": "assistant", "content": content.text("Here is a summary.")}]
