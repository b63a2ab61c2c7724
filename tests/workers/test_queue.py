"""The work queue in one process: a worker (``serve_worker``) and a client (``open_remote``)
on a real throwaway PostgreSQL server."""

from __future__ import annotations

import pytest
import trio

import trio_agents as ta
from tests.helpers.workers_support import (
    DEADLINE,
    prompt_rows,
    query,
    serving,
    stored_records,
    turn_started,
    until,
)
from trio_agents.session import InboxSpliced, TurnEnded, TurnStarted, UserMessage
from trio_agents.workers import (
    AgentTemplate,
    CancelRequested,
    PromptCancelledError,
    PromptClaimed,
    PromptFailedError,
    PromptIdInUseError,
    QueueFormatError,
    WorkerDrained,
    open_remote,
    serve_worker,
)

NEW = AgentTemplate()


async def test_a_prompt_to_a_new_session_is_answered_by_a_worker(pg_dsn: str) -> None:
    """A prompt with an agent definition creates the session; the worker's answer comes back,
    and the session's records tie the turn to the prompt (claimed, queued, claimed by a turn)."""
    with trio.fail_after(DEADLINE):
        async with serving(pg_dsn, model="echo"), open_remote(pg_dsn) as remote:
            prompt = await remote.submit("s", "hello", agent=NEW)
            assert await prompt.answer() == "hello"
    records = (await stored_records(pg_dsn, ["s"]))["s"]
    kinds = [type(r) for r in records]
    at = kinds.index(PromptClaimed)
    assert kinds[at : at + 4] == [PromptClaimed, InboxSpliced, TurnStarted, UserMessage]
    claimed, queued, _, message = records[at : at + 4]
    assert isinstance(claimed, PromptClaimed)
    assert claimed.prompt_id == prompt.id
    assert isinstance(queued, InboxSpliced)
    assert isinstance(message, UserMessage)
    assert queued.message_id == message.message_id
    [row] = prompt_rows(pg_dsn)
    assert (row["state"], row["answer"], row["claim"]) == ("completed", "hello", 1)


async def test_a_prompt_submitted_while_the_worker_idles_is_woken_by_notify(pg_dsn: str) -> None:
    """With the fallback poll an hour long, a prompt submitted to an idle worker is still run
    at once: the worker is woken by the queue's NOTIFY."""
    with trio.fail_after(DEADLINE):
        async with (
            serving(pg_dsn, model="echo", poll_interval=3600),
            open_remote(pg_dsn, poll_interval=3600) as remote,
        ):
            first = await remote.submit("s", "one", agent=NEW)
            assert await first.answer() == "one"
            second = await remote.submit("s", "two")
            assert await second.answer() == "two"


async def test_submitting_one_prompt_id_twice_is_one_prompt(pg_dsn: str) -> None:
    """A retried submission (the same id, session and text) is the same prompt, run once; the
    same id with other text is refused with the fix."""
    with trio.fail_after(DEADLINE):
        async with open_remote(pg_dsn) as remote:
            first = await remote.submit("s", "hello", prompt_id="p-1", agent=NEW)
            again = await remote.submit("s", "hello", prompt_id="p-1", agent=NEW)
            assert again.id == first.id == "p-1"
            with pytest.raises(
                PromptIdInUseError, match=r"^prompt id 'p-1' was already submitted to session 's'"
            ):
                await remote.submit("s", "other", prompt_id="p-1")
            async with serving(pg_dsn, model="echo"):
                assert await again.answer() == "hello"
    assert [row["id"] for row in prompt_rows(pg_dsn)] == ["p-1"]
    records = (await stored_records(pg_dsn, ["s"]))["s"]
    assert sum(isinstance(r, TurnStarted) for r in records) == 1


async def test_a_prompt_to_a_missing_session_fails_and_says_how_to_create_it(pg_dsn: str) -> None:
    """A session that is not stored, submitted to without an agent definition, fails with
    the fix in the error."""
    with trio.fail_after(DEADLINE):
        async with serving(pg_dsn, model="echo"), open_remote(pg_dsn) as remote:
            prompt = await remote.submit("nowhere", "hello")
            with pytest.raises(
                PromptFailedError,
                match=r"^prompt p-\w+ of session 'nowhere' failed: no session 'nowhere' is "
                r"stored; submit its first prompt with an agent definition",
            ):
                await prompt.answer()


async def test_a_running_prompt_is_cancelled_by_its_worker_with_the_client_s_cause(
    pg_dsn: str,
) -> None:
    """A client's cancel reaches the worker running the turn: the turn ends cancelled with
    that cause, the request is recorded, and the client's answer raises with the cause."""
    cause = ta.UserCancel()
    with trio.fail_after(DEADLINE):
        async with serving(pg_dsn, model="echo?delay=3600"), open_remote(pg_dsn) as remote:
            prompt = await remote.submit("s", "a long one", agent=NEW)
            await turn_started(prompt)
            status = await prompt.cancel(cause)
            assert status.state == "running"
            with pytest.raises(
                PromptCancelledError, match=r"^prompt p-\w+ of session 's' was "
            ) as caught:
                await prompt.answer()
            assert caught.value.cause == cause
    records = (await stored_records(pg_dsn, ["s"]))["s"]
    [requested] = [r for r in records if isinstance(r, CancelRequested)]
    assert requested.cause == cause
    [ended] = [r for r in records if isinstance(r, TurnEnded)]
    assert (ended.stop_reason.value, ended.cause) == ("cancelled", cause)


async def test_a_queued_prompt_cancelled_before_any_worker_claims_it_never_runs(
    pg_dsn: str,
) -> None:
    """Cancelling a prompt no worker has claimed settles it at once; a worker started after
    never runs it, and runs the next prompt of the session."""
    with trio.fail_after(DEADLINE):
        async with open_remote(pg_dsn) as remote:
            dropped = await remote.submit("s", "never", agent=NEW)
            status = await dropped.cancel()
            assert (status.state, status.cause) == ("cancelled", ta.UserCancel())
            kept = await remote.submit("s", "kept", agent=NEW)
            async with serving(pg_dsn, model="echo"):
                assert await kept.answer() == "kept"
    records = (await stored_records(pg_dsn, ["s"]))["s"]
    assert [r.prompt_id for r in records if isinstance(r, PromptClaimed)] == [kept.id]


async def test_records_stream_the_prompt_s_turn_in_order(pg_dsn: str) -> None:
    """``records()`` yields the session's records from the prompt's claim to its turn's end,
    in order, then ends."""
    with trio.fail_after(DEADLINE):
        async with serving(pg_dsn, model="echo?delay=0.2"), open_remote(pg_dsn) as remote:
            await (await remote.submit("s", "before", agent=NEW)).answer()
            prompt = await remote.submit("s", "streamed")
            seen = [record async for record in prompt.records()]
    assert isinstance(seen[0], PromptClaimed)
    assert seen[0].prompt_id == prompt.id
    assert [r.seq for r in seen] == list(range(seen[0].seq, seen[0].seq + len(seen)))
    assert isinstance(seen[-1], TurnEnded)
    assert seen[-1].stop_reason.value == "completed"


async def test_a_drained_worker_hands_its_running_prompt_back_to_another(pg_dsn: str) -> None:
    """A drain past its timeout cancels the running turn with WorkerDrained (recorded), puts
    the prompt back in the queue and gives up the worker's routes and row; another worker
    runs the prompt again and answers it."""
    with trio.fail_after(DEADLINE):
        async with open_remote(pg_dsn) as remote:
            async with serving(pg_dsn, model="echo?delay=3600", drain_timeout=0.2) as slow:
                prompt = await remote.submit("s", "handed back", agent=NEW)
                await turn_started(prompt)
                slow.drain()
                await slow.wait_drained()
                assert (await prompt.status()).state == "queued"
                assert query(pg_dsn, "SELECT count(*) FROM trio_agents_routes") == [(0,)]
                assert query(pg_dsn, "SELECT id FROM trio_agents_workers") == []
                assert slow.statistics().handed_back == 1
            async with serving(pg_dsn, model="echo"):
                assert await prompt.answer() == "handed back"
    records = (await stored_records(pg_dsn, ["s"]))["s"]
    assert [r.attempt for r in records if isinstance(r, PromptClaimed)] == [1, 2]
    first, second = [r for r in records if isinstance(r, TurnEnded)]
    assert first.cause == WorkerDrained(worker=slow.id)
    assert second.stop_reason.value == "completed"


async def test_an_idle_session_is_released_with_its_route_and_lease(pg_dsn: str) -> None:
    """A session idle longer than ``idle_release`` is released: its agent disposed (the store
    lease given up) and its route freed, so any worker may take it."""
    with trio.fail_after(DEADLINE):
        async with (
            serving(pg_dsn, model="echo", idle_release=0.2) as worker,
            open_remote(pg_dsn) as remote,
        ):
            await (await remote.submit("s", "hello", agent=NEW)).answer()
            await until(lambda: worker.statistics().released == 1)
            assert worker.statistics().held == 0
            assert query(pg_dsn, "SELECT count(*) FROM trio_agents_routes") == [(0,)]
            assert query(pg_dsn, "SELECT owner FROM trio_agents_sessions") == [(None,)]


async def test_disposing_the_worker_ends_its_listen_thread(pg_dsn: str) -> None:
    """The LISTEN connection's thread is done, and its connection closed, by the time
    ``serve_worker`` returns after a cancel: the thread waits on a pipe the disposal writes,
    not on a timeout (there is none)."""
    listening = "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN%%'"
    with trio.fail_after(DEADLINE):
        async with serving(pg_dsn, model="echo") as worker:
            assert worker.listener is not None
            [thread] = worker.listener.threads
            assert thread.is_alive()
            assert query(pg_dsn, listening) == [(1,)]
        assert worker.listener.threads == set()
        # The server ends the closed connection's backend on its own time.
        await until(lambda: query(pg_dsn, listening) == [(0,)])


async def test_a_queue_of_a_newer_schema_version_is_refused_at_start(pg_dsn: str) -> None:
    """A database whose queue is of a newer schema version is refused with the versions
    and the fix, before anything is claimed."""
    with trio.fail_after(DEADLINE):
        async with open_remote(pg_dsn):
            pass
        query(pg_dsn, "UPDATE trio_agents_queue_format SET version = 7")
        with pytest.raises(
            QueueFormatError,
            match=r"^the work queue in this database is schema version 7, and this trio_agents "
            r"reads versions up to 1; upgrade",
        ):
            await serve_worker(pg_dsn, model="echo")


async def test_a_dead_worker_s_running_prompt_is_taken_over_without_a_notification(
    pg_dsn: str,
) -> None:
    """A prompt left running by a worker whose lease ran out (no NOTIFY says so) is claimed
    by an idle live worker within its heartbeat, not its hour-long fallback poll."""
    definition = '{"model": null, "instructions": null, "tools": null, "max_steps": 50}'
    with trio.fail_after(DEADLINE):
        async with (
            serving(pg_dsn, model="echo", poll_interval=3600, lease_seconds=1),
            open_remote(pg_dsn, poll_interval=3600) as remote,
        ):
            # Written behind the queue's back, as a worker that died mid-turn leaves it.
            query(pg_dsn, "INSERT INTO trio_agents_workers (id, expires) VALUES ('dead', now())")
            query(
                pg_dsn,
                "INSERT INTO trio_agents_prompts (id, session_id, content, agent, policy, "
                "retries, state, worker, claim) "
                "VALUES ('p-1', 's', 'orphan', %s, 'retry', 1, 'running', 'dead', 1)",
                definition,
            )
            assert await remote.prompt("p-1", "s").answer() == "orphan"
    [row] = prompt_rows(pg_dsn)
    assert row["claim"] == 2


async def test_concurrent_starts_create_the_queue_s_tables_once(pg_dsn: str) -> None:
    """Clients and workers starting at once on an empty database create the tables once
    (explicit, idempotent creation under an advisory lock): one version row, version 1."""
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            for _ in range(4):
                nursery.start_soon(_open_and_close, pg_dsn)
    assert query(pg_dsn, "SELECT version FROM trio_agents_queue_format") == [(1,)]


async def _open_and_close(dsn: str) -> None:
    async with open_remote(dsn):
        pass
