"""JsonlStore flushes per second with many sessions flushing at once, against serial fsyncs.

``SESSIONS`` live sessions each append one record and ``await store.flush(session)``, again
and again, all concurrently: the store's group commit gathers the flushes that arrive while a
batch is in flight into the next batch and writes and fsyncs every dirty file in one
worker-thread round trip. The floor is the least a program can do for the same durability by
hand: for every flush, ``os.write`` of the same record line to an already open file followed by
``os.fsync``, done serially for all sessions and rounds inside one worker thread (so it pays no
event-loop or thread hand-off at all). Both write to files in one temporary directory on the
same disk in the same run. fsync costs vary by orders of magnitude between disks (tmpfs, SSD,
network volumes), so the floor's own rate is printed too: read the ratio against it. Each
figure is the best of several rounds, run interleaved.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import trio

import trio_agents as ta
from trio_agents.kernel import open_root
from trio_agents.session import Session, UserMessage, dump_record

from ._common import line

ROUNDS = 3
SESSIONS = 64
FLUSHES = 20  # per session


def _record(session: int, flush: int) -> UserMessage:
    return UserMessage(
        message_id=f"m-{flush}", content=f"message {flush} of session {session}", turn_id="t-1"
    )


def _serial_fsyncs(directory: Path, sessions: int, flushes: int) -> float:
    directory.mkdir()
    fds = [
        os.open(directory / f"raw-{i}.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        for i in range(sessions)
    ]
    try:
        for fd in fds:  # the files exist with a header line, untimed (as on the store's side)
            os.write(fd, b'{"format":"raw"}\n')
            os.fsync(fd)
        start = time.perf_counter()
        for k in range(flushes):
            for i, fd in enumerate(fds):
                os.write(fd, (dump_record(_record(i, k)) + "\n").encode())
                os.fsync(fd)
        return time.perf_counter() - start
    finally:
        for fd in fds:
            os.close(fd)


async def raw_floor(directory: Path, sessions: int, flushes: int) -> float:
    """Seconds for ``sessions * flushes`` serial write + fsync pairs in one worker thread."""
    seconds: float = await trio.to_thread.run_sync(_serial_fsyncs, directory, sessions, flushes)
    return seconds


async def _flusher(store: ta.JsonlStore, session: Session, index: int, flushes: int) -> None:
    for k in range(flushes):
        session.append(_record(index, k))
        await store.flush(session)


async def store_flushes(directory: Path, sessions: int, flushes: int) -> tuple[float, int]:
    """Seconds for ``sessions`` tasks each doing ``flushes`` append + flush, and the batches."""
    store = ta.JsonlStore(directory, flush_interval=0.05)
    async with open_root() as root:
        fiber = await root.plugin(store)
        live = [store.prepare() for _ in range(sessions)]
        for session in live:
            await store.enter(session)
        async with trio.open_nursery() as nursery:  # create the files, untimed
            for session in live:
                nursery.start_soon(store.flush, session)
        batches = store.statistics().sync_batches
        start = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for i, session in enumerate(live):
                nursery.start_soon(_flusher, store, session, i, flushes)
        elapsed = time.perf_counter() - start
        batches = store.statistics().sync_batches - batches
        await fiber.dispose()
    return elapsed, batches


async def measure() -> dict[str, float]:
    """Best-of-``ROUNDS`` flush rates of both sides, the cost ratio and flushes per batch."""
    raw = store = float("inf")
    batches = 0
    with tempfile.TemporaryDirectory(prefix="trio-agents-bench-") as tmp:
        for n in range(ROUNDS):
            raw = min(raw, await raw_floor(Path(tmp, f"raw-{n}"), SESSIONS, FLUSHES))
            seconds, used = await store_flushes(Path(tmp, f"store-{n}"), SESSIONS, FLUSHES)
            if seconds < store:
                store, batches = seconds, used
    total = SESSIONS * FLUSHES
    return {
        "raw": total / raw,
        "store": total / store,
        "ratio": store / raw,
        "per_batch": total / max(batches, 1),
    }


def main() -> None:
    """Measure and print."""
    r = trio.run(measure)
    print(
        f"JsonlStore flush, {SESSIONS} sessions flushing concurrently "
        f"(best of {ROUNDS} x {SESSIONS * FLUSHES:,} flushes, {tempfile.gettempdir()}):"
    )
    print(line("floor (serial os.write + os.fsync, one thread):", r["raw"]))
    print(line("trio_agents JsonlStore (append + flush, group commit):", r["store"]))
    print(f"  group commit: {r['per_batch']:.1f} flushes per sync batch")
    print(f"  ratio: a flush costs {r['ratio']:.2f}x the floor")


if __name__ == "__main__":
    main()
