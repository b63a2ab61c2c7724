"""Usage mistakes as one line: the argument parser of the command and its "did you mean".

Rules:
- A usage mistake (an unknown option or command, a missing argument) prints one line on
  stderr, ``trio-agents: error: ...``, and exits with status 1, like every other mistake.
- When one option or command of the subcommand in use is close to a word the user typed
  (:func:`difflib.get_close_matches`), the line ends with ``did you mean --model?``.
- Options are never abbreviated (``allow_abbrev=False`` on every parser): ``--stor`` is a
  mistake with a "did you mean --store?", not ``--store``.
- ``--help`` and ``--version`` still print their text and exit 0.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Iterator, Sequence
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _distribution_version
from typing import Any, NoReturn


class UsageExit(SystemExit):
    """Raised by :meth:`Parser.error` after its line is printed (status 1)."""


def version() -> str:
    """The installed distribution's version (``unknown`` when run from a bare checkout)."""
    try:
        return _distribution_version("trio-agents")
    except PackageNotFoundError:
        return "unknown"


def _words(parser: argparse.ArgumentParser) -> Iterator[str]:
    """The option strings and subcommand names ``parser`` accepts."""
    for action in parser._actions:
        yield from action.option_strings
        if isinstance(action, argparse._SubParsersAction):
            yield from action.choices


def _chosen(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.ArgumentParser:
    """The innermost subcommand parser that ``argv`` names (``parser`` itself if none)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for index, word in enumerate(argv):
                sub = action.choices.get(word)
                if sub is not None:
                    return _chosen(sub, argv[index + 1 :])
    return parser


def suggestion(parser: argparse.ArgumentParser, argv: Sequence[str], message: str) -> str | None:
    """The one option or command close to a word of ``argv`` that ``message`` complains of.

    The words that count are those the message quotes (an unknown option, an invalid choice)
    and any option the subcommand does not know (argparse may complain of a missing argument
    first); only the options and commands of the subcommand ``argv`` chose are candidates.
    """
    where = _chosen(parser, argv)
    known = sorted(set(_words(where)))
    for word in argv:
        bare = word.partition("=")[0]
        if bare in known or not (bare in message or bare.startswith("--")):
            continue
        close = difflib.get_close_matches(bare, known, n=1, cutoff=0.6)
        if close:
            return close[0]
    return None


class Parser(argparse.ArgumentParser):
    """An :class:`argparse.ArgumentParser` whose mistakes are one line and status 1."""

    argv: Sequence[str] = ()
    top: argparse.ArgumentParser | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Invariant: no abbreviations: ``--stor ./s`` is an unknown option, never ``--store``.
        # Subcommand parsers are made by this class too (``parser_class`` defaults to it).
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        top = self.top or self
        hint = suggestion(top, self.argv, message)
        line = f"trio-agents: error: {message}"
        prog = _chosen(top, self.argv).prog
        line += f"; did you mean {hint}?" if hint else f"; see '{prog} --help'"
        print(line, file=sys.stderr)
        raise UsageExit(1)

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        argv = list(sys.argv[1:] if args is None else args)
        for parser in _all(self):
            parser.argv = argv
            parser.top = self
        return super().parse_args(argv, namespace)


def _all(parser: argparse.ArgumentParser) -> Iterator[Parser]:
    if isinstance(parser, Parser):
        yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _all(sub)
