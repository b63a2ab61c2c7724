"""A client process of the chaos test: submits the prompts of its sessions and awaits them.

Usage: ``python workers_chaos_client.py DSN CLIENT SESSIONS PROMPTS``: sessions
``c<CLIENT>-s<N>`` for N < SESSIONS, each with PROMPTS prompts submitted in order (ids
``c<CLIENT>-s<N>-p<K>``, text ``c<CLIENT>-s<N>:<K>``); every answer is awaited. Prints
``submitted`` once all are queued, then ``done <completed> <failed>`` and exits 0.
"""

from __future__ import annotations

import sys

import trio

from trio_agents.workers import AgentTemplate, PromptFailedError, Remote, open_remote


async def session(remote: Remote, client: int, n: int, prompts: int, counts: list[int]) -> None:
    session_id = f"c{client}-s{n}"
    submitted = []
    for k in range(prompts):
        submitted.append(
            await remote.submit(
                session_id,
                f"{session_id}:{k}",
                prompt_id=f"{session_id}-p{k}",
                agent=AgentTemplate(),
                retries=2,
            )
        )
    for prompt in submitted:
        try:
            await prompt.answer()
            counts[0] += 1
        except PromptFailedError:
            counts[1] += 1


async def main(dsn: str, client: int, sessions: int, prompts: int) -> None:
    counts = [0, 0]
    async with open_remote(dsn) as remote, trio.open_nursery() as nursery:
        for n in range(sessions):
            nursery.start_soon(session, remote, client, n, prompts, counts)
    print(f"done {counts[0]} {counts[1]}", flush=True)


if __name__ == "__main__":
    trio.run(main, sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
