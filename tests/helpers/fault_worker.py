"""A process that fills its own file-size limit while flushing a session (``RLIMIT_FSIZE``:
the kernel refuses writes past it with EFBIG, a real fault, as a full disk would).

Usage: ``python fault_worker.py STORE_DIR``. Prints one line per step: ``flushed N`` after a
good flush of N records, ``failed: MESSAGE`` for a flush that raised.
"""

from __future__ import annotations

import resource
import signal
import sys

import trio

import trio_agents as ta
from trio_agents.session import JsonlStore, SessionWriteError, UserMessage


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def main(directory: str) -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a killed process
    store = JsonlStore(directory)
    async with ta.open_runtime(store=store):
        session = store.prepare("full")
        await store.enter(session)
        n = 0

        def add(count: int, size: int) -> None:
            nonlocal n
            for _ in range(count):
                n += 1
                session.append(UserMessage(message_id=f"m{n}", content="x" * size, turn_id="t"))

        add(10, 100)
        await store.flush(session)
        say(f"flushed {len(session.records)}")
        # A bound a little past the file: the next lines fit in part, then EFBIG.
        size = (await trio.Path(store.path_of("full")).stat()).st_size
        _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (size + 500, hard))
        add(10, 100)  # written in the background first, then flushed: both fail
        for _ in range(2):
            try:
                await store.flush(session)
            except SessionWriteError as exc:
                say(f"failed: {exc}")
                say(f"size {(await trio.Path(store.path_of('full')).stat()).st_size}")
        resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))  # the disk has room again
        add(5, 100)
        await store.flush(session)
        say(f"flushed {len(session.records)}")
        await store.detach(session)


if __name__ == "__main__":
    trio.run(main, sys.argv[1])
