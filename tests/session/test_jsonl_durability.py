"""JSONL: what a flush counts as durable (a gap the mutation run found, mutants/)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio
import trio.testing

from trio_agents.kernel import open_root
from trio_agents.session import AssistantMessage, JsonlStore


async def inline(fn: Callable[[], Any]) -> Any:
    """A worker-thread stand-in that runs the batch in the trio thread (deterministic)."""
    await trio.lowlevel.checkpoint()
    return fn()


@asynccontextmanager
async def running(store: JsonlStore) -> AsyncIterator[JsonlStore]:
    store._run_sync = inline
    async with open_root() as root:
        await root.plugin(store)
        yield store


async def test_a_flush_fsyncs_the_record_the_background_writer_only_wrote(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A record written in the background but not fsynced is not durable yet: the next flush
    syncs it, even when it is the only one (mutant jsonl-sync-skips)."""
    async with running(JsonlStore(tmp_path, flush_interval=0.05)) as store:
        session = store.prepare("s")
        await store.enter(session)
        session.append(AssistantMessage(turn_id="t", content="first"))
        await store.flush(session)
        syncs = store.statistics().sync_batches
        session.append(AssistantMessage(turn_id="t", content="second"))
        await trio.sleep(1)  # written in the background, not fsynced
        assert store.statistics().sync_batches == syncs
        assert session.statistics().flushed_seq == session.last_seq - 1
        await store.flush(session)
        assert session.statistics().flushed_seq == session.last_seq
        assert store.statistics().sync_batches == syncs + 1
