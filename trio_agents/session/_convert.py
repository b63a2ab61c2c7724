"""The session layer's own cattrs converter: records and cancel causes as tagged unions.

Rules:
- The serialized form of a record is a JSON object whose ``"type"`` is the record's tag
  (see :func:`register_record`), followed by its fields; a cancel cause nested in a record is
  tagged the same way (``{"type": "user_cancel"}``).
- Structuring is the package's one strict policy, the kernel's ``StrictConverter`` (the JSON
  view: ``2`` is a float, ``2.0`` an integer, nothing else is coerced), phrased for stored data
  (``Wording.stored``). An unknown tag, a missing or extra key, or a value of the wrong JSON
  type is an error, and every problem is reported together with where it is.
- Records and causes have one tag rule, the kernel's ``TagRegistry``.
"""

from __future__ import annotations

import enum
import json
import math
import re
import types
from collections.abc import Callable
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

import attrs
from cattrs.gen import make_dict_unstructure_fn

from .._base import StrictConverter, StrictTypeError, TagRegistry, Wording
from ..cancel import (
    BudgetExhausted,
    CancelCause,
    DisposedCancel,
    HookCancel,
    LeaseLost,
    ParentCancel,
    UserCancel,
    check_cause,
)
from ._errors import SessionFormatError, UnstorableRecordError
from ._records import Record, record_class, record_tag, record_tags

C = TypeVar("C", bound="type[CancelCause]")

#: The session layer's converter; never the global one.
converter = StrictConverter(wording=Wording.stored())

_CAUSES: TagRegistry[CancelCause] = TagRegistry(
    "cause", "user_cancel", base=CancelCause, noun="cancel cause", register="register_cause"
)


def register_cause(cls: C, tag: str | None = None) -> C:
    """Make a :class:`CancelCause` subclass serializable, under ``tag`` (snake_case by default).

    Raises:
        TypeError: ``cls`` is not an attrs subclass of :class:`CancelCause`.
        ValueError: the tag is malformed, or taken by another class (or the class has another).
    """
    _CAUSES.add(cls, tag)
    return cls


for _cause in (UserCancel, ParentCancel, DisposedCancel, HookCancel, LeaseLost, BudgetExhausted):
    register_cause(_cause)


def check_recordable_cause(cause: object) -> CancelCause:
    """Return ``cause`` if it is a :class:`~trio_agents.cancel.CancelCause` whose class is
    registered (so the record of the turn it cancels can hold it), else raise.

    Raises:
        TypeError: ``cause`` is not a cancel cause, or its class is not registered (the
            message names the fix, :func:`register_cause`).
    """
    cause = check_cause(cause)
    _CAUSES.tag_for(type(cause), ", so the turn it cancels could not record it")
    return cause


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


def _tagged_structure(
    base: type, lookup: Callable[[str], type | None], known: Callable[[], tuple[str, ...]]
) -> Callable[[object, type], object]:
    # A tag that names no class is a value of the wrong type: a StrictTypeError, whose
    # message is the whole problem.
    def structure(value: object, _: type) -> object:
        if not isinstance(value, dict):
            raise converter.wording.mismatch("object", value)
        tag = value.get("type")
        if not isinstance(tag, str):
            raise StrictTypeError(f"missing the 'type' field that names the {base.__name__} kind")
        cls = lookup(tag)
        if cls is None:
            raise StrictTypeError(
                f"unknown {base.__name__} type {tag!r}; known: {', '.join(known())}"
            )
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
    _is_cause, _tagged_unstructure_factory(CancelCause, _CAUSES.tag_for)
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


def structure_record(data: object, *, where: str = "record") -> Record:
    """Build a record from its tagged dict.

    Raises:
        SessionFormatError: listing every problem, each with its path under ``where``.
    """
    try:
        record = converter.structure(data, Record)
    except Exception as exc:
        listed = "; ".join(converter.problems(exc, path=where))
        raise SessionFormatError(f"invalid session record: {listed}") from exc
    assert isinstance(record, Record)
    return record


def dump_record(record: Record) -> str:
    """Serialize ``record`` as one line of JSON (no trailing newline).

    The line is Unicode text that UTF-8 can carry (non-ASCII text is kept as it is, not
    escaped), so every backend can store it and every terminal can show it.

    Raises:
        TypeError: the record's class is not registered.
        UnstorableRecordError: a value cannot be stored: text that is not Unicode (a lone
            surrogate), ``NaN`` or an infinity, an arbitrary object (a ``ValueError``).
    """
    data = unstructure_record(record)
    try:
        text = _encode(data)
    except (TypeError, ValueError) as exc:
        raise UnstorableRecordError(
            f"{type(record).__name__} (seq {record.seq}) holds a value JSON cannot represent "
            f"({exc}); records may hold only str, int, float, bool, None, lists and dicts"
        ) from exc
    if _too_deep(text, data):
        raise UnstorableRecordError(
            f"{type(record).__name__} (seq {record.seq}) nests lists and dicts deeper than "
            f"{MAX_DEPTH} levels; flatten the value before storing it"
        )
    if not text.isascii():
        found = _SURROGATE.search(text)
        if found is not None:
            raise UnstorableRecordError(
                f"{type(record).__name__} (seq {record.seq}) holds text that is not Unicode: "
                f"a lone surrogate U+{ord(found.group()):04X} at {_where_surrogate(data)}; "
                f"decode bytes with errors='replace' (or strip the surrogates) before storing"
            )
    return text


def check_record(record: Record) -> None:
    """Raise exactly what :func:`dump_record` would raise for ``record``, without encoding it
    when its values are plainly storable (a store that keeps records in memory checks each
    append with this).

    Invariant: the quick check accepts only records whose line ``dump_record`` would write:
    every field holds a value of its declared type that JSON carries as it is (text without a
    lone surrogate, an int, a bool, a finite float, ``None``, a member of the declared enum,
    a registered cancel cause whose fields are such values); any other value, and any class
    not registered, is left to ``dump_record`` itself, so the two accept and refuse the same
    records with the same errors.
    """
    if not _plainly_storable(record, record_tag):
        dump_record(record)


_Check = Callable[[Any], bool]
#: Per registered class: (field name, plain types, quick check) for every field, or ``None``
#: when some field's declared type has no quick check. A value whose exact type is one of
#: the field's plain types passes without a call (its check accepts every value of that
#: type); any other value is left to the check.
_QUICK: dict[type, tuple[tuple[str, frozenset[type], _Check], ...] | None] = {}


def _plainly_storable(value: Any, tag_of: Callable[[Any], str]) -> bool:
    """Whether ``value``, an instance of a class registered with ``tag_of``, passes the quick
    check of every field."""
    cls = type(value)
    try:
        checks = _QUICK[cls]
    except KeyError:
        checks = _QUICK[cls] = _quick_checks(cls, tag_of)
    if checks is None:
        return False
    # A loop, not all() over a generator: this runs for every record appended. The plain
    # types decide a seq, an enum, a None or a cause without fields with no call: 335,820 ->
    # 332,654 instructions per cancel (bench_instructions; the verdicts are pinned by
    # test_check_record_accepts_and_refuses_what_dump_record_does).
    for name, plain, check in checks:
        field = getattr(value, name)
        if type(field) not in plain and not check(field):
            return False
    return True


def _quick_checks(
    cls: type, tag_of: Callable[[Any], str]
) -> tuple[tuple[str, frozenset[type], _Check], ...] | None:
    try:
        tag_of(cls)
        attrs.resolve_types(cls)
    except Exception:
        # Not registered, or annotations that do not resolve: dump_record decides, always.
        return None
    checks = []
    for field in attrs.fields(cls):
        check = _quick_check(field.type)
        if check is None:
            return None
        checks.append((field.name, _plain_types(field.type), check))
    return tuple(checks)


def _plain_types(declared: Any) -> frozenset[type]:
    """Types of which every value passes ``_quick_check(declared)`` (which must exist): an
    int, a bool, an enum, a registered cause without fields, ``None`` where it is allowed;
    never text or a float, whose values need a look."""
    if declared is int or declared is bool:
        return frozenset((declared,))
    if isinstance(declared, type) and issubclass(declared, enum.Enum):
        return frozenset((declared,))
    if declared is CancelCause:
        # Registered now (a class registered later goes through the check): no field can
        # hold an unstorable value, and a class stays registered.
        registered = (_CAUSES.class_of(tag) for tag in _CAUSES.tags())
        return frozenset(c for c in registered if c is not None and not attrs.fields(c))
    if get_origin(declared) in (Union, types.UnionType) and type(None) in get_args(declared):
        rest = [a for a in get_args(declared) if a is not type(None)]
        quick = len(rest) == 1 and _quick_check(rest[0]) is not None
        return (_plain_types(rest[0]) if quick else frozenset()) | {type(None)}
    return frozenset()


def _is_storable_cause(value: Any) -> bool:
    return isinstance(value, CancelCause) and _plainly_storable(value, _CAUSES.tag_for)


def _is_text(value: Any) -> bool:
    return type(value) is str and (value.isascii() or _SURROGATE.search(value) is None)


def _is_finite(value: Any) -> bool:
    return type(value) is float and math.isfinite(value)


_EXACT: dict[Any, _Check] = {
    str: _is_text,
    int: lambda value: type(value) is int,
    bool: lambda value: type(value) is bool,
    float: _is_finite,
}


def _quick_check(declared: Any) -> _Check | None:
    """A check that accepts only values of ``declared`` that JSON carries as they are."""
    exact = _EXACT.get(declared)
    if exact is not None:
        return exact
    if declared is CancelCause:
        return _is_storable_cause  # written tagged by its own class, which must be registered
    if isinstance(declared, type) and issubclass(declared, enum.Enum):
        # Its members are written as their values: checked once, here.
        if all(_is_plain(member.value) for member in declared):
            return lambda value: type(value) is declared
        return None
    if declared is Any:
        return _is_json
    origin = get_origin(declared)
    arguments = get_args(declared)
    if origin is dict and len(arguments) == 2 and arguments[0] is str:
        values = _quick_check(arguments[1])
        if values is None:
            return None
        return lambda value: (
            type(value) is dict and all(_is_text(k) and values(v) for k, v in value.items())
        )
    if origin is list and len(arguments) == 1:
        items = _quick_check(arguments[0])
        if items is None:
            return None
        return lambda value: type(value) is list and all(items(v) for v in value)
    if origin is Literal:
        return _is_text if all(type(a) is str for a in arguments) else None
    if origin is Union or origin is types.UnionType:
        rest = [a for a in arguments if a is not type(None)]
        if len(rest) == len(arguments):
            return None
        # `X | None`: None passes; any other value passes X's check, if X has one.
        inner = _quick_check(rest[0]) if len(rest) == 1 else None
        if inner is None:
            return lambda value: value is None
        return lambda value: value is None or inner(value)
    return None


#: How deep the quick check follows nested lists and dicts; deeper values are left to
#: dump_record (which refuses nesting past MAX_DEPTH).
_QUICK_DEPTH = 16


def _is_json(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` is plain JSON made of builtin types only: what cattrs hands to the
    encoder unchanged (a tuple, a set or an attrs object would be converted first)."""
    kind = type(value)
    if kind is dict:
        return depth < _QUICK_DEPTH and all(
            _is_text(k) and _is_json(v, depth + 1) for k, v in value.items()
        )
    if kind is list:
        return depth < _QUICK_DEPTH and all(_is_json(v, depth + 1) for v in value)
    return _is_plain(value)


def _is_plain(value: Any) -> bool:
    check = _EXACT.get(type(value))
    return value is None or (check is not None and check(value))


def load_record(line: str | bytes, *, where: str = "record") -> Record:
    """Parse one line written by :func:`dump_record`.

    Reading is as strict as writing: a line that holds ``NaN``, an infinity (or a number too
    large for a float), text that is not Unicode, or nesting too deep to parse is refused.

    Raises:
        SessionFormatError: the line is not JSON, or not a valid record; the message says where.
    """
    return structure_record(parse_line(line, where=where), where=where)


def parse_line(line: str | bytes, *, where: str = "record") -> Any:
    """The JSON value of one stored line, refused as :func:`load_record` says.

    Raises:
        SessionFormatError: naming ``where`` and the problem.
    """
    try:
        # Strict: json.loads would let UTF-8-encoded surrogates through ('surrogatepass').
        text = line.decode("utf-8") if isinstance(line, bytes) else line
    except UnicodeDecodeError as exc:
        raise SessionFormatError(f"{where} is not UTF-8 text: {exc}") from None
    try:
        data = _strict_decode(text)
    except RecursionError:
        raise SessionFormatError(f"{where} is nested too deep to be a record") from None
    except ValueError as exc:  # JSONDecodeError, and the hooks'
        raise SessionFormatError(f"{where} is not valid JSON: {exc}") from exc
    if _too_deep(text, data):
        raise SessionFormatError(f"{where} nests deeper than {MAX_DEPTH} levels")
    # The substring tests first: most lines have no escape and no non-ASCII text at all.
    suspect = ("\\u" in text and _ESCAPED_SURROGATE.search(text) is not None) or (
        not text.isascii() and _SURROGATE.search(text) is not None
    )
    if suspect:
        # Invariant: a valid pair of escapes decodes to one character, so any surrogate left
        # in a string is a lone one.
        place = _where_surrogate(data)
        if place is not None:
            raise SessionFormatError(
                f"{where} holds text that is not Unicode (a lone surrogate) at {place}"
            )
    return data


_SURROGATE = re.compile("[\ud800-\udfff]")
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")


#: The deepest nesting of lists and dicts a record may hold, written or read.
MAX_DEPTH = 100


def _too_deep(text: str, value: Any) -> bool:
    # Invariant: nesting N deep needs N brackets, so fewer brackets need no walk.
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return False
    todo: list[tuple[Any, int]] = [(value, 0)]
    while todo:
        item, depth = todo.pop()
        if isinstance(item, dict | list):
            if depth >= MAX_DEPTH:
                return True
            todo.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict) else item))
    return False


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is too large for a float")
    return value


# Built once: json.dumps/json.loads with options build an encoder/decoder per call (every
# append dumps its record, a resume parses every line).
_encode = json.JSONEncoder(separators=(",", ":"), allow_nan=False, ensure_ascii=False).encode
_strict_decode = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite_float).decode


def _where_surrogate(value: Any) -> str | None:
    """The path of the first string (or key) holding a surrogate, or ``None``."""
    # Iterative, so a deep value cannot exhaust the stack. (value, path)
    todo: list[tuple[Any, str]] = [(value, "")]
    while todo:
        item, path = todo.pop()
        if isinstance(item, str):
            if not item.isascii() and _SURROGATE.search(item):
                return path or "the top"
        elif isinstance(item, list):
            todo.extend((v, f"{path}[{i}]") for i, v in reversed(list(enumerate(item))))
        elif isinstance(item, dict):
            for key, v in reversed(list(item.items())):
                if not key.isascii() and _SURROGATE.search(key):
                    return f"a key of {path or 'the record'}"
                todo.append((v, f"{path}.{key}" if path else key))
    return None
