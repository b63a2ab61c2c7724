"""Jobs that fight their supervisor (``kill -9 $PPID``, ``kill -STOP $PPID``), for the tests
of the owner's side (``tests/shell/test_owner.py``, ``tests/stress/test_supervision.py``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

DEADLINE = 30.0
NAMES = ("sh", "sleep", "double")
# Written too, so that the fixture can end a supervisor that a failing test left stopped.
SUPERVISOR = "supervisor"


def fighting(directory: Path, fight: str) -> str:
    """A job that starts a sleep and a double-forked (orphaned) sleep, writes their pids and
    its own, then runs ``fight`` against its supervisor (``$PPID``) and waits."""
    d = directory
    return (
        f"sleep 1000 & echo $! > {d}/sleep; (sleep 1000 & echo $! > {d}/double); "
        f"echo $PPID > {d}/{SUPERVISOR}; echo $$ > {d}/sh.tmp; mv {d}/sh.tmp {d}/sh; "
        f"{fight}; wait"
    )


KILL = "kill -9 $PPID"
STOP = "kill -STOP $PPID"
# A shell that ignores SIGTERM and stops its supervisor again as soon as it can.
STOP_FOR_EVER = "trap '' TERM; while kill -STOP $PPID; do :; done"


def wait_until(condition: Callable[[], bool], what: str) -> None:
    """Poll ``condition()`` (a real process's state: nothing announces it) with a deadline."""
    deadline = time.monotonic() + DEADLINE
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def job_pids(directory: Path) -> list[int]:
    """The pids the job wrote, once it wrote them all."""
    wait_until((directory / "sh").exists, "the job to start")
    return [int((directory / n).read_text()) for n in NAMES]
