"""A tool's arguments: the JSON schema the model sees, and the structuring of what it sends.

Rules:
- Both come from one attrs class (a tool's ``params``): the schema is derived from its field
  types, and the model's JSON object is structured into it with the kernel's strict policy in
  its JSON wording (no string-to-number or number-to-bool coercion, extra keys refused).
- A field typed ``X | None`` without a default is optional to the model: an absent one is
  ``None``. Every other field without a default is required.
- A field type with no JSON schema is refused when the tool is made, not when it is called.
"""

from __future__ import annotations

import collections.abc
import copy
import enum
import functools
import types
from collections.abc import Mapping
from typing import Any, Literal, Union, final, get_args, get_origin

import attrs

from .._base import StrictConverter, Wording, json_type

#: The tools layer's own converter (never the global one): the strict policy, in JSON terms.
tools_converter = StrictConverter(wording=Wording.json())


@final
class ArgumentsError(Exception):
    """The model's arguments do not structure; ``problems`` lists each with its path."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__(problems)
        self.problems = problems


@attrs.frozen
class Description:
    """What is derived once from a params class."""

    schema: dict[str, Any]
    # Fields typed ``X | None`` without a default: not required, so an absent one means None.
    implicit_none: tuple[str, ...]


_PRIMITIVES: dict[object, str] = {str: "string", bool: "boolean", int: "integer", float: "number"}
_ARRAYS = (list, tuple, collections.abc.Sequence, collections.abc.MutableSequence)
_MAPPINGS = (dict, collections.abc.Mapping, collections.abc.MutableMapping)
_JSON_SCALARS = (str, bool, int, float, type(None))


@functools.cache
def describe_params(cls: type) -> Description:
    """The schema of the attrs class ``cls`` (cached).

    Raises:
        TypeError: a field has no annotation, or a type with no JSON schema.
    """
    attrs.resolve_types(cls)
    properties: dict[str, Any] = {}
    required: list[str] = []
    implicit_none: list[str] = []
    for field in attrs.fields(cls):
        name = field.alias or field.name
        where = f"{cls.__qualname__}.{field.name}"
        if field.type is None:
            raise TypeError(f"tool argument {where} has no type annotation")
        schema, nullable = _schema(field.type, where)
        description = field.metadata.get("description")
        if description is not None:
            schema = {"description": str(description), **schema}
        default = field.default
        if default is attrs.NOTHING:
            if nullable:
                implicit_none.append(name)
            else:
                required.append(name)
        elif not isinstance(default, attrs.Factory) and isinstance(default, _JSON_SCALARS):  # type: ignore[arg-type]
            schema["default"] = default
        properties[name] = schema
    result: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        result["required"] = required
    result["additionalProperties"] = False
    return Description(result, tuple(implicit_none))


def params_schema(params: type | None) -> dict[str, Any]:
    """A fresh copy of the JSON schema of ``params`` (``None``: an object with no keys)."""
    if params is None:
        return {"type": "object", "properties": {}, "additionalProperties": False}
    return copy.deepcopy(describe_params(params).schema)


def _schema(tp: Any, where: str) -> tuple[dict[str, Any], bool]:
    """The JSON schema of ``tp`` and whether it admits ``None``."""
    origin = get_origin(tp)
    if origin is Union or origin is types.UnionType:
        members = [a for a in get_args(tp) if a is not type(None)]
        if len(members) != 1:
            raise TypeError(
                f"tool argument {where}: only 'X | None' unions are supported; got {tp!r}"
            )
        inner, _ = _schema(members[0], where)
        if isinstance(inner.get("type"), str) and "enum" not in inner:
            return {**inner, "type": [inner["type"], "null"]}, True
        return {"anyOf": [inner, {"type": "null"}]}, True
    return _plain_schema(tp, origin, where), False


def _plain_schema(tp: Any, origin: Any, where: str) -> dict[str, Any]:
    if tp is Any:
        return {}
    if tp in _PRIMITIVES:
        return {"type": _PRIMITIVES[tp]}
    if origin is Literal:
        values = list(get_args(tp))
        kinds = {_PRIMITIVES.get(type(v)) for v in values}
        if None in kinds:
            raise TypeError(f"tool argument {where}: Literal values must be str, int or bool")
        return {"type": kinds.pop(), "enum": values} if len(kinds) == 1 else {"enum": values}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return {"enum": [m.value for m in tp]}
    if isinstance(tp, type) and attrs.has(tp):
        return copy.deepcopy(describe_params(tp).schema)
    args = get_args(tp)
    if origin in _ARRAYS and (origin is not tuple or (len(args) == 2 and args[1] is ...)):
        item = _schema(args[0], f"{where}[]")[0] if args else {}
        return {"type": "array", "items": item}
    if origin in _MAPPINGS and args and args[0] is str:
        return {"type": "object", "additionalProperties": _schema(args[1], f"{where}{{}}")[0]}
    raise TypeError(
        f"tool argument {where} has type {tp!r}, which has no JSON schema; use str, int, "
        f"float, bool, list[X], dict[str, X], X | None, Literal, an Enum or an attrs class"
    )


def structure_arguments(params: type | None, arguments: object) -> Any:
    """Structure the model's ``arguments`` into an instance of ``params`` (or ``None``).

    Raises:
        ArgumentsError: listing every problem, each with its path under ``arguments``.
    """
    if not isinstance(arguments, Mapping):
        raise ArgumentsError([f"expected an object, got {json_type(arguments)} @ arguments"])
    if params is None:
        if arguments:
            unknown = ", ".join(sorted(map(str, arguments)))
            raise ArgumentsError([f"unknown arguments: {unknown} @ arguments"])
        return None
    values = dict(arguments)
    for absent in describe_params(params).implicit_none:
        values.setdefault(absent, None)
    try:
        return tools_converter.structure(values, params)
    except Exception as exc:
        raise ArgumentsError(tools_converter.problems(exc, path="arguments")) from exc
