"""The session layer's own cattrs converter: records and cancel causes as tagged unions.

Rules:
- The serialized form of a record is a JSON object whose ``"type"`` is the record's tag
  (see :func:`register_record`), followed by its fields; a cancel cause nested in a record is
  tagged the same way (``{"type": "user_cancel"}``).
- Structuring is strict: an unknown tag, a missing or extra key, or a value of the wrong JSON
  type is an error, and every problem is reported together with where it is.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

import cattrs
from cattrs.gen import make_dict_unstructure_fn
from cattrs.v import format_exception

from ..cancel import CancelCause, DisposedCancel, HookCancel, ParentCancel, UserCancel
from ..kernel._tags import TagRegistry
from ._errors import SessionFormatError
from ._records import Record, _is_attrs, record_class, record_tag, record_tags

__all__ = [
    "converter",
    "dump_record",
    "load_record",
    "register_cause",
    "structure_record",
    "unstructure_record",
]

C = TypeVar("C", bound="type[CancelCause]")

#: The session layer's converter; never the global one.
converter = cattrs.Converter(forbid_extra_keys=True)

_CAUSES: TagRegistry[CancelCause] = TagRegistry("cause", "user_cancel")


def register_cause(cls: C, tag: str | None = None) -> C:
    """Make a :class:`CancelCause` subclass serializable, under ``tag`` (snake_case by default).

    Raises:
        TypeError: ``cls`` is not an attrs subclass of :class:`CancelCause`.
        ValueError: the tag is malformed, or taken by another class (or the class has another).
    """
    if not (isinstance(cls, type) and issubclass(cls, CancelCause) and _is_attrs(cls)):
        raise TypeError(f"register_cause() takes an attrs subclass of CancelCause; got {cls!r}")
    _CAUSES.add(cls, tag)
    return cls


for _cause in (UserCancel, ParentCancel, DisposedCancel, HookCancel):
    register_cause(_cause)


def check_recordable_cause(cause: CancelCause) -> CancelCause:
    """Return ``cause`` if its class is registered (so a record can hold it), else raise.

    Raises:
        TypeError: naming the fix (``@register_cause``).
    """
    if _CAUSES.tag_of(type(cause)) is None:
        raise TypeError(
            f"cancel cause {type(cause).__qualname__} is not registered, so the turn it "
            f"cancels could not record it; decorate the class with "
            f"@trio_agents.session.register_cause"
        )
    return cause


# -- strict scalars --------------------------------------------------------------------------
# cattrs would call str(5) or int("5"); stored data of the wrong JSON type is corrupt, not
# something to coerce.


def _strict(kind: type, name: str) -> Callable[[object, type], object]:
    def structure(value: object, target: type) -> object:
        if type(value) is kind and target is kind:
            return value  # the common case, first: a resume structures every field
        if isinstance(value, bool) and kind is not bool:
            raise TypeError(f"expected {name}, got a boolean")
        if kind is float and isinstance(value, int):
            return float(value)
        if not isinstance(value, kind):
            raise TypeError(f"expected {name}, got {type(value).__name__} {value!r}")
        # A subclass target is an enum such as StopReason (a StrEnum is a str).
        return value if target is kind else target(value)

    return structure


for _kind, _name in (
    (str, "a string"),
    (int, "an integer"),
    (float, "a number"),
    (bool, "a boolean"),
):
    converter.register_structure_hook(_kind, _strict(_kind, _name))


def _structure_dict_any(value: object, _: type) -> dict[str, Any]:
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise TypeError(f"expected a JSON object, got {type(value).__name__}")
    return value


converter.register_structure_hook_func(lambda t: t == dict[str, Any], _structure_dict_any)


# -- tagged unions -----------------------------------------------------------------------------


def _tagged_unstructure_factory(
    base: type, tag_of: Callable[[Any], str]
) -> Callable[[Any], Callable[[Any], dict[str, Any]]]:
    def factory(cls: Any) -> Callable[[Any], dict[str, Any]]:
        if cls is base:
            # Declared as the base (a field `cause: CancelCause | None`): dispatch on the value.
            def dispatch(obj: Any) -> dict[str, Any]:
                return converter.unstructure(obj, unstructure_as=type(obj))  # type: ignore[no-any-return]

            return dispatch
        fields = make_dict_unstructure_fn(cls, converter)

        def tagged(obj: Any) -> dict[str, Any]:
            return {"type": tag_of(cls), **fields(obj)}

        return tagged

    return factory


def _cause_tag(cls: type[CancelCause]) -> str:
    tag = _CAUSES.tag_of(cls)
    if tag is None:
        raise TypeError(
            f"cancel cause {cls.__qualname__} is not serializable; call "
            f"register_cause({cls.__name__}) first"
        )
    return tag


def _tagged_structure(
    base: type, lookup: Callable[[str], type | None], known: Callable[[], tuple[str, ...]]
) -> Callable[[object, type], object]:
    def structure(value: object, _: type) -> object:
        if not isinstance(value, dict):
            raise TypeError(f"expected a JSON object, got {type(value).__name__}")
        tag = value.get("type")
        if not isinstance(tag, str):
            raise ValueError(f"missing the 'type' field that names the {base.__name__} kind")
        cls = lookup(tag)
        if cls is None:
            raise ValueError(f"unknown {base.__name__} type {tag!r}; known: {', '.join(known())}")
        rest = dict(value)
        del rest["type"]
        return converter.structure(rest, cls)

    return structure


def _is_record(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, Record)


def _is_cause(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, CancelCause)


converter.register_unstructure_hook_factory(
    _is_record, _tagged_unstructure_factory(Record, record_tag)
)
converter.register_unstructure_hook_factory(
    _is_cause, _tagged_unstructure_factory(CancelCause, _cause_tag)
)
converter.register_structure_hook_func(
    lambda t: t is Record, _tagged_structure(Record, record_class, record_tags)
)
converter.register_structure_hook_func(
    lambda t: t is CancelCause,
    _tagged_structure(CancelCause, _CAUSES.class_of, _CAUSES.tags),
)


# -- the public functions ------------------------------------------------------------------------


def unstructure_record(record: Record) -> dict[str, Any]:
    """The tagged JSON-ready dict of ``record``.

    Raises:
        TypeError: ``record``'s class (or its cause's) is not registered.
    """
    return converter.unstructure(record, unstructure_as=type(record))  # type: ignore[no-any-return]


def _format_problem(exc: BaseException, type_: type | None) -> str:
    message = str(exc)
    if isinstance(exc, (KeyError, cattrs.ForbiddenExtraKeysError)) or not message:
        return format_exception(exc, type_)
    return message


def structure_record(data: object, *, where: str = "record") -> Record:
    """Build a record from its tagged dict.

    Raises:
        SessionFormatError: listing every problem, each with its path under ``where``.
    """
    try:
        record = converter.structure(data, Record)
    except Exception as exc:
        problems = cattrs.transform_error(exc, path=where, format_exception=_format_problem)
        listed = "; ".join(problems)
        raise SessionFormatError(f"invalid session record: {listed}") from exc
    assert isinstance(record, Record)
    return record


def dump_record(record: Record) -> str:
    """Serialize ``record`` as one line of JSON (no trailing newline).

    Raises:
        TypeError: the record's class is not registered.
        ValueError: a value is not representable in JSON (NaN, an arbitrary object, ...).
    """
    data = unstructure_record(record)
    try:
        return json.dumps(data, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"{type(record).__name__} (seq {record.seq}) holds a value JSON cannot represent "
            f"({exc}); records may hold only str, int, float, bool, None, lists and dicts"
        ) from exc


def load_record(line: str | bytes, *, where: str = "record") -> Record:
    """Parse one line written by :func:`dump_record`.

    Raises:
        SessionFormatError: the line is not JSON, or not a valid record; the message says where.
    """
    try:
        data = json.loads(line)
    except ValueError as exc:
        raise SessionFormatError(f"{where} is not valid JSON: {exc}") from exc
    return structure_record(data, where=where)
