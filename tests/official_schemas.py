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
from typing import Any

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


def conforms(revision: str, instance: Any, definition: str) -> None:
    """Assert that `instance` fits `definition` and carries nothing the revision does not declare."""
    problems = errors(revision, instance, definition)
    assert not problems, f"{revision} {definition}: {problems}\n{json.dumps(instance)[:2000]}"
    extra = undeclared(revision, instance, definition)
    assert not extra, f"{revision} {definition}: {extra}\n{json.dumps(instance)[:2000]}"


def fits(revision: str, instance: Any, node: Any) -> bool:
    return not validate(instance, _rooted(revision, node))


def undeclared(revision: str, instance: Any, definition: str) -> list[str]:
    """Every key of `instance`, at any depth, that the revision's `definition` does not declare (a request's
    or notification's JSON-RPC envelope aside: the older schemas declare it apart, in JSONRPCRequest)."""
    found: list[str] = []
    _walk(revision, instance, {"$ref": f"#/{_key(revision)}/{definition}"}, definition, found)
    return [f for f in found if f.split(":")[0] not in (f"{definition}.jsonrpc", f"{definition}.id")]


def _resolved(revision: str, node: Any) -> Any:
    while isinstance(node, dict) and "$ref" in node:
        node = definitions(revision)[node["$ref"].rpartition("/")[2]]
    return node


def _walk(revision: str, value: Any, node: Any, path: str, found: list[str], meta: bool = False) -> None:
    node = _resolved(revision, node)
    if not isinstance(node, dict):
        return
    for keyword in ("anyOf", "oneOf"):
        if keyword in node:
            reports = []
            for branch in node[keyword]:
                if fits(revision, value, branch):
                    report: list[str] = []
                    _walk(revision, value, branch, path, report, meta)
                    if not report:
                        break
                    reports.append(report)
            else:  # no branch fits without extra keys: what the first that fits would have had sent
                found.extend(reports[0] if reports else [])
    parts = [node, *(_resolved(revision, branch) for branch in node.get("allOf", ()))]
    if isinstance(value, dict):
        declared: dict[str, Any] = {}
        for part in parts:
            declared.update(part.get("properties", {}))
        closed = not meta and any("properties" in part for part in parts) and not any(
            "additionalProperties" in part for part in parts)
        extra = next((part["additionalProperties"] for part in parts if "additionalProperties" in part), True)
        for key, item in value.items():
            where = f"{path}.{key}"
            if key in declared:
                if key not in AUTHORS_SCHEMAS:
                    _walk(revision, item, declared[key], where, found, key == "_meta")
            elif closed:
                found.append(f"{where}: not in {revision}")
            elif isinstance(extra, dict) and extra:
                _walk(revision, item, extra, where, found)
    elif isinstance(value, list):
        items = next((part["items"] for part in parts if isinstance(part.get("items"), dict)), None)
        if items is not None:
            for index, item in enumerate(value):
                _walk(revision, item, items, f"{path}[{index}]", found)
