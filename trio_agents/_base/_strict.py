"""One strict structuring policy: data is checked as JSON types, never coerced.

cattrs' defaults call ``str(3)``, ``int("5")`` and ``list("bash")``; for data that comes from a
user or a model (a plugin config, a TOML file, tool arguments) that hides the mistake. The
policy here is what every converter of the package that reads such data uses.

Rules:
- ``str`` takes only a string, ``bool`` only a boolean. ``int`` takes an integer that is not a
  boolean, or a float with an integral value (JSON has one number type: ``2.0`` is an
  integer); ``float`` takes any number but a boolean. A subclass target (a ``StrEnum``, an
  ``IntEnum``) is built from the checked value.
- ``list[X]``, ``tuple[X, ...]`` and ``Sequence[X]`` take only a list or a tuple (``"bash"`` is
  never ``["b", "a", "s", "h"]``); ``dict[K, V]`` and ``Mapping[K, V]`` only a mapping.
- A ``Literal`` takes a value equal to one of its members *and of the same type*
  (``1 == True``, but the sender wrote one or the other).
- Extra keys are refused (unless ``forbid_extra_keys=False``).
- An attrs class's validators count as problems of their fields: when one refuses a value,
  every field validator is asked, and each refusal is a problem at its field's path
  (``agents[0].max_steps``), beside the type problems of the other fields. A class that
  refuses in ``__attrs_post_init__`` (a rule across fields) is one problem at its own path.
- Every problem is collected; :meth:`StrictConverter.problems` lists each with its path, in the
  converter's ``Wording`` (``_wording``: a config file says ``int``, a model reads ``an
  integer``, a stored session ``an integer`` with Python's type names).
"""

from __future__ import annotations

import collections.abc
from collections.abc import Callable, Mapping
from typing import Any, Literal, final, get_args, get_origin

import attrs
import cattrs
import cattrs.cols
from cattrs.errors import AttributeValidationNote, ClassValidationError
from cattrs.v import format_exception

from ._wording import StrictTypeError, Wording

_ARRAYS = (list, tuple, collections.abc.Sequence, collections.abc.MutableSequence)
_MAPPINGS = (dict, collections.abc.Mapping, collections.abc.MutableMapping)


def _scalar_hooks(wording: Wording) -> dict[type, Callable[[object, Any], object]]:
    def typed(kind: type, target: Any, value: object) -> object:
        # A subclass target is an enum such as a StrEnum (a str to isinstance).
        return value if target is kind else target(value)

    # Each hook tests the common case first (the exact type for the exact target): a resume
    # structures every field of every stored record.
    def structure_str(value: object, target: Any) -> object:
        if type(value) is str and target is str:
            return value
        if isinstance(value, str):
            return typed(str, target, value)
        raise wording.mismatch("str", value)

    def structure_bool(value: object, _: Any) -> object:
        if isinstance(value, bool):
            return value
        raise wording.mismatch("bool", value)

    def structure_int(value: object, target: Any) -> object:
        if type(value) is int and target is int:
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return typed(int, target, value)
        if isinstance(value, float) and value.is_integer():
            return typed(int, target, int(value))
        raise wording.mismatch("int", value)

    def structure_float(value: object, target: Any) -> object:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return typed(float, target, float(value))
        raise wording.mismatch("float", value)

    return {str: structure_str, bool: structure_bool, int: structure_int, float: structure_float}


def _is_array(tp: Any) -> bool:
    origin = get_origin(tp)
    if origin is tuple:
        args = get_args(tp)
        return len(args) == 2 and args[1] is ...
    return origin in _ARRAYS


def _is_mapping(tp: Any) -> bool:
    return tp in _MAPPINGS or get_origin(tp) in _MAPPINGS


def _is_literal(tp: Any) -> bool:
    return get_origin(tp) is Literal


#: The note that marks a field validator's refusal: its message is the whole problem.
_REFUSED = "refused by the field's validator"


def _noted(exc: BaseException) -> bool:
    """Whether cattrs noted ``exc`` with the attribute it is a problem of."""
    return any(isinstance(n, AttributeValidationNote) for n in getattr(exc, "__notes__", ()))


@final
class StrictConverter(cattrs.Converter):
    """A cattrs converter with the strict policy of this module.

    Args:
        forbid_extra_keys: refuse keys an attrs class does not declare.
        wording: how :meth:`problems` phrases what was expected and got;
            :meth:`Wording.config` (the default) or :meth:`Wording.json`.
    """

    def __init__(self, *, forbid_extra_keys: bool = True, wording: Wording | None = None):
        super().__init__(forbid_extra_keys=forbid_extra_keys)
        self.wording = Wording.config() if wording is None else wording
        for kind, hook in _scalar_hooks(self.wording).items():
            self.register_structure_hook(kind, hook)
        self.register_structure_hook_factory(_is_array, self._array_hook)
        self.register_structure_hook_factory(_is_mapping, self._mapping_hook)
        self.register_structure_hook_factory(_is_literal, self._literal_hook)
        self.register_structure_hook_factory(attrs.has, self._attrs_hook)

    def _attrs_hook(self, cl: Any) -> Callable[[object, Any], object]:
        inner = self.gen_structure_attrs_fromdict(cl)
        checked = [f for f in attrs.fields(cl) if f.validator is not None and f.init]

        def structure(value: object, tp: Any) -> object:
            try:
                return inner(value, tp)  # type: ignore[arg-type]
            except ClassValidationError as group:
                found = self._refusals(cl, checked, value)
                if not found:
                    raise
                # The fields' own problems (noted with their attribute), then each refusal;
                # a refusal of the whole class (post-init) is left out: it may follow from
                # the refused fields.
                typed = [e for e in group.exceptions if _noted(e)]
                raise ClassValidationError(group.message, [*typed, *found], cl) from None

        return structure

    def _refusals(
        self, cl: Any, checked: list[attrs.Attribute[Any]], value: object
    ) -> list[Exception]:
        """The refusal of each field validator that refuses its value in ``value``."""
        if not isinstance(value, Mapping):
            return []
        found: list[Exception] = []
        for field in checked:
            key = field.alias or field.name
            if key not in value or field.type is None:
                continue  # a default: the class's own choice
            try:
                given = self.structure(value[key], field.type)
                converter: Any = field.converter
                if converter is not None:
                    given = converter(given)
            except Exception:  # a type problem: cattrs reported it with its path
                continue
            try:
                field.validator(None, field, given)  # type: ignore[misc]
            except (ValueError, TypeError) as exc:
                note = AttributeValidationNote(
                    f"Structuring class {cl.__qualname__} @ attribute {key}", key, field.type
                )
                exc.__notes__ = [*getattr(exc, "__notes__", []), _REFUSED, note]
                found.append(exc)
            except Exception:  # a validator that needs the instance: the class refusal stands
                continue
        return found

    def _array_hook(self, tp: Any) -> Callable[[object, Any], object]:
        if get_origin(tp) is tuple:
            inner = cattrs.cols.homogenous_tuple_structure_factory(tp, self)
        else:
            inner = cattrs.cols.list_structure_factory(tp, self)

        def structure(value: object, _: Any) -> object:
            if not isinstance(value, list | tuple):
                raise self.wording.mismatch("array", value)
            return inner(value, tp)

        return structure

    def _mapping_hook(self, tp: Any) -> Callable[[object, Any], object]:
        if get_args(tp) == (str, Any):
            return self._json_object_hook
        inner = cattrs.cols.mapping_structure_factory(tp, self) if get_args(tp) else None

        def structure(value: object, _: Any) -> object:
            if not isinstance(value, Mapping):
                raise self.wording.mismatch("object", value)
            # A bare ``dict`` keeps its values as they are.
            return dict(value) if inner is None else inner(value, tp)

        return structure

    def _json_object_hook(self, value: object, _: Any) -> object:
        # ``dict[str, Any]`` (tool arguments, a stored call's arguments): a JSON object kept
        # as it is; only its keys are checked, which is all a per-key hook would do.
        if not isinstance(value, Mapping):
            raise self.wording.mismatch("object", value)
        for key in value:
            if not isinstance(key, str):
                raise self.wording.mismatch("str", key)
        return dict(value)

    def _literal_hook(self, tp: Any) -> Callable[[object, Any], object]:
        allowed = get_args(tp)
        listed = "one of " + ", ".join(repr(v) for v in allowed)

        def structure(value: object, _: Any) -> object:
            for candidate in allowed:
                if type(candidate) is type(value) and candidate == value:
                    return candidate
            raise self.wording.expected(listed, value)

        return structure

    def describe(self, exc: BaseException, type_: type | None) -> str:
        """One problem, in this converter's wording (a ``format_exception`` for cattrs)."""
        if isinstance(exc, StrictTypeError):
            return str(exc)
        if isinstance(exc, KeyError):
            return self.wording.missing
        if isinstance(exc, cattrs.ForbiddenExtraKeysError):
            return f"{self.wording.extra}: {', '.join(sorted(exc.extra_fields))}"
        detail = str(exc)
        if _REFUSED in getattr(exc, "__notes__", ()) and detail:
            return detail
        text = format_exception(exc, type_)
        # A validator's own message says more than "invalid value for type, expected X".
        if isinstance(exc, TypeError | ValueError) and detail and detail not in text:
            return f"{text}: {detail}" if text != "invalid value" else detail
        return text

    def problems(self, exc: BaseException, *, path: str = "$") -> list[str]:
        """Every problem of a failed ``structure`` call, as ``"problem @ path"`` lines."""
        return cattrs.transform_error(exc, path=path, format_exception=self.describe)
