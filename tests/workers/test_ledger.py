"""The work queue's ledger (sans-IO): which turn ran which prompt, and what a worker does
next, as plain functions of a session's records."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

import trio_agents as ta
from trio_agents.session import (
    AssistantMessage,
    InboxSpliced,
    Record,
    StopReason,
    ToolCall,
    TurnEnded,
    TurnStarted,
    UserMessage,
)
from trio_agents.workers import CancelRequested, PromptClaimed, PromptFailed, WorkerLost
from trio_agents.workers._ledger import Decision, Ledger, decide


def attempt(n: int, turn: str | None, end: StopReason | None, text: str = "hi") -> list[Record]:
    """The records of attempt ``n`` of prompt ``p``: claimed, queued, and (with ``turn``)
    run to ``end`` (``None``: still running)."""
    records: list[Record] = [
        PromptClaimed(prompt_id="p", attempt=n, worker=f"w{n}"),
        InboxSpliced(op="add", lane="next_turn", message_id=f"m-{n}", content=text),
    ]
    if turn is None:
        return records
    records += [
        TurnStarted(turn_id=turn),
        UserMessage(message_id=f"m-{n}", content=text, turn_id=turn),
        AssistantMessage(turn_id=turn, content=text),
    ]
    if end is not None:
        records.append(TurnEnded(turn_id=turn, stop_reason=end))
    return records


def decided(records: Sequence[Record], policy: str = "retry", retries: int = 1) -> Decision:
    ledger = Ledger()
    ledger.feed(records)
    return decide(ledger, "p", policy=policy, retries=retries, cancelled=False)


def test_a_prompt_with_no_attempt_starts_its_first() -> None:
    """No PromptClaimed for the prompt: start attempt 1."""
    assert decided([]) == Decision("start", attempt=1)


def test_a_queued_message_of_the_last_attempt_is_adopted() -> None:
    """Claimed and queued but no turn yet (its worker died; a resume restores the inbox):
    adopt that message instead of queueing the prompt twice."""
    assert decided(attempt(1, None, None)) == Decision("adopt")


def test_a_running_turn_is_waited_for() -> None:
    """A turn that claimed the attempt's message and has not ended: wait."""
    assert decided(attempt(1, "t-1", None)) == Decision("wait")


def test_a_completed_turn_settles_with_the_text_after_its_last_tool_call() -> None:
    """A completed turn settles the prompt; the answer is what the model said after its
    last tool call, never the turn run again."""
    records = attempt(1, "t-1", None, text="first")
    records += [
        ToolCall(turn_id="t-1", call_id="c", name="bash", arguments={}),
        AssistantMessage(turn_id="t-1", content="final"),
        TurnEnded(turn_id="t-1", stop_reason=StopReason.COMPLETED),
    ]
    assert decided(records) == Decision("settle", state="completed", answer="final")


def test_an_interrupted_turn_is_run_again_while_retries_are_left() -> None:
    """Interrupted once with one retry: attempt 2; interrupted again: failed with the cause
    WorkerLost of the worker that ran the last attempt."""
    once = attempt(1, "t-1", StopReason.INTERRUPTED)
    assert decided(once) == Decision("start", attempt=2)
    twice = [*once, *attempt(2, "t-2", StopReason.INTERRUPTED)]
    failed = decided(twice)
    assert (failed.action, failed.state, failed.cause) == (
        "settle",
        "failed",
        WorkerLost(worker="w2"),
    )
    assert failed.error is not None
    assert failed.error.startswith("its worker was lost mid-turn (WorkerLost(worker='w2')) 2 times")


def test_an_interrupted_turn_fails_at_once_under_policy_fail() -> None:
    """Policy ``fail``: the first interruption settles the prompt failed."""
    settled = decided(attempt(1, "t-1", StopReason.INTERRUPTED), policy="fail")
    assert (settled.state, settled.cause) == ("failed", WorkerLost(worker="w1"))


def test_a_handed_back_turn_is_run_again_without_counting_as_a_retry() -> None:
    """A turn cancelled by a drain (no client cancel asked for) was handed back: a new
    attempt, even with no retries left."""
    assert decided(attempt(1, "t-1", StopReason.CANCELLED), retries=0) == Decision(
        "start", attempt=2
    )


def test_a_client_cancel_settles_the_prompt_cancelled() -> None:
    """A recorded CancelRequested settles a cancelled (or never started) attempt as
    cancelled."""
    asked = CancelRequested(prompt_id="p", cause=ta.UserCancel())
    assert decided([asked]) == Decision("settle", state="cancelled")
    cancelled = [*attempt(1, "t-1", StopReason.CANCELLED), asked]
    assert decided(cancelled) == Decision("settle", state="cancelled")


def test_a_message_removed_before_its_turn_starts_a_new_attempt() -> None:
    """The attempt's message was removed (a cancel cleared the inbox) with no client cancel
    asked for: start again."""
    removed = [
        *attempt(1, None, None),
        InboxSpliced(op="remove", lane="next_turn", message_id="m-1", reason="cancelled"),
    ]
    assert decided(removed) == Decision("start", attempt=2)


@pytest.mark.parametrize("reason", [StopReason.ERROR, StopReason.MAX_STEPS, StopReason.BLOCKED])
def test_a_turn_that_failed_settles_the_prompt_failed(reason: StopReason) -> None:
    """A turn that ended in error, at max steps or blocked fails the prompt (no retry)."""
    settled = decided(attempt(1, "t-1", reason))
    assert (settled.state, settled.error) == ("failed", f"its turn ended {reason.value}")


def test_a_recorded_failure_is_final() -> None:
    """A PromptFailed in the session settles the prompt failed with its reason."""
    records = [
        *attempt(1, "t-1", StopReason.INTERRUPTED),
        PromptFailed(prompt_id="p", reason="gave up", cause=WorkerLost(worker="w1")),
    ]
    assert decided(records) == Decision(
        "settle", state="failed", error="gave up", cause=WorkerLost(worker="w1")
    )


def test_a_turn_started_inside_another_is_seen_as_overlapping() -> None:
    """Two TurnStarted with no TurnEnded between them: the ledger says the turns overlap
    (what the chaos test checks); turns in sequence do not."""
    sequential = Ledger()
    sequential.feed([*attempt(1, "t-1", StopReason.COMPLETED), *attempt(2, "t-2", None)])
    assert not sequential.overlapping
    nested = Ledger()
    nested.feed([*attempt(1, "t-1", None), *attempt(2, "t-2", None)])
    assert nested.overlapping
