"""JSON Schema for tools, derived from a function's signature and docstring.

Rules of this module:
- Derivation gives the same schema on every Python from 3.9 to 3.15. Annotations are resolved
  with typing.get_type_hints, falling back to evaluating `X | Y` strings part by part (3.9 cannot),
  and a parameter whose default is None is nullable on every version (3.9 and 3.10 add Optional
  implicitly, 3.11+ do not).
- `set[X]` and `list[X]` get no maxItems: validation is linear in the input (see _validate), so the
  transports' size limits already bound what a long array costs, and a guessed bound would refuse
  real inputs.
"""

from __future__ import annotations

import enum
import sys

from .._context import Context
from ..errors import ConfigError
from ._signature import (
    EMPTY,
    POSITIONAL_ONLY,
    VAR_KEYWORD,
    VAR_POSITIONAL,
    Parameter,
    annotation_globals,
    docstring,
    parameters,
    parse_docstring,
)
from ._validate import json_type

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import ModuleType
    from typing import Any, Callable, Optional

_NONE_TYPE = type(None)
# What a plain class annotation maps to; anything else (list[str], Optional[...], Literal) needs typing.
_SIMPLE = {str: "string", bool: "boolean", int: "integer", float: "number", list: "array", tuple: "array",
           dict: "object"}


def _typing() -> ModuleType:
    """typing, imported only for annotations that are not plain classes (a module using them has it already)."""
    import typing

    return typing


def _union_types() -> tuple[Any, ...]:
    typing = _typing()
    if sys.version_info >= (3, 10):
        import types

        return (typing.Union, types.UnionType)
    return (typing.Union,)


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
    if annotation is EMPTY:
        return {}
    if annotation is _NONE_TYPE or annotation is None:
        return {"type": "null"}
    if annotation in _SIMPLE:
        return {"type": _SIMPLE[annotation]}
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        values = [member.value for member in annotation]
        return _with_common_type({"enum": values}, values)
    typing = _typing()
    if annotation is typing.Any:
        return {}
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        schema = dict(schema_for_annotation(args[0], where))
        notes = [a for a in args[1:] if isinstance(a, str)]
        if notes:
            schema["description"] = notes[0]
        return schema
    if origin in _union_types():
        options = [a for a in args if a is not _NONE_TYPE]
        schema = (schema_for_annotation(options[0], where) if len(options) == 1
                  else {"anyOf": [schema_for_annotation(a, where) for a in options]})
        return _nullable(schema) if len(options) < len(args) else schema
    if origin is typing.Literal:
        return _with_common_type({"enum": list(args)}, list(args))
    import collections.abc

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
        if len(args) == 2 and args[1] is not typing.Any:
            schema["additionalProperties"] = schema_for_annotation(args[1], where)
        return schema
    raise ConfigError(f"{where}: type {annotation!r} has no JSON Schema mapping here; "
                      "pass input_schema= explicitly")


def _with_common_type(schema: dict[str, Any], values: list[Any]) -> dict[str, Any]:
    kinds = {json_type(v) for v in values}
    if len(kinds) == 1:
        return {"type": kinds.pop(), **schema}
    return schema


def _evaluate(source: str, namespace: dict[str, Any]) -> Any:
    """Evaluate one string annotation; on 3.9 `X | Y` (at any depth) becomes Union[X, Y]."""
    try:
        return eval(source, namespace)
    except TypeError:
        import ast

        class UnionOperator(ast.NodeTransformer):
            def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
                self.generic_visit(node)
                if isinstance(node.op, ast.BitOr):
                    pair = ast.Tuple(elts=[node.left, node.right], ctx=ast.Load())
                    return ast.Subscript(value=ast.Name(id="__Union__", ctx=ast.Load()), slice=pair, ctx=ast.Load())
                return node

        tree = UnionOperator().visit(ast.parse(source, mode="eval"))
        code = compile(ast.fix_missing_locations(tree), "<annotation>", "eval")
        return eval(code, {**namespace, "__Union__": _typing().Union})


def resolve_annotations(fn: Callable[..., Any], params: list[Parameter], where: str) -> dict[str, Any]:
    """The evaluated annotations of `fn`'s parameters, the same on every supported Python."""
    if not any(isinstance(p.annotation, str) for p in params):  # nothing to evaluate: the common case
        return {p.name: p.annotation for p in params}
    namespace = annotation_globals(fn)
    try:
        return {p.name: eval(p.annotation, namespace) if isinstance(p.annotation, str) else p.annotation
                for p in params}
    except Exception:  # e.g. 3.9 cannot evaluate "int | None": the careful path, one annotation at a time
        pass
    namespace = {**vars(_typing()), **namespace}
    resolved = {}
    for param in params:
        annotation = param.annotation
        if isinstance(annotation, str):
            try:
                annotation = _evaluate(annotation, namespace)
            except Exception as exc:
                raise ConfigError(f"{where}: cannot evaluate the annotation {param.annotation!r} of "
                                  f"parameter {param.name!r}: {exc}") from None
        resolved[param.name] = annotation
    return resolved


class SignatureSchema:
    """What a signature and docstring give a tool."""

    __slots__ = ("context_parameter", "converters", "description", "input_schema")

    def __init__(self, input_schema: dict[str, Any], description: Optional[str],
                 converters: dict[str, Callable[[Any], Any]], context_parameter: Optional[str]):
        self.input_schema = input_schema
        self.description = description
        # JSON gives 3.0 for an int and "red" for an Enum member; these turn them back.
        self.converters = converters
        self.context_parameter = context_parameter  # the parameter annotated Context, which the call fills in


def _converter(annotation: Any) -> Optional[Callable[[Any], Any]]:
    if annotation is int:
        return lambda v: int(v) if isinstance(v, float) else v
    if isinstance(annotation, type):
        return annotation if issubclass(annotation, enum.Enum) else None
    if annotation is EMPTY or annotation is None:
        return None
    typing = _typing()
    annotation = _strip_annotated(annotation)
    if typing.get_origin(annotation) in _union_types():
        options = [a for a in typing.get_args(annotation) if a is not _NONE_TYPE]
        inner = _converter(options[0]) if len(options) == 1 else None
        return None if inner is None else (lambda v: None if v is None else inner(v))
    return _converter(annotation) if isinstance(annotation, type) else None


def schema_from_function(fn: Callable[..., Any], where: str) -> SignatureSchema:
    """Derive a tool's inputSchema and description from its signature and docstring."""
    params = parameters(fn)
    annotations = resolve_annotations(fn, params, where)
    description, param_docs = parse_docstring(docstring(fn))
    properties: dict[str, Any] = {}
    required: list[str] = []
    converters = {}
    context_parameter = None
    for param in params:
        name = param.name
        annotation = annotations.get(name, EMPTY)
        if annotation is Context:
            context_parameter = name
            continue
        if param.kind in (VAR_POSITIONAL, VAR_KEYWORD):
            raise ConfigError(f"{where}: *{name} parameters cannot be described to a client; "
                              "name every parameter or pass input_schema= explicitly")
        if param.kind == POSITIONAL_ONLY:
            raise ConfigError(f"{where}: parameter {name!r} is positional-only; tools are called with "
                              "named arguments")
        schema = dict(schema_for_annotation(annotation, f"{where}, parameter {name!r}"))
        convert = _converter(annotation)
        if convert is not None:
            converters[name] = convert
        if name in param_docs and "description" not in schema:
            schema["description"] = param_docs[name]
        if param.default is EMPTY:
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
    return SignatureSchema(input_schema, description, converters, context_parameter)


def _strip_annotated(annotation: Any) -> Any:
    typing = _typing()
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation


def _is_jsonable(value: Any) -> bool:
    if isinstance(value, enum.Enum):
        value = value.value
    if value is None or isinstance(value, (str, bool, int)):
        return True
    if isinstance(value, float):
        return value == value and value not in (float("inf"), float("-inf"))
    if isinstance(value, (list, tuple)):
        return all(_is_jsonable(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_jsonable(v) for k, v in value.items())
    return False


def context_parameter(fn: Callable[..., Any], where: str) -> Optional[str]:
    """The name of `fn`'s parameter annotated Context, if it has one."""
    params = parameters(fn)
    if not any(p.annotation is Context or (isinstance(p.annotation, str) and "Context" in p.annotation)
               for p in params):
        return None
    annotations = resolve_annotations(fn, params, where)
    return next((p.name for p in params if annotations.get(p.name) is Context), None)
