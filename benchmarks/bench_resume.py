"""Resume of a long JSONL session: records folded per second, against reading the file raw.

A session of ``RECORDS`` records (the five records of an echo turn, repeated: inbox add, turn
started, user message, assistant message, turn ended) is written once with a
:class:`JsonlStore`. Then ``root.agents.resume(id)`` is timed until it returns the handle: the
file is read and every line parsed and checked into a record, crash repair looks for open
turns, the inbox and the turn counter are rebuilt, and the model-visible history is folded,
once, so the first turn after it costs what any turn costs. The floor is the least a program
does to have the same records in memory: read the file in one go and ``json.loads`` each line
into a dict. Resume must be linear in the records, so a session a tenth as long is timed too
and the two rates are compared. The goal of issue #11 is at least 50,000 records/s on this
2-core machine. Each figure is the best of several rounds, run interleaved.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import AsyncGenerator, Iterator
from pathlib import Path

import trio

import trio_agents as ta
from trio_agents.model import Finished, FinishReason, ModelEvent, ModelRequest, TextDelta, Usage
from trio_agents.session import (
    AssistantMessage,
    InboxSpliced,
    Record,
    StopReason,
    TurnEnded,
    TurnStarted,
    UserMessage,
)

from ._common import line

ROUNDS = 3
RECORDS = 100_000
SHORT = RECORDS // 10


class _Echo:
    name = "bench-echo"

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        await trio.lowlevel.checkpoint()  # pragma: no cover - resume asks the model nothing
        yield TextDelta("")  # pragma: no cover
        yield Finished(FinishReason.STOP, Usage())  # pragma: no cover


def turn_records(records: int) -> Iterator[Record]:
    """The records of ``records // 5`` completed echo turns, as an agent writes them."""
    for n in range(1, records // 5 + 1):
        message, turn = f"m-{n}", f"t-{n}"
        text = f"message number {n} of a long session"
        yield InboxSpliced(op="add", lane="next_turn", message_id=message, content=text)
        yield TurnStarted(turn_id=turn)
        yield UserMessage(message_id=message, content=text, turn_id=turn)
        yield AssistantMessage(turn_id=turn, content=text)
        yield TurnEnded(turn_id=turn, stop_reason=StopReason.COMPLETED)


async def write_session(root: ta.Context, session_id: str, records: int) -> None:
    """Store a session of about ``records`` records (an agent's own records come first)."""
    handle = await root.agents.create(model=_Echo(), session_id=session_id)
    for record in turn_records(records):
        handle.agent.session.append(record)
    await handle.dispose()


async def resume(root: ta.Context, session_id: str) -> float:
    """Seconds for ``root.agents.resume(session_id)`` (the dispose after it is not timed)."""
    start = time.perf_counter()
    handle = await root.agents.resume(session_id, model=_Echo())
    elapsed = time.perf_counter() - start
    await handle.dispose()
    return elapsed


def _raw_read(path: Path) -> float:
    start = time.perf_counter()
    with path.open("rb") as f:
        data = f.read()
    rows = [json.loads(row) for row in data.splitlines()]
    assert rows
    return time.perf_counter() - start


async def raw_floor(path: Path) -> float:
    """Seconds to read ``path`` and ``json.loads`` every line, in a worker thread."""
    seconds: float = await trio.to_thread.run_sync(_raw_read, path)
    return seconds


async def measure() -> dict[str, float]:
    """Best-of-``ROUNDS`` rates of the resumes and the floor, and their ratios."""
    with tempfile.TemporaryDirectory(prefix="trio-agents-bench-") as tmp:
        store = ta.JsonlStore(tmp)
        async with ta.open_runtime(store=store) as root:
            await write_session(root, "long", RECORDS)
            await write_session(root, "short", SHORT)
            counts = {i.id: i.records for i in await store.list()}
            raw = long = short = float("inf")
            for _ in range(ROUNDS):
                raw = min(raw, await raw_floor(store.path_of("long")))
                long = min(long, await resume(root, "long"))
                short = min(short, await resume(root, "short"))
    return {
        "records": counts["long"],
        "short_records": counts["short"],
        "raw": counts["long"] / raw,
        "long": counts["long"] / long,
        "short": counts["short"] / short,
        "ratio": long / raw,
        "linearity": (counts["short"] / short) / (counts["long"] / long),
    }


def main() -> None:
    """Measure and print."""
    r = trio.run(measure)
    print(
        f"resume of a JSONL session of {r['records']:,.0f} records "
        f"(best of {ROUNDS}, {tempfile.gettempdir()}):"
    )
    print(line("floor (read the file, json.loads every line):", r["raw"]))
    print(line("trio_agents agents.resume (records folded):", r["long"]))
    print(line(f"trio_agents agents.resume, {r['short_records']:,.0f} records:", r["short"]))
    print(f"  ratio: a resume costs {r['ratio']:.1f}x the floor")
    print(f"  linearity: a 10x shorter session folds {r['linearity']:.2f}x as fast per record")


if __name__ == "__main__":
    main()
