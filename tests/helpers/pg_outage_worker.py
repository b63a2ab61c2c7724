"""A worker for the PostgreSQL outage test: an embedded program with Python's default logging.

Usage: ``python pg_outage_worker.py DSN FLUSHES``. It creates an agent on a ``PostgresStore``,
prints ``ready`` once its first turn is durable, waits for a line on stdin (the test stops the
server meanwhile), then prompts and flushes ``FLUSHES`` times, each flush failing while the
server is down, and prints ``failed N`` with how many flushes raised. Its stderr is what the
default logging printed.
"""

from __future__ import annotations

import sys

import trio

import trio_agents.agent as ag
from trio_agents.session import PostgresStore, SessionWriteError


async def main(dsn: str, flushes: int) -> None:
    store = PostgresStore(dsn, flush_interval=0.01)
    failed = 0
    try:
        async with ag.open_runtime(store=store) as root:
            agent = (await root.agents.create(session_id="outage")).agent
            agent.prompt("before")
            await agent.when_idle()
            await store.flush(agent.session)
            print("ready", flush=True)
            await trio.to_thread.run_sync(sys.stdin.readline)
            for n in range(flushes):
                agent.prompt(f"during {n}")
                await agent.when_idle()
                try:
                    await store.flush(agent.session)
                except SessionWriteError:
                    failed += 1
            print(f"failed {failed}", flush=True)
    except* SessionWriteError:
        pass  # the final flush of the teardown fails too: the server is gone


if __name__ == "__main__":
    trio.run(main, sys.argv[1], int(sys.argv[2]))
