"""Round trips to PostgreSQL, counted from libpq's own protocol trace.

A process calls :func:`trace_connections` with a directory: every psycopg connection it opens
from then on writes libpq's trace (``PQtrace``, every protocol message with its time) to a
file of its own there. :func:`read_traces` reads the files back as :class:`Trip` rows.

Rules:
- A round trip is a message that makes the client wait for the server's ``ReadyForQuery``: a
  simple ``Query``, or a ``Sync`` (which ends whatever extended-protocol messages, a whole
  pipeline, came before it). Its statement is every statement sent since the previous round
  trip, joined with ``" ; "``; its time is the time it was sent.
- A ``NotificationResponse`` is not a round trip (the server pushes it); it is a row with
  ``notification=True`` and its channel as the statement.
- Counting is exact and does not depend on the machine's load; tracing slows the process, so
  it is for a profile run, never for a timed one.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import attrs

__all__ = ["Trip", "read_traces", "trace_connections"]

_counter = itertools.count()


def trace_connections(directory: Path | None) -> None:
    """Trace every psycopg connection opened from now on into ``directory`` (one file each);
    ``None`` stops tracing new ones."""
    import psycopg
    from psycopg import pq

    original = getattr(psycopg, "_untraced_connect", psycopg.connect)
    psycopg._untraced_connect = original  # type: ignore[attr-defined]
    if directory is None:
        psycopg.connect = original
        return
    directory.mkdir(parents=True, exist_ok=True)

    def connect(*args: Any, **kwargs: Any) -> Any:
        conn = original(*args, **kwargs)
        path = directory / f"{os.getpid()}-{next(_counter)}.trace"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        conn.pgconn.trace(fd)
        conn.pgconn.set_trace_flags(pq.Trace.REGRESS_MODE)
        close = conn.close

        def untraced_close() -> None:
            # Invariant: libpq's trace is a buffered FILE that closing the connection does not
            # flush; untrace does.
            if not conn.closed:
                conn.pgconn.untrace()
            close()

        conn.close = untraced_close  # type: ignore[method-assign]
        return conn

    psycopg.connect = connect


@attrs.frozen
class Trip:
    """One round trip (or one notification received) of one connection."""

    at: float
    statement: str
    notification: bool = False


_STAMP = re.compile(r"^\d{4}-\d\d-\d\d ")


def _messages(path: Path) -> Iterator[list[str]]:
    """The trace's messages, ``[time, side, length, kind, text]`` (a statement's newlines make
    a message span lines)."""
    message: list[str] | None = None
    for raw in path.read_text(errors="replace").splitlines():
        if _STAMP.match(raw):
            if message is not None:
                yield message
            message = raw.split("\t", 4)
        elif message is not None:
            message[-1] += "\n" + raw
    if message is not None:
        yield message


def _quoted(text: str) -> tuple[str, str]:
    """A ``Parse``'s statement name and statement (or a notification's channel and payload)."""
    name, _, rest = text.partition('"')[2].partition('"')
    second = rest.partition('"')[2].rpartition('"')[0]
    return name, second


def _trips(path: Path) -> Iterator[Trip]:
    sent: list[str] = []
    prepared: dict[str, str] = {}
    for message in _messages(path):
        if len(message) < 4:
            continue
        stamp, side, kind = message[0], message[1], message[3]
        text = message[4].strip() if len(message) > 4 else ""
        if side == "B" and kind == "NotificationResponse":
            yield Trip(_seconds(stamp), _quoted(text)[0], notification=True)
        if side != "F":
            continue
        if kind == "Parse":
            name, statement = _quoted(text)
            prepared[name] = statement
            sent.append(statement)
        elif kind == "Bind":
            parts = text.split('"')  # "portal" "statement" ...: names hold no quotes
            name = parts[3] if len(parts) > 3 else ""
            if name:  # a prepared statement's execution (an unnamed one was just parsed)
                sent.append(prepared.get(name, "?"))
        elif kind == "Query":
            yield Trip(_seconds(stamp), text.strip('"'))
            sent = []
        elif kind == "Sync":
            yield Trip(_seconds(stamp), " ; ".join(sent) or "(sync)")
            sent = []


def _seconds(stamp: str) -> float:
    return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S.%f").timestamp()


def read_traces(directory: Path) -> list[Trip]:
    """Every round trip and notification traced in ``directory``, in time order."""
    return sorted(
        (trip for path in sorted(directory.glob("*.trace")) for trip in _trips(path)),
        key=lambda trip: trip.at,
    )
