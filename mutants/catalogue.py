"""The mutants: one line of the ownership core each, with the tests that should kill it.

Each mutant replaces ``old`` (found exactly once in ``path``) with ``new``. Operators: a
comparison or a boolean flipped (``flip``), a call or a statement removed (``drop``), a bound
moved by one (``off``), a branch taken always or never (``branch``).
"""

from __future__ import annotations

from typing import Final, NamedTuple


class Mutant(NamedTuple):
    id: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]


KERNEL: Final = ("tests/kernel/test_stack.py", "tests/kernel/test_fiber.py")
FIBER: Final = (*KERNEL, "tests/kernel/test_services.py", "tests/kernel/test_events.py")
AGENT: Final = (
    "tests/agent/test_cancel.py",
    "tests/agent/test_inbox.py",
    "tests/agent/test_teardown.py",
    "tests/agent/test_ownership.py",
    "tests/agent/test_compaction.py",
)
STORE: Final = ("tests/session/test_store.py", "tests/session/test_jsonl.py")
JSONL: Final = (
    "tests/session/test_jsonl.py",
    "tests/session/test_faults.py",
    "tests/session/test_write_batch.py",
    "tests/session/test_jsonl_durability.py",
)
BASH: Final = ("tests/shell/test_tool_bash.py",)
BRIDGE: Final = ("tests/acp/test_bridge.py",)

STACK_PY = "trio_agents/kernel/_stack.py"
FIBER_PY = "trio_agents/kernel/_fiber.py"
AGENT_PY = "trio_agents/agent/_agent.py"
INBOX_PY = "trio_agents/agent/_inbox.py"
STORE_PY = "trio_agents/session/_store.py"
JSONL_PY = "trio_agents/session/_jsonl.py"
# Whether a session's log is clean (nothing pending, in flight or unsynced): a JSONL flush
# that finds it clean returns without a sync batch.
WRITELOG_PY = "trio_agents/session/_writelog.py"
# The flush of a JSONL (or SQLite) session waits for its sync batch here.
BATCHES_PY = "trio_agents/session/_batches.py"
BASH_PY = "trio_agents/shell/_tool_bash.py"
BRIDGE_PY = "trio_agents/acp/_bridge.py"

MUTANTS: Final = (
    # -- the kernel's stack: LIFO, one exit each, every failure kept -------------------------
    Mutant(
        "stack-fifo",
        STACK_PY,
        "entry, _ = self._entries.popitem()",
        "entry = next(iter(self._entries)); del self._entries[entry]",
        KERNEL,
    ),
    Mutant(
        "stack-drop-error",
        STACK_PY,
        "                    errors.append(failure)",
        "                    pass",
        KERNEL,
    ),
    Mutant(
        "stack-exit-twice",
        STACK_PY,
        "        if self._closed is not None:\n            await self._closed.wait()",
        "        if False:\n            await self._closed.wait()",
        KERNEL,
    ),
    Mutant(
        "stack-discard-keeps",
        STACK_PY,
        "            self._stack._entries.pop(self, None)",
        "            pass",
        KERNEL,
    ),
    # -- fibers: memoized dispose, no self-await, the teardown's errors ----------------------
    Mutant(
        "fiber-dispose-no-wait",
        FIBER_PY,
        "            await self._done.wait()\n        else:",
        "            await trio.lowlevel.checkpoint()\n        else:",
        FIBER,
    ),
    Mutant(
        "fiber-self-await",
        FIBER_PY,
        "if trio.lowlevel.current_task() is self._task and not self._done.is_set():",
        "if False:",
        FIBER,
    ),
    Mutant(
        "fiber-errors-hidden",
        FIBER_PY,
        "        if self._errors:",
        "        if False:",
        FIBER,
    ),
    Mutant(
        "fiber-task-failure-while-stopping",
        FIBER_PY,
        "                self.failure = exc",
        "                pass",
        FIBER,
    ),
    # -- the agent: cancel, the inbox, shutdown ----------------------------------------------
    Mutant(
        "agent-cancel-while-closing",
        AGENT_PY,
        "        if self._closing or not self._has_work(keep_inbox):",
        "        if not self._has_work(keep_inbox):",
        AGENT,
    ),
    Mutant(
        "agent-cancel-says-nothing",
        AGENT_PY,
        "        self._cancel(cause, keep_inbox)\n        return True",
        "        self._cancel(cause, keep_inbox)\n        return False",
        AGENT,
    ),
    Mutant(
        "agent-cancel-ignores-children",
        AGENT_PY,
        "        return any(child._has_work(keep_inbox) for child in self._children.values())",
        "        return False",
        AGENT,
    ),
    Mutant(
        "agent-cancel-keeps-inbox",
        AGENT_PY,
        "        if not keep_inbox:\n            inbox = self._parts.inbox",
        "        if keep_inbox:\n            inbox = self._parts.inbox",
        AGENT,
    ),
    Mutant(
        "agent-cancel-no-event",
        AGENT_PY,
        # The cancel's own emit (self.id makes it unique: the driver's lose() emits too).
        "            self._parts.emit(AgentCancelRequested(agent_id=self.id, cause=cause))",
        "            pass",
        AGENT,
    ),
    Mutant(
        "agent-shutdown-no-flush",
        AGENT_PY,
        "        await agent._done.wait()\n        await agent._parts.flush()",
        "        await agent._done.wait()",
        AGENT,
    ),
    Mutant(
        "agent-shutdown-no-wait",
        AGENT_PY,
        "        agent._wake.set()\n        await agent._done.wait()",
        "        agent._wake.set()",
        AGENT,
    ),
    Mutant(
        "agent-compaction-no-flush",
        AGENT_PY,
        "                    await self._parts.flush_quietly()",
        "                    pass",
        AGENT,
    ),
    Mutant(
        "inbox-claim-newest",
        INBOX_PY,
        "_, prompt = turn_lane.popitem(last=False)",
        "_, prompt = turn_lane.popitem(last=True)",
        AGENT,
    ),
    Mutant(
        "inbox-inject-wakes",
        INBOX_PY,
        "return bool(self._turn) or (bool(step) and any(m.wake for m in step.values()))",
        "return bool(self._turn) or bool(step)",
        AGENT,
    ),
    Mutant(
        "inbox-id-reused",
        INBOX_PY,
        "self._next = max(self._next, _number(message.id) + 1)",
        "self._next = max(self._next, _number(message.id))",
        AGENT,
    ),
    # -- the session store and the JSONL writer ----------------------------------------------
    Mutant(
        "store-end-no-event",
        STORE_PY,
        "                    self._emit(SessionDisposed(session_id=session.id))",
        "                    pass",
        STORE,
    ),
    Mutant(
        "store-end-not-memoized",
        STORE_PY,
        "        if entry.ending is not None:\n            await entry.join_end()\n"
        "            return\n        was_live",
        "        was_live",
        STORE,
    ),
    Mutant(
        "store-end-keeps-live",
        STORE_PY,
        "            del self._live[session.id]\n        await self._release(session)",
        "            pass\n        await self._release(session)",
        STORE,
    ),
    Mutant(
        "store-load-no-repair",
        STORE_PY,
        "            session.append(TurnEnded("
        "turn_id=turn_id, stop_reason=StopReason.INTERRUPTED))",
        "            pass",
        STORE,
    ),
    Mutant(
        "jsonl-sync-skips",
        WRITELOG_PY,
        "self._batch is None and self.synced_seq == self.written_seq",
        "self._batch is None and self.synced_seq >= self.written_seq - 1",
        JSONL,
    ),
    Mutant(
        "jsonl-record-not-dirty",
        JSONL_PY,
        "            self._batches.mark(session, state)\n\n    async def _enter",
        "            self._batches.poke()\n\n    async def _enter",
        JSONL,
    ),
    Mutant(
        "jsonl-error-swallowed",
        BATCHES_PY,
        "        if batch.error is not None:\n            raise batch.error",
        "        if False:\n            raise batch.error",
        JSONL,
    ),
    # -- tool_bash: the owner check ----------------------------------------------------------
    Mutant(
        "bash-owner-open",
        BASH_PY,
        "        if owner is not None and owner != _token(call):",
        "        if False:",
        BASH,
    ),
    Mutant(
        "bash-unowned-closed",
        BASH_PY,
        "        if owner is not None and owner != _token(call):",
        "        if owner != _token(call):",
        BASH,
    ),
    Mutant(
        "bash-empty-owner-open",
        BASH_PY,
        "        if owner is not None and owner != _token(call):",
        "        if owner and owner != _token(call):",
        BASH,
    ),
    # -- the ACP bridge's session teardown ---------------------------------------------------
    Mutant(
        "bridge-close-keeps-sessions",
        BRIDGE_PY,
        "                await self._dispose_sessions()\n"
        "                await self._serving.aclose()",
        "                await self._serving.aclose()",
        BRIDGE,
    ),
    Mutant(
        "bridge-late-handle-published",
        BRIDGE_PY,
        "            if self._closed:\n                await handle.dispose()",
        "            if False:\n                await handle.dispose()",
        BRIDGE,
    ),
    Mutant(
        "bridge-dispose-error-escapes",
        BRIDGE_PY,
        "        except Exception:\n            # Its AgentDisposed",
        "        except ZeroDivisionError:\n            # Its AgentDisposed",
        BRIDGE,
    ),
)
