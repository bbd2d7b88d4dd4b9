"""Schema derivation (the same on every Python 3.9-3.15), the validator, and start-up schema checks."""

import sys
from typing import Any, Optional

import pytest
import signatures_future
import signatures_plain
from mcpserver import ConfigError, Server
from mcpserver.schema import _signature
from mcpserver.schema._derive import parse_docstring, schema_from_function
from mcpserver.schema._validate import check_schema, validate

# The one expected schema: every Python the lab runs asserts exactly this.
EVERYTHING = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "Who to greet."},
        "count": {"type": "integer", "description": "How many times."},
        "ratio": {"type": "number"},
        "flag": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "extra": {"type": "object", "additionalProperties": {"type": "integer"}},
        "mode": {"type": "string", "enum": ["fast", "slow"], "default": "fast"},
        "limit": {"type": ["integer", "null"], "default": None},
        "note": {"type": ["string", "null"], "default": None},
        "colour": {"type": "string", "enum": ["red", "green"], "default": "red"},
        "size": {"type": "integer", "description": "Bytes to read", "default": 10},
    },
    "required": ["name", "count", "ratio", "flag", "tags", "extra"],
    "additionalProperties": False,
}


@pytest.mark.parametrize("module", [signatures_future, signatures_plain], ids=["string-annotations", "evaluated"])
def test_derived_schema_is_identical_on_every_python(module):
    derived = schema_from_function(module.everything, "tool 'everything'")
    assert derived.input_schema == EVERYTHING, f"Python {sys.version_info[:2]}"
    assert derived.description == "Exercise every supported annotation."


def test_none_default_is_nullable_whatever_the_python():
    """3.9/3.10 add Optional for `= None` implicitly; 3.11+ do not. We always do."""
    def f(a: str = None, b: Optional[str] = None, c: "Optional[str]" = "x") -> None: ...
    properties = schema_from_function(f, "f").input_schema["properties"]
    assert properties["a"] == properties["b"] == {"type": ["string", "null"], "default": None}
    assert properties["c"] == {"type": ["string", "null"], "default": "x"}


def test_no_parameters_gives_the_recommended_closed_schema():
    assert schema_from_function(lambda: None, "f").input_schema == {"type": "object", "additionalProperties": False}


def test_unions_and_unannotated_parameters():
    def f(a, b: Any, c: "int | str", d: "list[int | None]") -> None: ...
    properties = schema_from_function(f, "f").input_schema["properties"]
    assert properties["a"] == properties["b"] == {}
    assert properties["c"] == {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    assert properties["d"] == {"type": "array", "items": {"type": ["integer", "null"]}}


@pytest.mark.parametrize("source", ["def f(*args): ...", "def f(**kw): ...", "def f(a, /): ...",
                                    "def f(a: complex): ...", "def f(a: 'Undefined'): ..."])
def test_signatures_that_cannot_be_described_are_refused(source):
    namespace: dict = {}
    exec(source, namespace)
    with pytest.raises(ConfigError, match="tool 'f'"):
        Server("s").tool(namespace["f"], name="f")


def test_arguments_are_converted_to_the_annotated_types():
    server = Server("s")
    seen = {}

    @server.tool()
    def f(n: int, colour: signatures_plain.Colour = signatures_plain.Colour.RED, m: Optional[int] = None) -> str:
        seen.update(n=n, colour=colour, m=m)
        return "ok"

    result = server.tools["f"].call({"n": 3.0, "colour": "green", "m": 2.0})
    assert result == {"content": [{"type": "text", "text": "ok"}]}
    assert seen == {"n": 3, "colour": signatures_plain.Colour.GREEN, "m": 2}
    assert type(seen["n"]) is int and type(seen["m"]) is int


def test_docstring_sections():
    description, params = parse_docstring("""Do a thing.

    More words.

    Args:
        alpha (int): First
            continued.
        beta: Second.

    Returns:
        nothing: really.
    """)
    assert description == "Do a thing.\n\nMore words."
    assert params == {"alpha": "First continued.", "beta": "Second."}


def test_docstring_lines_are_read_as_the_google_style_patterns_read_them():
    # The reader is hand-written (a start-up costs less without compiling patterns); these are the patterns it
    # replaced, held as the definition of what a heading and an argument line are.
    import re

    section = re.compile(r"^(Args|Arguments|Parameters|Params|Returns|Return|Raises|Yields|Examples?|Notes?):\s*$")
    argument = re.compile(r"^\s*(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
    names = ["Args", "Arguments", "Params", "Returns", "Example", "Examples", "Note", "Notes", "Yields", "Raises",
             "Arg", "args", "Exampless", "Return"]
    headings = [f"{n}{tail}" for n in names for tail in (":", ": ", ":\t", " :", "", "::", ": x")]
    lines = ["x: y", "  x: y", "x : y", "x (int): y", "x(int):y", "x (int) : y", "x (dict[str, int]): y",
             "x (a(b)): y", "x (unclosed: y", "*args: y", "**kwargs: y", "***three: y", "* x: y", "x:", "x",
             ": y", "über_größe: y", "x1_2: y", "x-y: z", "x\u00a0: y", "\u2003x: y", "x: \u00a0y ", "٣: y",
             "x: y: z", "(int): y", "x ()): y", "x\t(int)\t:\ty", ""]
    for line in headings:
        found = section.match(line.strip())
        assert _signature._section(line.strip()) == (found.group(1) if found else None), line
    for line in lines + headings:
        found = argument.match(line)
        ours = _signature._argument(line)
        expected = (found.group(1), found.group(2).strip()) if found else None
        assert ((ours[0], ours[1].strip()) if ours else None) == expected, line


# --- the validator ---------------------------------------------------------------------------


@pytest.mark.parametrize("schema, good, bad, message", [
    ({"type": "string"}, "a", 1, "expected string, got integer"),
    ({"type": "integer"}, 3.0, True, "expected integer, got boolean"),
    ({"type": "integer"}, -2, 2.5, "expected integer, got number"),
    ({"type": "number"}, 2.5, "2.5", "expected number, got string"),
    ({"type": "boolean"}, False, 0, "expected boolean, got integer"),
    ({"type": "null"}, None, 0, "expected null"),
    ({"type": ["string", "null"]}, None, 1, "expected string or null"),
    ({"enum": ["a", 1]}, 1, True, "must be one of 'a', 1"),
    ({"const": 1}, 1.0, True, "must be 1"),
    ({"type": "string", "minLength": 2}, "ab", "a", "at least 2 characters"),
    ({"type": "string", "maxLength": 2}, "\U0001f600\U0001f600", "abc", "at most 2 characters"),
    ({"type": "string", "pattern": "^[a-z]+$"}, "abc", "ABC", "must match the pattern"),
    ({"minimum": 1, "maximum": 3}, 3, 4, "at most 3"),
    ({"minimum": 1}, 1, 0.5, "at least 1"),
    ({"exclusiveMinimum": 0}, 0.1, 0, "greater than 0"),
    ({"exclusiveMaximum": 1}, 0.9, 1, "less than 1"),
    ({"multipleOf": 0.5}, 1.5, 1.2, "multiple of 0.5"),
    ({"type": "array", "items": {"type": "integer"}}, [1, 2], [1, "2"], "[1]: expected integer"),
    ({"type": "array", "minItems": 1, "maxItems": 2}, [1], [], "at least 1 items"),
    ({"uniqueItems": True}, [1, True], [1, 1.0], "duplicates an earlier item"),
    ({"prefixItems": [{"type": "string"}], "items": False}, ["a"], ["a", 1], "[1]: no value is allowed"),
    ({"items": [{"type": "string"}]}, ["a", 1], [1], "[0]: expected string"),
    ({"contains": {"type": "string"}}, [1, "a"], [1, 2], "matching 'contains'"),
    ({"required": ["a"]}, {"a": 1}, {}, "missing required property 'a'"),
    ({"properties": {"a": {"type": "string"}}, "additionalProperties": False}, {"a": "x"}, {"b": 1},
     "unexpected property 'b'"),
    ({"additionalProperties": {"type": "integer"}}, {"x": 1}, {"x": "1"}, "x: expected integer"),
    ({"patternProperties": {"^n_": {"type": "integer"}}, "additionalProperties": False}, {"n_a": 1}, {"m": 1},
     "unexpected property 'm'"),
    ({"propertyNames": {"maxLength": 3}}, {"abc": 1}, {"abcd": 1}, "abcd (name)"),
    ({"minProperties": 1}, {"a": 1}, {}, "at least 1 properties"),
    ({"dependentRequired": {"a": ["b"]}}, {"a": 1, "b": 2}, {"a": 1}, "'b' is required when 'a'"),
    ({"anyOf": [{"type": "string"}, {"type": "integer"}]}, 1, 1.5, "does not match any allowed form"),
    ({"oneOf": [{"type": "integer"}, {"minimum": 0}]}, -1, 1, "exactly one"),
    ({"allOf": [{"minimum": 0}, {"maximum": 5}]}, 3, 6, "at most 5"),
    ({"not": {"type": "string"}}, 1, "a", "not allowed"),
    ({"if": {"type": "string"}, "then": {"minLength": 2}, "else": {"minimum": 0}}, "ab", -1, "at least 0"),
    ({"$defs": {"pos": {"minimum": 0}}, "$ref": "#/$defs/pos"}, 1, -1, "at least 0"),
    ({"properties": {"a": False}}, {"b": 1}, {"a": 1}, "a: no value is allowed"),
])
def test_validator_keywords(schema, good, bad, message):
    assert validate(good, schema) == []
    errors = validate(bad, schema)
    assert errors and any(message in e for e in errors), errors


def test_validation_errors_name_the_path_and_stop_at_a_few():
    schema = {"type": "object", "properties": {"items": {"type": "array", "items": {"type": "object", "properties":
              {"n": {"type": "integer"}}}}}}
    assert validate({"items": [{"n": 1}, {"n": "x"}]}, schema) == ["items[1].n: expected integer, got string"]
    assert len(validate(list(range(50)), {"items": {"type": "string"}})) == 5


def test_a_self_referencing_schema_cannot_loop():
    errors = validate(1, {"$ref": "#"})
    assert errors == ["schema nesting too deep to evaluate"]


# --- start-up checks of schemas --------------------------------------------------------------


@pytest.mark.parametrize("schema, message", [
    ({"type": "array"}, 'must be a JSON object with "type": "object"'),
    ({"type": "object", "properties": {"a": {"type": "str"}}}, "/properties/a/type must be one of"),
    ({"type": "object", "required": "a"}, "/required must be an array of strings"),
    ({"type": "object", "properties": {"a": {"pattern": "("}}}, "does not compile"),
    ({"type": "object", "properties": {"a": {"$ref": "https://example.com/s.json"}}}, "is not local"),
    ({"type": "object", "properties": {"a": {"$ref": "#/$defs/none"}}}, "points nowhere"),
    ({"type": "object", "unevaluatedProperties": False}, "'unevaluatedProperties'"),
    ({"type": "object", "$schema": "http://json-schema.org/draft-04/schema#"}, "unsupported JSON Schema dialect"),
    ({"type": "object", "properties": {"a": {"maxLength": -1}}}, "non-negative integer"),
    ({"type": "object", "anyOf": []}, "non-empty array"),
])
def test_schemas_the_validator_cannot_honour_are_refused_at_start_up(schema, message):
    with pytest.raises(ConfigError, match="tool 't'") as caught:
        Server("s").tool(lambda **kw: None, name="t", input_schema=schema)
    assert message in str(caught.value)


@pytest.mark.parametrize("dialect", ["https://json-schema.org/draft/2020-12/schema",
                                     "http://json-schema.org/draft-07/schema#"])
def test_both_dialects_of_the_spec_examples_are_accepted(dialect):
    check_schema({"$schema": dialect, "type": "object"}, "t", root_object=True)


def test_the_quick_validator_never_accepts_what_the_full_one_rejects():
    """quick_validator is a shortcut for common flat schemas: its True must always be validate()'s verdict."""
    import random

    from mcpserver.schema._validate import quick_validator

    rng = random.Random(20261130)
    types = ["string", "integer", "number", "boolean", "null", "object", "array"]
    samples = [None, True, False, 0, 1, -7, 2.5, 3.0, "", "x", [], [1], {}, {"a": 1}, 10**20, float("1e300")]
    tried = 0
    for _ in range(1500):
        names = rng.sample(["a", "b", "c", "d"], rng.randint(0, 4))
        properties = {}
        for name in names:
            kind = rng.choice([rng.choice(types), rng.sample(types, 2), None])
            properties[name] = {} if kind is None else {"type": kind}
        schema = {"type": "object", "properties": properties,
                  "required": rng.sample(names, rng.randint(0, len(names))),
                  "additionalProperties": rng.choice([True, False])}
        quick = quick_validator(schema)
        assert quick is not None, schema
        for _ in range(20):
            keys = rng.sample(["a", "b", "c", "d", "e"], rng.randint(0, 5))
            value = {key: rng.choice(samples) for key in keys}
            if quick(value):
                tried += 1
                assert validate(value, schema) == [], (schema, value)
    assert tried > 1000  # the shortcut really is taken
    assert quick_validator(schema_from_function(signatures_plain.everything, "f").input_schema) is None
    assert quick_validator({"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}}) is None
