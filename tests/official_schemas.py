"""The official schemas of the five revisions (spec/schema-<revision>.json, vendored): whether a message fits one
of their definitions, and which of its fields the revision does not declare.

- `conforms` validates with the SDK's own validator (mcpserver.schema, which every lab cell has: the schemas use
  only keywords it implements) and, where jsonschema is installed (the host), with jsonschema too, so a message
  passes only if each validator it can run says so.
- The schemas leave most objects open (a TypeScript interface becomes an object without additionalProperties),
  so a field of a newer revision sent to an older one still validates. `undeclared` walks a message beside its
  definition and names every key the definition does not declare, at any depth: through $ref, anyOf (the
  branches the value fits) and allOf (their properties together), into arrays and nested objects. An object the
  schema leaves open on purpose (an explicit additionalProperties: `_meta`, `structuredContent`, a prompt's
  arguments) may hold any key, and its values are walked against additionalProperties when that is a schema. So
  may every `_meta`, whose definitions name a few keys and lost the TypeScript index signature that allows the
  rest. A tool's inputSchema and outputSchema are JSON Schemas of the author's, whose keywords are not the
  protocol's.
"""

from __future__ import annotations

import json
import os
from typing import Any, Optional

from mcpserver.schema._validate import validate
from mcptest import ROOT

try:
    import jsonschema
except ImportError:  # lab cells have only pytest: the SDK's validator alone decides there
    jsonschema = None

REVISIONS = ("2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
LEGACY_REVISIONS = REVISIONS[1:]
AUTHORS_SCHEMAS = frozenset({"inputSchema", "outputSchema"})

_SCHEMAS: dict[str, dict[str, Any]] = {}
_JSONSCHEMA: dict[tuple[str, str], Any] = {}


def schema(revision: str) -> dict[str, Any]:
    if revision not in _SCHEMAS:
        with open(os.path.join(ROOT, "spec", f"schema-{revision}.json"), encoding="utf-8") as file:
            _SCHEMAS[revision] = json.load(file)
    return _SCHEMAS[revision]


def _key(revision: str) -> str:
    return "$defs" if "$defs" in schema(revision) else "definitions"


def definitions(revision: str) -> dict[str, Any]:
    return schema(revision)[_key(revision)]  # type: ignore[no-any-return]


def _rooted(revision: str, node: Any) -> dict[str, Any]:
    """`node` as a schema of its own, whose $refs resolve in the revision's definitions."""
    key = _key(revision)
    return {"$schema": schema(revision)["$schema"], key: definitions(revision), "allOf": [node]}


def errors(revision: str, instance: Any, definition: str) -> list[str]:
    """Why `instance` does not fit `definition` of the revision's schema: [] when it fits."""
    assert definition in definitions(revision), f"{definition} is not in the {revision} schema"
    ref = {"$ref": f"#/{_key(revision)}/{definition}"}
    found = validate(instance, _rooted(revision, ref))
    if jsonschema is not None:
        validator = _JSONSCHEMA.get((revision, definition))
        if validator is None:
            kind = jsonschema.Draft202012Validator if _key(revision) == "$defs" else jsonschema.Draft7Validator
            validator = _JSONSCHEMA[(revision, definition)] = kind(_rooted(revision, ref))
        found += [f"jsonschema: {error.message}" for error in validator.iter_errors(instance)]
    return found


def conforms(revision: str, instance: Any, definition: str, seen: Optional[set[tuple[str, str]]] = None) -> None:
    """Assert that `instance` fits `definition` and carries nothing the revision does not declare."""
    problems = errors(revision, instance, definition)
    assert not problems, f"{revision} {definition}: {problems}\n{json.dumps(instance)[:2000]}"
    extra = undeclared(revision, instance, definition, seen)
    assert not extra, f"{revision} {definition}: {extra}\n{json.dumps(instance)[:2000]}"


def fits(revision: str, instance: Any, node: Any) -> bool:
    return not validate(instance, _rooted(revision, node))


def undeclared(revision: str, instance: Any, definition: str, seen: Optional[set[tuple[str, str]]] = None) -> list[str]:
    """Every key of `instance`, at any depth, that the revision's `definition` does not declare (a request's
    or notification's JSON-RPC envelope aside: the older schemas declare it apart, in JSONRPCRequest).
    `seen` collects (definition, key) of the declared keys met, for a test that must meet them all."""
    walk = _Walk(revision)
    walk.value(instance, {"$ref": f"#/{_key(revision)}/{definition}"}, definition, "")
    if seen is not None:
        seen.update(walk.seen)
    return [f for f in walk.found if f.split(":")[0] not in (f"{definition}.jsonrpc", f"{definition}.id")]


class _Walk:
    def __init__(self, revision: str):
        self.revision = revision
        self.found: list[str] = []
        self.seen: set[tuple[str, str]] = set()

    def resolved(self, node: Any, name: str) -> tuple[Any, str]:
        while isinstance(node, dict) and "$ref" in node:
            name = node["$ref"].rpartition("/")[2]
            node = definitions(self.revision)[name]
        return node, name

    def value(self, value: Any, node: Any, path: str, name: str, meta: bool = False) -> None:
        node, name = self.resolved(node, name)
        if not isinstance(node, dict):
            return
        for keyword in ("anyOf", "oneOf"):
            if keyword in node:
                self.branch(value, node[keyword], path, name, meta)
        parts = [(node, name), *(self.resolved(branch, name) for branch in node.get("allOf", ()))]
        if isinstance(value, dict):
            self.object(value, parts, path, meta)
        elif isinstance(value, list):
            items = next(((part["items"], of) for part, of in parts if isinstance(part.get("items"), dict)), None)
            for index, item in enumerate(value if items is not None else ()):
                self.value(item, items[0], f"{path}[{index}]", items[1])

    def branch(self, value: Any, branches: list[Any], path: str, name: str, meta: bool) -> None:
        """The branches `value` fits: the first without extra keys, else what the first that fits finds."""
        walks = []
        for branch in branches:
            if fits(self.revision, value, branch):
                walk = _Walk(self.revision)
                walk.value(value, branch, path, name, meta)
                walks.append(walk)
                if not walk.found:
                    break
        chosen = next((walk for walk in walks if not walk.found), walks[0] if walks else None)
        if chosen is not None:
            self.found += chosen.found
            self.seen |= chosen.seen

    def object(self, value: dict[str, Any], parts: list[tuple[Any, str]], path: str, meta: bool) -> None:
        declared: dict[str, tuple[Any, str]] = {}
        for part, of in parts:
            declared.update((key, (sub, of)) for key, sub in part.get("properties", {}).items())
        closed = not meta and any("properties" in part for part, _ in parts) and not any(
            "additionalProperties" in part for part, _ in parts)
        extra = next((part["additionalProperties"] for part, _ in parts if "additionalProperties" in part), True)
        for key, item in value.items():
            where = f"{path}.{key}"
            if key in declared:
                sub, of = declared[key]
                self.seen.add((of, key))
                if key not in AUTHORS_SCHEMAS:
                    self.value(item, sub, where, of, key == "_meta")
            elif closed:
                self.found.append(f"{where}: not in {self.revision}")
            elif isinstance(extra, dict) and extra:
                self.value(item, extra, where, parts[0][1])
