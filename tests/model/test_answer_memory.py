"""A model answer of any size costs the command bounded memory and storage (issue 36).

A real ``trio-agents run`` (a child of the test, through a small wrapper that reaps it with
``os.wait4`` and reports its peak RSS) talks to the in-process loopback server, which streams
an answer far past the default ``max_answer`` (4 MiB): 1 GiB of text in 64 KiB deltas, or a
tool call with 100 MB of arguments. The command must end with one error line naming the
bound, after reading only a little of the stream, with a low peak RSS and a session file that
holds nothing over the bound.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import attrs
import pytest
import trio

from tests.helpers.answer_streams import WIRES, Wire
from tests.helpers.support import TRIO_AGENTS, FakeServer, Reply, serve

DELTA = 64 * 1024
MAX_ANSWER = 4 << 20  # the default bound, in characters
# The peak RSS allowed to the command, in KiB. These runs peak near 50-65 MiB; an unbounded
# client peaked at 1.8 GB (text) and 1.5 GB (tool call) on the same streams.
PEAK_RSS_KIB = 200 * 1024
# What the server may have sent before the client closed: the bound, plus what the kernel's
# socket buffers may hold (Linux lets a loopback receive buffer grow to 32 MiB, a send buffer
# to 4 MiB); these runs sent about 4.5 MB, far below the 1 GiB / 100 MB offered.
SENT_AT_MOST = 48 << 20

# Runs argv[2:] as its only child, reaps it with wait4 and writes its peak RSS to argv[1].
MEASURE = """\
import os, sys
pid = os.posix_spawn(sys.argv[2], sys.argv[2:], os.environ)
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as out:
    out.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""


@attrs.frozen
class Measured:
    """How one run of the command ended, and its peak resident memory."""

    returncode: int
    stderr: str
    peak_rss_kib: int


async def run_measured(args: list[str], home: Path) -> Measured:
    """Run ``trio-agents ARGS`` as a child, measured by the wrapper; stdout goes to a file."""
    env = {**os.environ, "TRIO_AGENTS_HOME": str(home), "NO_COLOR": "1"}
    env.pop("TRIO_AGENTS_DEBUG", None)
    rss = home / "rss"
    with (home / "stdout").open("wb") as stdout, trio.fail_after(120):
        done = await trio.run_process(
            [sys.executable, "-c", MEASURE, str(rss), str(TRIO_AGENTS), *args],
            stdout=stdout, capture_stderr=True, env=env, check=False,
        )  # fmt: skip
    return Measured(done.returncode, done.stderr.decode(), int(rss.read_text()))


def too_long(server: FakeServer, wire: Wire) -> str:
    return (
        rf"^trio-agents: error: turn t-1 ended with error: {re.escape(server.url + wire.path)} "
        rf"sent an answer longer than {MAX_ANSWER} characters \(text, reasoning and tool-call "
        r"arguments together\), so the turn ended there; if answers are really this large, "
        r"raise max_answer= \(\?max_answer=N in the model spec\)\n$"
    )


@pytest.fixture(params=WIRES, ids=[w.scheme for w in WIRES])
def wire(request: pytest.FixtureRequest) -> Wire:
    value: Wire = request.param
    return value


@pytest.fixture
async def server(nursery: trio.Nursery, wire: Wire) -> FakeServer:
    return await serve(nursery, wire.prefix)


def command(server: FakeServer, wire: Wire, store: Path) -> list[str]:
    spec = f"{wire.scheme}:test-model?base_url={server.url}&max_retries=0"
    return ["run", "say a lot", "--store", str(store), "--model", spec]


def stored_bytes(store: Path) -> int:
    return sum(f.stat().st_size for f in store.rglob("*") if f.is_file())


async def test_a_1_gib_answer_ends_the_turn_at_the_bound_with_low_memory(
    server: FakeServer, wire: Wire, tmp_path: Path
) -> None:
    """1 GiB of text in 64 KiB deltas: exit 1 with one line naming max_answer, a low peak
    RSS, 4 MiB of text printed and stored (nothing over the bound), one request sent."""
    delta = wire.text("a" * DELTA)
    server.script(Reply(chunks=[*wire.opening(), *[delta] * (1 << 14), *wire.closing()]))
    store = tmp_path / "sessions"
    measured = await run_measured(command(server, wire, store), tmp_path)
    assert measured.returncode == 1
    assert re.match(too_long(server, wire), measured.stderr), measured.stderr[:2000]
    assert measured.peak_rss_kib < PEAK_RSS_KIB
    await server.seen[0].closed.wait()
    assert len(server.seen) == 1
    assert server.seen[0].sent < SENT_AT_MOST
    printed = (tmp_path / "stdout").read_bytes()
    assert set(printed.strip()) == {ord("a")}
    assert MAX_ANSWER - DELTA < len(printed.strip()) <= MAX_ANSWER
    assert stored_bytes(store) < MAX_ANSWER + (1 << 20)


async def test_a_100_mb_tool_call_argument_is_never_run_stored_or_resent(
    server: FakeServer, wire: Wire, tmp_path: Path
) -> None:
    """A tool call with 100 MB of arguments: exit 1 naming max_answer, a low peak RSS, the
    call neither recorded nor run, and no second request carrying it."""
    piece = wire.tool_piece("x" * DELTA)
    chunks = [*wire.opening(), wire.text("calling"), wire.tool_start("bash")]
    chunks += [wire.tool_piece('{"command": "echo '), *[piece] * 1526, wire.tool_piece('"}')]
    server.script(Reply(chunks=[*chunks, *wire.closing("tool_calls")]))
    store = tmp_path / "sessions"
    measured = await run_measured(command(server, wire, store), tmp_path)
    assert measured.returncode == 1
    assert re.match(too_long(server, wire), measured.stderr), measured.stderr[:2000]
    assert measured.peak_rss_kib < PEAK_RSS_KIB
    await server.seen[0].closed.wait()
    assert len(server.seen) == 1
    assert server.seen[0].sent < SENT_AT_MOST
    assert stored_bytes(store) < 1 << 20
