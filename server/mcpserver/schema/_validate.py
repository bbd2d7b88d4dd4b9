"""JSON Schema validation: what a tool's arguments and results are checked against, per call.

Rules of this module:
- It implements a documented subset of 2020-12 (and draft-07's array form of `items`). A schema using
  an assertion keyword outside that subset is refused at start-up (`check_schema`) rather than
  silently not enforced; annotation keywords (title, description, default, format, ...) are fine.
- Only local `$ref`s ("#/...") are followed; nothing is ever fetched.
- Arguments come from clients, so no input may cost more than linear time for a given schema:
  `uniqueItems` hashes a canonical form of each item; a composition branch (anyOf, oneOf, not, if,
  contains) evaluates each (value, subschema) pair once per call, however the schema nests or
  refers to itself; and evaluation stops once MAX_ERRORS errors are known, or a length bound fails.
- Recursion is bounded by MAX_SCHEMA_DEPTH, so a self-referencing schema cannot loop.
"""

from __future__ import annotations

import re

from ..errors import ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Optional

__all__ = ["MAX_ERRORS", "MAX_SCHEMA_DEPTH", "check_schema", "json_equal", "json_type", "quick_validator",
           "validate"]

DIALECT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
DIALECT_DRAFT_07 = "http://json-schema.org/draft-07/schema"
_DIALECTS = {DIALECT_2020_12, DIALECT_DRAFT_07}

MAX_SCHEMA_DEPTH = 128  # nested subschema evaluations per instance, $ref hops included
MAX_ERRORS = 5  # a model acts better on a few precise messages than on a wall of them

_JSON_TYPES = ("null", "boolean", "integer", "number", "string", "array", "object")

_SUBSCHEMA_KEYWORDS = ("additionalProperties", "not", "if", "then", "else", "contains", "propertyNames")
_SUBSCHEMA_MAP_KEYWORDS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SUBSCHEMA_LIST_KEYWORDS = ("anyOf", "oneOf", "allOf", "prefixItems")
_UNSUPPORTED_ASSERTIONS = {
    "unevaluatedProperties", "unevaluatedItems", "$dynamicRef", "$recursiveRef", "additionalItems",
    "dependencies",
}


def json_type(value: Any) -> str:
    """The JSON type name of a decoded value ("integer" for integral numbers)."""
    if value is None:
        return "null"
    if value is True or value is False:
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _is_type(value: Any, name: str) -> bool:
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if name == "integer":
        if isinstance(value, bool):
            return False
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    return json_type(value) == name


def json_equal(a: Any, b: Any) -> bool:
    """Equality as JSON Schema defines it: true is not 1, and 1 is 1.0."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


# ---------------------------------------------------------------------------------------------
# Validation


def _canonical(value: Any) -> Any:
    """A hashable form of a JSON value, equal for values JSON Schema calls equal (1 and 1.0, not true and 1)."""
    if value is True or value is False:
        return ("b", value)
    if isinstance(value, (int, float)):
        return ("n", value)
    if isinstance(value, (list, tuple)):
        return ("a", tuple(_canonical(item) for item in value))
    if isinstance(value, dict):
        return ("o", frozenset((key, _canonical(item)) for key, item in value.items()))
    return value  # str or None: never equal to one of the tuples above


def _resolve(root: Any, ref: str) -> Any:
    node = root
    for part in ref[2:].split("/") if ref != "#" else ():
        part = part.replace("~1", "/").replace("~0", "~")
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


class _Validator:
    def __init__(self, root: Any):
        self.root = root
        self.errors: list[str] = []
        self.limit = MAX_ERRORS  # stop evaluating once this many errors are known
        self._patterns: dict[str, re.Pattern[str]] = {}
        # (id(value), id(schema), depth) -> verdict of a branch evaluated quietly; the values and schemas
        # stay alive for the whole call, so their ids cannot be reused while the memo exists.
        self._verdicts: dict[tuple[int, int, int], bool] = {}

    @property
    def done(self) -> bool:
        return len(self.errors) >= self.limit

    def fail(self, path: str, message: str) -> None:
        self.errors.append(f"{path}: {message}" if path else message)

    def pattern(self, source: str) -> re.Pattern[str]:
        compiled = self._patterns.get(source)
        if compiled is None:
            compiled = self._patterns[source] = re.compile(source)
        return compiled

    def check(self, value: Any, schema: Any, path: str, depth: int) -> bool:
        """Validate; record errors; return whether `value` is valid."""
        if schema is True:
            return True
        if schema is False:
            self.fail(path, "no value is allowed here")
            return False
        if depth > MAX_SCHEMA_DEPTH:
            self.fail(path, "schema nesting too deep to evaluate")
            return False
        before = len(self.errors)
        s = schema
        if "$ref" in s:
            self.check(value, _resolve(self.root, s["$ref"]), path, depth + 1)

        expected = s.get("type")
        if expected is not None:
            names = expected if isinstance(expected, list) else (expected,)
            if not any(_is_type(value, n) for n in names):
                self.fail(path, f"expected {' or '.join(names)}, got {json_type(value)}")
                return False
        if "const" in s and not json_equal(value, s["const"]):
            self.fail(path, f"must be {_show(s['const'])}")
        if "enum" in s and not any(json_equal(value, option) for option in s["enum"]):
            self.fail(path, "must be one of " + ", ".join(_show(o) for o in s["enum"]))
        if self.done:
            return False

        if isinstance(value, str):
            self._string(value, s, path)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            self._number(value, s, path)
        elif isinstance(value, dict):
            self._object(value, s, path, depth)
        elif isinstance(value, list):
            self._array(value, s, path, depth)

        for keyword in ("allOf", "anyOf", "oneOf", "not", "if"):
            if keyword in s and not self.done:
                self._combinator(keyword, value, s, path, depth)
        return len(self.errors) == before

    def _string(self, value: str, s: dict[str, Any], path: str) -> None:
        if "minLength" in s and len(value) < s["minLength"]:
            self.fail(path, f"must be at least {s['minLength']} characters long")
        if "maxLength" in s and len(value) > s["maxLength"]:
            self.fail(path, f"must be at most {s['maxLength']} characters long (got {len(value)})")
            return  # a pattern need not scan a string that is already refused
        if "pattern" in s and not self.pattern(s["pattern"]).search(value):
            self.fail(path, f"must match the pattern {s['pattern']!r}")

    def _number(self, value: float, s: dict[str, Any], path: str) -> None:
        if "minimum" in s and value < s["minimum"]:
            self.fail(path, f"must be at least {s['minimum']}")
        if "maximum" in s and value > s["maximum"]:
            self.fail(path, f"must be at most {s['maximum']}")
        if "exclusiveMinimum" in s and value <= s["exclusiveMinimum"]:
            self.fail(path, f"must be greater than {s['exclusiveMinimum']}")
        if "exclusiveMaximum" in s and value >= s["exclusiveMaximum"]:
            self.fail(path, f"must be less than {s['exclusiveMaximum']}")
        if "multipleOf" in s and not _is_multiple(value, s["multipleOf"]):
            self.fail(path, f"must be a multiple of {s['multipleOf']}")

    def _object(self, value: dict[str, Any], s: dict[str, Any], path: str, depth: int) -> None:
        for name in s.get("required", ()):
            if name not in value:
                self.fail(path, f"missing required property {name!r}")
        if "minProperties" in s and len(value) < s["minProperties"]:
            self.fail(path, f"must have at least {s['minProperties']} properties")
        if "maxProperties" in s and len(value) > s["maxProperties"]:
            self.fail(path, f"must have at most {s['maxProperties']} properties")
            return
        for name, needed in s.get("dependentRequired", {}).items():
            if name in value:
                for other in needed:
                    if other not in value:
                        self.fail(path, f"property {other!r} is required when {name!r} is given")
        for name, subschema in s.get("dependentSchemas", {}).items():
            if name in value:
                self.check(value, subschema, path, depth + 1)
        properties = s.get("properties", {})
        patterns = s.get("patternProperties", {})
        additional = s.get("additionalProperties", True)
        names = s.get("propertyNames")
        for name, item in value.items():
            if self.done:
                return
            item_path = f"{path}.{name}" if path else name
            if names is not None:
                self.check(name, names, f"{item_path} (name)", depth + 1)
            matched = name in properties
            if matched:
                self.check(item, properties[name], item_path, depth + 1)
            for source, subschema in patterns.items():
                if self.pattern(source).search(name):
                    matched = True
                    self.check(item, subschema, item_path, depth + 1)
            if not matched:
                if additional is False:
                    allowed = ", ".join(repr(p) for p in properties) or "none"
                    self.fail(path, f"unexpected property {name!r} (allowed: {allowed})")
                elif additional is not True:
                    self.check(item, additional, item_path, depth + 1)

    def _array(self, value: list[Any], s: dict[str, Any], path: str, depth: int) -> None:
        if "minItems" in s and len(value) < s["minItems"]:
            self.fail(path, f"must have at least {s['minItems']} items")
        if "maxItems" in s and len(value) > s["maxItems"]:
            self.fail(path, f"must have at most {s['maxItems']} items (got {len(value)})")
            return  # nothing about the items can make a too-long array valid
        if s.get("uniqueItems"):
            self._unique(value, path)
        prefix = s.get("prefixItems", ())
        items = s.get("items", True)
        if isinstance(items, list):  # draft-07 tuple form
            prefix, items = items, True
        for i, item in enumerate(value):
            if self.done:
                return
            if i < len(prefix):
                self.check(item, prefix[i], f"{path}[{i}]", depth + 1)
            elif items is not True:
                self.check(item, items, f"{path}[{i}]", depth + 1)
        if "contains" in s:
            found = sum(1 for item in value if self._quietly(item, s["contains"], depth))
            low, high = s.get("minContains", 1), s.get("maxContains")
            if found < low or (high is not None and found > high):
                self.fail(path, f"has {found} items matching 'contains'; need at least {low}"
                          + (f" and at most {high}" if high is not None else ""))

    def _unique(self, value: list[Any], path: str) -> None:
        seen: set[Any] = set()
        for i, item in enumerate(value):
            key = _canonical(item)
            if key in seen:
                self.fail(f"{path}[{i}]", "duplicates an earlier item")
                return
            seen.add(key)

    def _quietly(self, value: Any, schema: Any, depth: int) -> bool:
        """Whether `value` matches, recording nothing: a composition keyword needs only the verdict."""
        key = (id(value), id(schema), depth)
        verdict = self._verdicts.get(key)
        if verdict is None:
            saved, limit = self.errors, self.limit
            self.errors, self.limit = [], 1  # the first error decides
            try:
                verdict = self._verdicts[key] = self.check(value, schema, "", depth + 1)
            finally:
                self.errors, self.limit = saved, limit
        return verdict

    def _combinator(self, keyword: str, value: Any, s: dict[str, Any], path: str, depth: int) -> None:
        if keyword == "allOf":
            for subschema in s["allOf"]:
                self.check(value, subschema, path, depth + 1)
        elif keyword == "anyOf":
            if not any(self._quietly(value, sub, depth) for sub in s["anyOf"]):
                self.fail(path, f"does not match any allowed form ({_describe_options(s['anyOf'])})")
        elif keyword == "oneOf":
            matches = sum(1 for sub in s["oneOf"] if self._quietly(value, sub, depth))
            if matches != 1:
                self.fail(path, f"must match exactly one of ({_describe_options(s['oneOf'])}); matches {matches}")
        elif keyword == "not":
            if self._quietly(value, s["not"], depth):
                self.fail(path, "matches a form that is not allowed")
        elif keyword == "if":
            branch = "then" if self._quietly(value, s["if"], depth) else "else"
            if branch in s:
                self.check(value, s[branch], path, depth + 1)


def _is_multiple(value: float, divisor: float) -> bool:
    if isinstance(value, int) and isinstance(divisor, int):
        return value % divisor == 0
    try:
        quotient = value / divisor
    except OverflowError:  # an integer beyond float range: exact arithmetic
        from fractions import Fraction

        return (Fraction(value) / Fraction(divisor)).denominator == 1
    return quotient - quotient == 0 and quotient == int(quotient)  # finite: inf - inf and nan are not 0


def _show(value: Any) -> str:
    return repr(value) if isinstance(value, str) else str(value).lower() if isinstance(value, bool) else str(value)


def _describe_options(options: list[Any]) -> str:
    described = []
    for option in options:
        if isinstance(option, dict) and "type" in option:
            described.append(str(option["type"]))
        elif isinstance(option, dict) and "const" in option:
            described.append(_show(option["const"]))
        else:
            described.append("a schema")
    return ", ".join(described)


def validate(value: Any, schema: Any, *, path: str = "") -> list[str]:
    """Errors of `value` against `schema` (a few at most); an empty list means valid."""
    validator = _Validator(schema)
    try:
        validator.check(value, schema, path, 0)
    except RecursionError:  # a value nested deeper than the interpreter can walk (only a tool can make one)
        validator.fail(path, "nested too deeply to check")
    return validator.errors[:MAX_ERRORS]


_QUICK_ROOT_KEYWORDS = {"type", "properties", "required", "additionalProperties", "title", "description",
                        "$schema", "$comment"}
_QUICK_PROPERTY_KEYWORDS = {"type", "title", "description", "default", "examples", "format", "$comment",
                            "deprecated", "readOnly", "writeOnly"}
_QUICK_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda value: isinstance(value, str),
    "boolean": lambda value: value is True or value is False,
    "null": lambda value: value is None,
    "object": lambda value: isinstance(value, dict),
    "array": lambda value: isinstance(value, (list, tuple)),
    "number": lambda value: _is_type(value, "number"),
    "integer": lambda value: _is_type(value, "integer"),
}


def quick_validator(schema: Any) -> Optional[Callable[[Any], bool]]:
    """A fast check for the flat object schemas that signatures produce, or None for any other schema.

    The check returns True only for values that `validate` accepts, so a True skips `validate`; False
    means "not sure": call `validate` for the verdict and the messages. Built once per tool, it saves
    the general validator's walk over every keyword on every call.
    """
    if not isinstance(schema, dict) or set(schema) - _QUICK_ROOT_KEYWORDS or schema.get("type") != "object":
        return None
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    closed = schema.get("additionalProperties", True)
    if not isinstance(properties, dict) or not isinstance(required, list) or closed not in (True, False):
        return None
    checks: dict[str, Optional[Callable[[Any], bool]]] = {}
    for name, sub in properties.items():
        if sub is True or sub == {}:
            checks[name] = None  # anything goes
            continue
        if not isinstance(sub, dict) or set(sub) - _QUICK_PROPERTY_KEYWORDS or "type" not in sub:
            return None
        names = sub["type"] if isinstance(sub["type"], list) else [sub["type"]]
        if not names or any(n not in _QUICK_TYPES for n in names):
            return None
        checks[name] = _QUICK_TYPES[names[0]] if len(names) == 1 else _any_of(tuple(_QUICK_TYPES[n] for n in names))
    needed = tuple(required)
    rejects_others = closed is False

    def quick(value: Any) -> bool:
        if not isinstance(value, dict):
            return False
        for name in needed:
            if name not in value:
                return False
        for name, item in value.items():
            if name in checks:
                allowed = checks[name]
                if allowed is not None and not allowed(item):
                    return False
            elif rejects_others:
                return False
        return True

    return quick


def _any_of(tests: tuple[Callable[[Any], bool], ...]) -> Callable[[Any], bool]:
    """One test for a list of types (most properties have one type, and call its test directly)."""
    return lambda value: any(test(value) for test in tests)


# ---------------------------------------------------------------------------------------------
# Start-up checks of schemas


def check_schema(schema: Any, where: str, *, root_object: bool = False) -> None:
    """Refuse a schema the validator cannot honour; raise ConfigError naming `where`."""
    if root_object and (not isinstance(schema, dict) or schema.get("type") != "object"):
        raise ConfigError(f"{where}: an inputSchema must be a JSON object with \"type\": \"object\"")
    dialect = schema.get("$schema") if isinstance(schema, dict) else None
    if dialect is not None and str(dialect).rstrip("#") not in _DIALECTS:
        raise ConfigError(f"{where}: unsupported JSON Schema dialect {dialect!r}; use 2020-12 or draft-07")
    _check_node(schema, schema, where, "#", 0)


def _check_node(node: Any, root: Any, where: str, pointer: str, depth: int) -> None:
    if isinstance(node, bool):
        return
    if not isinstance(node, dict):
        raise ConfigError(f"{where}: schema at {pointer} must be an object or a boolean")
    if depth > MAX_SCHEMA_DEPTH:
        raise ConfigError(f"{where}: schema nested too deeply at {pointer}")
    _check_keywords(node, root, where, pointer)
    for keyword in _SUBSCHEMA_KEYWORDS:
        if keyword in node:
            _check_node(node[keyword], root, where, f"{pointer}/{keyword}", depth + 1)
    for keyword in _SUBSCHEMA_MAP_KEYWORDS:
        if keyword in node:
            if not isinstance(node[keyword], dict):
                raise ConfigError(f"{where}: {pointer}/{keyword} must be an object")
            for name, sub in node[keyword].items():
                _check_node(sub, root, where, f"{pointer}/{keyword}/{name}", depth + 1)
    for keyword in _SUBSCHEMA_LIST_KEYWORDS:
        if keyword in node:
            if not isinstance(node[keyword], list) or not node[keyword]:
                raise ConfigError(f"{where}: {pointer}/{keyword} must be a non-empty array")
            for i, sub in enumerate(node[keyword]):
                _check_node(sub, root, where, f"{pointer}/{keyword}/{i}", depth + 1)
    if "items" in node:
        items = node["items"]
        for i, sub in enumerate(items if isinstance(items, list) else [items]):
            _check_node(sub, root, where, f"{pointer}/items" + (f"/{i}" if isinstance(items, list) else ""),
                        depth + 1)


def _check_keywords(node: dict[str, Any], root: Any, where: str, pointer: str) -> None:
    """The keywords of one schema object that hold values, not subschemas."""

    def bad(keyword: str, expected: str) -> ConfigError:
        return ConfigError(f"{where}: {pointer}/{keyword} must be {expected}")

    for keyword in node:
        if keyword in _UNSUPPORTED_ASSERTIONS:
            raise ConfigError(f"{where}: keyword {keyword!r} at {pointer} is not supported by mcpserver's "
                              "validator; express the constraint another way or validate inside the tool")
    if "type" in node:
        names = node["type"] if isinstance(node["type"], list) else [node["type"]]
        if not names or any(n not in _JSON_TYPES for n in names):
            raise bad("type", "one of " + ", ".join(_JSON_TYPES) + " or a list of them")
    if "enum" in node and not isinstance(node["enum"], list):
        raise bad("enum", "an array")
    if "required" in node and not (isinstance(node["required"], list)
                                   and all(isinstance(n, str) for n in node["required"])):
        raise bad("required", "an array of strings")
    for keyword in ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties",
                    "minContains", "maxContains"):
        if keyword in node and (not isinstance(node[keyword], int) or isinstance(node[keyword], bool)
                                or node[keyword] < 0):
            raise bad(keyword, "a non-negative integer")
    for keyword in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"):
        if keyword in node and (not isinstance(node[keyword], (int, float)) or isinstance(node[keyword], bool)):
            raise bad(keyword, "a number")
    if "multipleOf" in node and node["multipleOf"] <= 0:
        raise bad("multipleOf", "greater than 0")
    for source in ([node["pattern"]] if "pattern" in node else []) + list(node.get("patternProperties", {}) or {}):
        try:
            re.compile(source)
        except (re.error, TypeError) as exc:
            raise ConfigError(f"{where}: pattern {source!r} at {pointer} does not compile: {exc}") from None
    if "$ref" in node:
        ref = node["$ref"]
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise ConfigError(f"{where}: $ref {ref!r} at {pointer} is not local; only \"#/...\" references "
                              "are followed (nothing is fetched)")
        try:
            _resolve(root, ref)
        except (KeyError, IndexError, ValueError, TypeError):
            raise ConfigError(f"{where}: $ref {ref!r} at {pointer} points nowhere") from None
