"""JSON Schema for tools: derived from a signature, checked at start-up, and enforced per call.

Rules of this module:
- Derivation gives the same schema on every Python from 3.9 to 3.15. Annotations are resolved
  with typing.get_type_hints, falling back to evaluating `X | Y` strings part by part (3.9 cannot),
  and a parameter whose default is None is nullable on every version (3.9 and 3.10 add Optional
  implicitly, 3.11+ do not).
- The validator implements a documented subset of 2020-12 (and draft-07's array form of `items`).
  A schema using an assertion keyword outside that subset is refused at start-up rather than
  silently not enforced; annotation keywords (title, description, default, format, ...) are fine.
- Only local `$ref`s ("#/...") are followed; nothing is ever fetched.
- Validation recursion is bounded by MAX_SCHEMA_DEPTH, so a self-referencing schema cannot loop.
"""

from __future__ import annotations

import ast
import collections.abc
import enum
import inspect
import math
import re
import sys
import typing
from typing import Any, Callable, Optional, Union

from .errors import ConfigError

DIALECT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
DIALECT_DRAFT_07 = "http://json-schema.org/draft-07/schema"
_DIALECTS = {DIALECT_2020_12, DIALECT_DRAFT_07}

MAX_SCHEMA_DEPTH = 128  # nested subschema evaluations per instance, $ref hops included
MAX_ERRORS = 5  # a model acts better on a few precise messages than on a wall of them

_JSON_TYPES = ("null", "boolean", "integer", "number", "string", "array", "object")

_SUBSCHEMA_KEYWORDS = ("additionalProperties", "not", "if", "then", "else", "contains", "propertyNames")
_SUBSCHEMA_MAP_KEYWORDS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SUBSCHEMA_LIST_KEYWORDS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUPPORTED_ASSERTIONS = {
    "type", "enum", "const", "properties", "required", "additionalProperties", "patternProperties",
    "propertyNames", "minProperties", "maxProperties", "dependentRequired", "dependentSchemas",
    "items", "prefixItems", "minItems", "maxItems", "uniqueItems", "contains", "minContains",
    "maxContains", "minLength", "maxLength", "pattern", "minimum", "maximum", "exclusiveMinimum",
    "exclusiveMaximum", "multipleOf", "anyOf", "oneOf", "allOf", "not", "if", "then", "else", "$ref",
}
_UNSUPPORTED_ASSERTIONS = {
    "unevaluatedProperties", "unevaluatedItems", "$dynamicRef", "$recursiveRef", "additionalItems",
    "dependencies",
}


# ---------------------------------------------------------------------------------------------
# JSON type helpers


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


class _Validator:
    def __init__(self, root: Any):
        self.root = root
        self.errors: list[str] = []
        self._patterns: dict[str, re.Pattern[str]] = {}

    def fail(self, path: str, message: str) -> None:
        self.errors.append(f"{path}: {message}" if path else message)

    def pattern(self, source: str) -> re.Pattern[str]:
        compiled = self._patterns.get(source)
        if compiled is None:
            compiled = self._patterns[source] = re.compile(source)
        return compiled

    def resolve(self, ref: str) -> Any:
        node = self.root
        for part in ref[2:].split("/") if ref != "#" else ():
            part = part.replace("~1", "/").replace("~0", "~")
            node = node[int(part)] if isinstance(node, list) else node[part]
        return node

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
            self.check(value, self.resolve(s["$ref"]), path, depth + 1)

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

        if isinstance(value, str):
            self._string(value, s, path)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            self._number(value, s, path)
        elif isinstance(value, dict):
            self._object(value, s, path, depth)
        elif isinstance(value, list):
            self._array(value, s, path, depth)

        for keyword in ("allOf", "anyOf", "oneOf", "not", "if"):
            if keyword in s:
                self._combinator(keyword, value, s, path, depth)
        return len(self.errors) == before

    def _string(self, value: str, s: dict[str, Any], path: str) -> None:
        if "minLength" in s and len(value) < s["minLength"]:
            self.fail(path, f"must be at least {s['minLength']} characters long")
        if "maxLength" in s and len(value) > s["maxLength"]:
            self.fail(path, f"must be at most {s['maxLength']} characters long (got {len(value)})")
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
        if "multipleOf" in s:
            quotient = value / s["multipleOf"]
            if not (math.isfinite(quotient) and quotient == int(quotient)):
                self.fail(path, f"must be a multiple of {s['multipleOf']}")

    def _object(self, value: dict[str, Any], s: dict[str, Any], path: str, depth: int) -> None:
        for name in s.get("required", ()):
            if name not in value:
                self.fail(path, f"missing required property {name!r}")
        if "minProperties" in s and len(value) < s["minProperties"]:
            self.fail(path, f"must have at least {s['minProperties']} properties")
        if "maxProperties" in s and len(value) > s["maxProperties"]:
            self.fail(path, f"must have at most {s['maxProperties']} properties")
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
            self.fail(path, f"must have at most {s['maxItems']} items")
        if s.get("uniqueItems"):
            for i, item in enumerate(value):
                if any(json_equal(item, other) for other in value[:i]):
                    self.fail(f"{path}[{i}]", "duplicates an earlier item")
                    break
        prefix = s.get("prefixItems", ())
        items = s.get("items", True)
        if isinstance(items, list):  # draft-07 tuple form
            prefix, items = items, True
        for i, item in enumerate(value):
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

    def _quietly(self, value: Any, schema: Any, depth: int) -> bool:
        saved = self.errors
        self.errors = []
        try:
            return self.check(value, schema, "", depth + 1)
        finally:
            self.errors = saved

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
    validator.check(value, schema, path, 0)
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
    checks: dict[str, Optional[tuple[Callable[[Any], bool], ...]]] = {}
    for name, sub in properties.items():
        if sub is True or sub == {}:
            checks[name] = None  # anything goes
            continue
        if not isinstance(sub, dict) or set(sub) - _QUICK_PROPERTY_KEYWORDS or "type" not in sub:
            return None
        names = sub["type"] if isinstance(sub["type"], list) else [sub["type"]]
        if not names or any(n not in _QUICK_TYPES for n in names):
            return None
        checks[name] = tuple(_QUICK_TYPES[n] for n in names)
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
                if allowed is not None and not any(test(item) for test in allowed):
                    return False
            elif rejects_others:
                return False
        return True

    return quick


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
    for keyword in ("required",):
        if keyword in node and not (isinstance(node[keyword], list)
                                    and all(isinstance(n, str) for n in node[keyword])):
            raise bad(keyword, "an array of strings")
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
    patterns = [node["pattern"]] if "pattern" in node else []
    patterns += list(node.get("patternProperties", {}) or {})
    for source in patterns:
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
            _Validator(root).resolve(ref)
        except (KeyError, IndexError, ValueError, TypeError):
            raise ConfigError(f"{where}: $ref {ref!r} at {pointer} points nowhere") from None
    for keyword in _SUBSCHEMA_KEYWORDS:
        if keyword in node:
            _check_node(node[keyword], root, where, f"{pointer}/{keyword}", depth + 1)
    for keyword in _SUBSCHEMA_MAP_KEYWORDS:
        if keyword in node:
            if not isinstance(node[keyword], dict):
                raise bad(keyword, "an object")
            for name, sub in node[keyword].items():
                _check_node(sub, root, where, f"{pointer}/{keyword}/{name}", depth + 1)
    for keyword in _SUBSCHEMA_LIST_KEYWORDS:
        if keyword in node:
            if not isinstance(node[keyword], list) or not node[keyword]:
                raise bad(keyword, "a non-empty array")
            for i, sub in enumerate(node[keyword]):
                _check_node(sub, root, where, f"{pointer}/{keyword}/{i}", depth + 1)
    if "items" in node:
        items = node["items"]
        for i, sub in enumerate(items if isinstance(items, list) else [items]):
            _check_node(sub, root, where, f"{pointer}/items" + (f"/{i}" if isinstance(items, list) else ""),
                        depth + 1)


# ---------------------------------------------------------------------------------------------
# Derivation from a Python signature

_NONE_TYPE = type(None)
_UNION_TYPES: tuple[Any, ...] = (Union,)
if sys.version_info >= (3, 10):
    import types

    _UNION_TYPES += (types.UnionType,)


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return schema
    if isinstance(kind, str) and set(schema) <= {"type", "description", "items", "additionalProperties",
                                                   "enum", "default", "title"}:
        result = dict(schema, type=[kind, "null"])
        if "enum" in result and None not in result["enum"]:
            result["enum"] = [*result["enum"], None]
        return result
    return {"anyOf": [schema, {"type": "null"}]}


def schema_for_annotation(annotation: Any, where: str) -> dict[str, Any]:
    """The JSON Schema for one resolved annotation; ConfigError when there is none."""
    if annotation is inspect.Parameter.empty or annotation is Any:
        return {}
    if annotation is _NONE_TYPE or annotation is None:
        return {"type": "null"}
    simple = {str: "string", bool: "boolean", int: "integer", float: "number", list: "array",
              tuple: "array", dict: "object"}
    if annotation in simple:
        return {"type": simple[annotation]}
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        values = [member.value for member in annotation]
        return _with_common_type({"enum": values}, values)

    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        schema = dict(schema_for_annotation(args[0], where))
        notes = [a for a in args[1:] if isinstance(a, str)]
        if notes:
            schema["description"] = notes[0]
        return schema
    if origin in _UNION_TYPES:
        options = [a for a in args if a is not _NONE_TYPE]
        schema = (schema_for_annotation(options[0], where) if len(options) == 1
                  else {"anyOf": [schema_for_annotation(a, where) for a in options]})
        return _nullable(schema) if len(options) < len(args) else schema
    if origin is typing.Literal:
        return _with_common_type({"enum": list(args)}, list(args))
    if origin in (list, set, frozenset, collections.abc.Sequence):
        schema = {"type": "array"}
        if args:
            schema["items"] = schema_for_annotation(args[0], where)
        if origin in (set, frozenset):
            schema["uniqueItems"] = True
        return schema
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": schema_for_annotation(args[0], where)}
        return {"type": "array", "prefixItems": [schema_for_annotation(a, where) for a in args],
                "minItems": len(args), "maxItems": len(args)}
    if origin in (dict, collections.abc.Mapping):
        schema = {"type": "object"}
        if len(args) == 2 and args[1] is not Any:
            schema["additionalProperties"] = schema_for_annotation(args[1], where)
        return schema
    raise ConfigError(f"{where}: type {annotation!r} has no JSON Schema mapping here; "
                      "pass input_schema= explicitly")


def _with_common_type(schema: dict[str, Any], values: list[Any]) -> dict[str, Any]:
    kinds = {json_type(v) for v in values}
    if len(kinds) == 1:
        return {"type": kinds.pop(), **schema}
    return schema


class _UnionOperator(ast.NodeTransformer):
    """Rewrite `a | b` as `Union[a, b]`, which Python 3.9 can evaluate."""

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.op, ast.BitOr):
            pair = ast.Tuple(elts=[node.left, node.right], ctx=ast.Load())
            return ast.Subscript(value=ast.Name(id="__Union__", ctx=ast.Load()), slice=pair, ctx=ast.Load())
        return node


def _evaluate(source: str, namespace: dict[str, Any]) -> Any:
    """Evaluate one string annotation; on 3.9 `X | Y` (at any depth) becomes Union[X, Y]."""
    try:
        return eval(source, namespace)
    except TypeError:
        tree = _UnionOperator().visit(ast.parse(source, mode="eval"))
        code = compile(ast.fix_missing_locations(tree), "<annotation>", "eval")
        return eval(code, {**namespace, "__Union__": Union})


def resolve_annotations(fn: Callable[..., Any], where: str) -> dict[str, Any]:
    """The evaluated annotations of `fn`'s parameters, the same on every supported Python."""
    try:
        return typing.get_type_hints(fn, include_extras=True)
    except Exception:  # 3.9 cannot evaluate "int | None"; fall back to one annotation at a time
        pass
    namespace = {**vars(typing), **getattr(fn, "__globals__", {})}
    resolved = {}
    for name, param in inspect.signature(fn).parameters.items():
        annotation = param.annotation
        if isinstance(annotation, str):
            try:
                annotation = _evaluate(annotation, namespace)
            except Exception as exc:
                raise ConfigError(f"{where}: cannot evaluate the annotation {param.annotation!r} of "
                                  f"parameter {name!r}: {exc}") from None
        resolved[name] = annotation
    return resolved


_SECTION = re.compile(r"^(Args|Arguments|Parameters|Params|Returns|Return|Raises|Yields|Examples?|Notes?):\s*$")
_ARG_LINE = re.compile(r"^\s*(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def parse_docstring(doc: Optional[str]) -> tuple[Optional[str], dict[str, str]]:
    """Split a Google-style docstring into (description, {parameter: description})."""
    if not doc:
        return None, {}
    lines = inspect.cleandoc(doc).splitlines()
    description: list[str] = []
    params: dict[str, str] = {}
    section, current = None, None
    for line in lines:
        heading = _SECTION.match(line.strip())
        if heading and not line.startswith(" "):
            section, current = heading.group(1), None
            continue
        if section is None:
            description.append(line)
        elif section in ("Args", "Arguments", "Parameters", "Params"):
            match = _ARG_LINE.match(line)
            if match and len(line) - len(line.lstrip()) <= 4:
                current = match.group(1).lstrip("*")
                params[current] = match.group(2).strip()
            elif current and line.strip():
                params[current] = f"{params[current]} {line.strip()}".strip()
    text = "\n".join(description).strip()
    return (text or None), params


class SignatureSchema(typing.NamedTuple):
    input_schema: dict[str, Any]
    description: Optional[str]
    # JSON gives 3.0 for an int and "red" for an Enum member; these turn them back.
    converters: dict[str, Callable[[Any], Any]]


def _converter(annotation: Any) -> Optional[Callable[[Any], Any]]:
    annotation = _strip_annotated(annotation)
    if typing.get_origin(annotation) in _UNION_TYPES:
        options = [a for a in typing.get_args(annotation) if a is not _NONE_TYPE]
        inner = _converter(options[0]) if len(options) == 1 else None
        return None if inner is None else (lambda v: None if v is None else inner(v))
    if annotation is int:
        return lambda v: int(v) if isinstance(v, float) else v
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return annotation
    return None


def schema_from_function(fn: Callable[..., Any], where: str) -> SignatureSchema:
    """Derive a tool's inputSchema and description from its signature and docstring."""
    annotations = resolve_annotations(fn, where)
    description, param_docs = parse_docstring(inspect.getdoc(fn))
    properties: dict[str, Any] = {}
    required: list[str] = []
    converters = {}
    for name, param in inspect.signature(fn).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ConfigError(f"{where}: *{name} parameters cannot be described to a client; "
                              "name every parameter or pass input_schema= explicitly")
        if param.kind is param.POSITIONAL_ONLY:
            raise ConfigError(f"{where}: parameter {name!r} is positional-only; tools are called with "
                              "named arguments")
        annotation = annotations.get(name, inspect.Parameter.empty)
        schema = dict(schema_for_annotation(annotation, f"{where}, parameter {name!r}"))
        convert = _converter(annotation)
        if convert is not None:
            converters[name] = convert
        if name in param_docs and "description" not in schema:
            schema["description"] = param_docs[name]
        if param.default is inspect.Parameter.empty:
            required.append(name)
        else:
            if param.default is None:
                schema = _nullable(schema)
            if _is_jsonable(param.default):
                schema["default"] = param.default.value if isinstance(param.default, enum.Enum) else param.default
        properties[name] = schema
    input_schema: dict[str, Any] = {"type": "object"}
    if properties:
        input_schema["properties"] = properties
    if required:
        input_schema["required"] = required
    input_schema["additionalProperties"] = False
    return SignatureSchema(input_schema, description, converters)


def _strip_annotated(annotation: Any) -> Any:
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation


def _is_jsonable(value: Any) -> bool:
    if isinstance(value, enum.Enum):
        value = value.value
    if value is None or isinstance(value, (str, bool, int)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, (list, tuple)):
        return all(_is_jsonable(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_jsonable(v) for k, v in value.items())
    return False
