"""``@tool``: a :class:`Tool` from an async function, its arguments from its typed signature.

::

    @tool
    async def read_file(ctx: ToolContext, path: str, limit: int = 100) -> str:
        '''Read a text file.

        Args:
            path: the file to read.
            limit: at most this many lines.
        '''

Rules:
- The parameters (after the context) become the keyword-only fields of an attrs class made once,
  when the tool is made. The schema the model sees and the structuring of what it sends are
  that class's (:mod:`._tool_schema`): the signature form and the ``params=`` form of a tool
  share one policy, and a signature with no JSON schema is refused at decoration time.
- The first parameter is the :class:`ToolContext` when it is annotated so (or is named ``ctx``
  without an annotation); it is not an argument. A tool may omit it.
- Every argument parameter is annotated and can be passed by keyword: no ``*args``,
  ``**kwargs`` or positional-only parameters.
- The docstring's text before its first section is the description; its ``Args:`` section
  describes the parameters (Google style; deeper-indented lines continue an entry).
- ``@tool(params=Args)`` keeps the attrs-class form: the function gets one ``Args`` instance.
"""

from __future__ import annotations

import copy
import functools
import inspect
import re
import typing
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias, TypeVar, overload

import attrs

from ._tool_schema import describe_params
from ._tools import Tool, ToolContext

P = TypeVar("P")

#: What ``@tool`` decorates: an async function of the context (optional) and its arguments.
AnyToolFunction: TypeAlias = Callable[..., Awaitable[Any]]

_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Returns?|Yields?|Raises|Notes?|Examples?|Warnings?|See Also)"
    r":\s*$"
)
_ENTRY = re.compile(r"^(?P<indent>\s+)\**(?P<name>\w+)\s*(\([^)]*\))?\s*:\s*(?P<text>.*)$")
_JSON_SCALARS = (str, bool, int, float, type(None))


class _Unset:
    pass


_UNSET: Any = _Unset()


@overload
def tool(fn: AnyToolFunction, /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    params: type[P],
    ask: bool = False,
) -> Callable[[Callable[[ToolContext[Any], P], Awaitable[Any]]], Tool]: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    params: None,
    ask: bool = False,
) -> Callable[[Callable[[ToolContext[Any], None], Awaitable[Any]]], Tool]: ...


@overload
def tool(
    *, name: str | None = None, description: str | None = None, ask: bool = False
) -> Callable[[AnyToolFunction], Tool]: ...


def tool(
    fn: AnyToolFunction | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    params: Any = _UNSET,
    ask: bool = False,
) -> Tool | Callable[[AnyToolFunction], Tool]:
    """Make a :class:`Tool` of an async function: ``@tool`` or ``@tool(name=..., ...)``.

    ``name`` defaults to the function's name and ``description`` to its docstring's text (its
    ``Args:`` section documents the parameters for the model). With ``params=Args`` (an attrs
    class, or ``None`` for no arguments) the function is called as ``fn(ctx, args)``; without
    it, the arguments come from the function's typed signature and are passed by keyword.
    ``ask=True`` marks the tool: every call needs approval (see :doc:`/tools`).

    A tool returns a ``str``, a :class:`ToolResult`, or a JSON value or attrs instance (which
    the model reads as JSON).

    Raises:
        TypeError: the function is not async, or a parameter cannot be an argument (no
            annotation, variadic, positional-only, or a type with no JSON schema).
        ValueError: the name is not a valid tool name.
    """

    def decorate(fn: AnyToolFunction) -> Tool:
        tool_name = name if name is not None else getattr(fn, "__name__", repr(fn))
        if not inspect.iscoroutinefunction(fn):
            raise TypeError(f"tool {tool_name!r} must be an async function (async def); got {fn!r}")
        text, documented = _read_docstring(inspect.getdoc(fn) or "")
        about = description if description is not None else text
        if params is not _UNSET:
            return Tool(name=tool_name, description=about, params=params, fn=fn, ask=ask)
        arguments, takes_context = _arguments_class(tool_name, fn, documented)
        return Tool(
            name=tool_name,
            description=about,
            params=arguments,
            fn=_caller(fn, takes_context),
            ask=ask,
        )

    return decorate if fn is None else decorate(fn)


def _caller(fn: AnyToolFunction, takes_context: bool) -> Callable[[ToolContext, Any], Any]:
    """The ``(ctx, args)`` function of the Tool: ``fn`` called with the fields as keywords."""

    @functools.wraps(fn)
    async def call(ctx: ToolContext, args: Any) -> Any:
        values = (
            {}
            if args is None
            else {f.name: getattr(args, f.name) for f in attrs.fields(type(args))}
        )
        return await (fn(ctx, **values) if takes_context else fn(**values))

    return call


def _arguments_class(
    tool_name: str, fn: AnyToolFunction, documented: dict[str, str]
) -> tuple[type | None, bool]:
    """The attrs class of ``fn``'s argument parameters (``None`` if it has none), and whether
    ``fn`` takes the context first."""
    try:
        hints = typing.get_type_hints(fn)
    except Exception as exc:
        raise TypeError(
            f"tool {tool_name!r}: cannot resolve its annotations ({type(exc).__name__}: {exc}); "
            f"the types must be importable from the function's module"
        ) from exc
    parameters = list(inspect.signature(fn).parameters.values())
    takes_context = bool(parameters) and _is_context(parameters[0], hints)
    fields: dict[str, Any] = {}
    for parameter in parameters[1:] if takes_context else parameters:
        fields[parameter.name] = _field(tool_name, parameter, hints, documented)
    if not fields:
        return None, takes_context
    cls = attrs.make_class(fn.__name__, fields, frozen=True)
    cls.__qualname__ = cls.__name__ = fn.__name__
    describe_params(cls)  # a type with no JSON schema is refused now, not at the first call
    return cls, takes_context


def _is_context(parameter: inspect.Parameter, hints: dict[str, Any]) -> bool:
    annotation = hints.get(parameter.name, inspect.Parameter.empty)
    # ``ToolContext[Deps]`` is an alias whose origin is the class.
    if annotation is ToolContext or typing.get_origin(annotation) is ToolContext:
        return True
    return annotation is inspect.Parameter.empty and parameter.name == "ctx"


def _field(
    tool_name: str,
    parameter: inspect.Parameter,
    hints: dict[str, Any],
    documented: dict[str, str],
) -> Any:
    where = f"tool {tool_name!r}: parameter"
    if parameter.kind is parameter.VAR_POSITIONAL:
        raise TypeError(f"{where} *{parameter.name} cannot be an argument; name each argument")
    if parameter.kind is parameter.VAR_KEYWORD:
        raise TypeError(f"{where} **{parameter.name} cannot be an argument; name each argument")
    if parameter.kind is parameter.POSITIONAL_ONLY:
        raise TypeError(f"{where} {parameter.name!r} is positional-only; arguments go by name")
    if parameter.name not in hints:
        raise TypeError(f"{where} {parameter.name!r} has no type annotation")
    metadata = {"description": documented[parameter.name]} if parameter.name in documented else {}
    return attrs.field(
        type=hints[parameter.name],
        default=_default(parameter.default),
        kw_only=True,
        metadata=metadata,
    )


def _default(value: Any) -> Any:
    if value is inspect.Parameter.empty:
        return attrs.NOTHING
    if isinstance(value, _JSON_SCALARS):
        return value
    # A mutable default (a list) is copied for each call, as if it were written inline.
    return attrs.Factory(lambda: copy.deepcopy(value))


def _read_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The text before the first section, and the ``Args:`` descriptions by parameter name."""
    lines = doc.splitlines()
    starts = [i for i, line in enumerate(lines) if _SECTION.match(line)]
    text = "\n".join(lines[: starts[0]] if starts else lines).strip()
    documented: dict[str, str] = {}
    for start in starts:
        if _SECTION.match(lines[start]).group(1) in ("Args", "Arguments", "Parameters"):  # type: ignore[union-attr]
            documented.update(_entries(lines[start + 1 :]))
    return text, documented


def _entries(lines: list[str]) -> dict[str, str]:
    entries: dict[str, list[str]] = {}
    indent: int | None = None
    current: list[str] | None = None
    for line in lines:
        if not line.strip():
            continue
        width = len(line) - len(line.lstrip())
        if width == 0:
            break  # the section ended
        match = _ENTRY.match(line)
        if match and (indent is None or width == indent):
            indent = width
            current = entries.setdefault(match["name"], [])
            current.append(match["text"].strip())
        elif current is not None and indent is not None and width > indent:
            current.append(line.strip())
    return {name: " ".join(part for part in parts if part) for name, parts in entries.items()}
