"""``trio-agents sessions list|show|delete`` with child sessions, through the installed
command, on the JSONL, SQLite and PostgreSQL stores (issue 37, item 2)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
import trio.testing

import trio_agents.agent as ag
from tests.helpers.children_support import FAMILY, store_a_family
from tests.helpers.support import TRIO_AGENTS
from trio_agents.kernel import open_root
from trio_agents.model import ScriptedModel
from trio_agents.session import JsonlStore, PostgresStore, SessionStore, SqliteStore

#: A store kind: the store object on a test's data, and its ``--store`` spec.
Kind = Callable[[pytest.FixtureRequest, Path], tuple[SessionStore, str]]


def _jsonl(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[SessionStore, str]:
    return JsonlStore(tmp_path / "sessions"), str(tmp_path / "sessions")


def _sqlite(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[SessionStore, str]:
    return SqliteStore(tmp_path / "s.db"), f"sqlite:{tmp_path / 's.db'}"


def _postgresql(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[SessionStore, str]:
    dsn: str = request.getfixturevalue("pg_dsn")
    return PostgresStore(dsn), dsn


KINDS: dict[str, Kind] = {"jsonl": _jsonl, "sqlite": _sqlite, "postgresql": _postgresql}


@pytest.fixture(params=sorted(KINDS))
async def family(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The ``--store`` spec of a store holding :data:`FAMILY` (made by a runtime, closed)."""
    store, spec = KINDS[request.param](request, tmp_path)
    await store_a_family(store)
    return spec


@pytest.fixture
async def jsonl_family(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """:func:`family` on the JSONL store only (the listing and the tree are the store's; the
    command prints them the same way for every backend)."""
    store, spec = _jsonl(request, tmp_path)
    await store_a_family(store)
    return spec


def command(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TRIO_AGENTS_HOME": str(home), "NO_COLOR": "1", "COLUMNS": "200"}
    env.pop("TRIO_AGENTS_DEBUG", None)
    return subprocess.run(
        [str(TRIO_AGENTS), "sessions", *args],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip


async def sessions(home: Path, *args: str) -> str:
    """``trio-agents sessions ARGS`` (in a thread); its stdout, once it exited 0."""
    done = await trio.to_thread.run_sync(command, home, *args)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    return done.stdout


def ids_in_order(table: str) -> list[tuple[int, str]]:
    """The ``(indent, id)`` of each row of a piped ``sessions list`` table."""
    rows = table.splitlines()[1:]
    return [(len(m[1]), m[2]) for row in rows if (m := re.match(r"^ ?( *)(\S+) ", row))]


async def test_list_puts_children_indented_under_their_parent(family: str, tmp_path: Path) -> None:
    """p, then c1 and c2 indented one level, g two levels under c1; s top-level."""
    rows = ids_in_order(await sessions(tmp_path, "list", "--store", family))
    assert sorted(rows) == [(0, "p"), (0, "s"), (2, "c1"), (2, "c2"), (4, "g")]
    order = [session_id for _, session_id in rows]
    assert order.index("c1") + 1 == order.index("g")
    assert order.index("p") < min(order.index("c1"), order.index("c2"))
    assert order.index("s") not in range(order.index("p"), order.index("g") + 1)


async def test_list_json_gives_each_session_its_parent_in_tree_order(
    jsonl_family: str, tmp_path: Path
) -> None:
    """``--json``: one object per session with ``parent_id``; a parent before its children."""
    listed = [
        json.loads(line)
        for line in (
            await sessions(tmp_path, "list", "--json", "--store", jsonl_family)
        ).splitlines()
    ]
    assert {item["id"]: item["parent_id"] for item in listed} == FAMILY
    order = [item["id"] for item in listed]
    assert order.index("p") < order.index("c1") < order.index("g")


async def test_show_of_a_parent_ends_with_its_childrens_tree(
    jsonl_family: str, tmp_path: Path
) -> None:
    """Each child's id (indented by depth), how its last turn ended, and that turn's prompt."""
    out = await sessions(tmp_path, "show", "p", "--store", jsonl_family)
    conversation, tree = out.split("child sessions:\n")
    assert conversation.startswith("user: hello from p\n")
    assert sorted(tree.splitlines()) == [
        "    g · completed · last turn: hello from g",
        "  c1 · completed · last turn: hello from c1",
        "  c2 · completed · last turn: hello from c2",
    ]
    assert tree.splitlines().index("    g · completed · last turn: hello from g") == (
        tree.splitlines().index("  c1 · completed · last turn: hello from c1") + 1
    )
    leaf = await sessions(tmp_path, "show", "g", "--store", jsonl_family)
    assert "child sessions" not in leaf


async def test_delete_of_a_parent_deletes_its_children_and_names_them(
    family: str, tmp_path: Path
) -> None:
    """``delete p`` removes p, c1, g and c2 and says so; s stays."""
    out = await sessions(tmp_path, "delete", "p", "--store", family)
    match = re.fullmatch(r"deleted p and 3 sessions under it: (\S+), (\S+), (\S+)\n", out)
    assert match is not None, out
    assert sorted(match.groups()) == ["c1", "c2", "g"]
    assert match.groups().index("g") < match.groups().index("c1")
    rows = ids_in_order(await sessions(tmp_path, "list", "--store", family))
    assert rows == [(0, "s")]


async def test_delete_of_a_child_deletes_its_own_children_only(
    jsonl_family: str, tmp_path: Path
) -> None:
    """``delete c1`` removes g with it; p and c2 are listed as before."""
    assert await sessions(tmp_path, "delete", "c1", "--store", jsonl_family) == (
        "deleted c1 and 1 session under it: g\n"
    )
    rows = ids_in_order(await sessions(tmp_path, "list", "--store", jsonl_family))
    assert sorted(rows) == [(0, "p"), (0, "s"), (2, "c2")]


async def test_delete_refuses_while_a_child_is_live_in_another_process(tmp_path: Path) -> None:
    """c1 live in this process: the command's ``delete p`` is one line, status 1, and deletes
    nothing."""
    store = tmp_path / "sessions"
    await store_a_family(JsonlStore(store))
    async with open_root() as root:
        holder = JsonlStore(store)
        await root.plugin(holder)
        c1 = await holder.load("c1")
        await holder.enter(c1)
        done = await trio.to_thread.run_sync(
            command, tmp_path, "delete", "p", "--store", str(store)
        )
        await holder.detach(c1)
    assert (done.returncode, done.stdout) == (1, "")
    assert re.fullmatch(
        rf"trio-agents: error: session 'c1', under 'p', is live in process {os.getpid()} on "
        r"\S+; end it there, then delete 'p'\n",
        done.stderr,
    ), done.stderr
    rows = ids_in_order(await sessions(tmp_path, "list", "--store", str(store)))
    assert sorted(session_id for _, session_id in rows) == sorted(FAMILY)


async def store_a_cancelled_child(store: Path) -> None:
    """``parent`` with ``busy`` (its long prompt cancelled by the parent's cancel) and
    ``idle`` (never prompted)."""
    model = ScriptedModel.echo(delay=10)
    async with ag.open_runtime(store=JsonlStore(store), model=model) as root:
        parent = (await root.agents.create(session_id="parent")).agent
        busy = (await root.agents.create(session_id="busy", parent=parent)).agent
        await root.agents.create(session_id="idle", parent=parent)
        busy.prompt("word " * 40)
        await trio.testing.wait_all_tasks_blocked()
        assert parent.cancel() is True
        await busy.when_idle()


def test_show_names_a_childs_cancel_cause_and_shortens_its_prompt(tmp_path: Path) -> None:
    """The tree says how a child's last turn ended, with its typed cause, its prompt cut to
    60 characters; a child with no turn says so."""
    store = tmp_path / "sessions"
    trio.run(store_a_cancelled_child, store, clock=trio.testing.MockClock(autojump_threshold=0))
    done = command(tmp_path, "show", "parent", "--store", str(store))
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    tree = done.stdout.split("child sessions:\n")[1]
    assert sorted(tree.splitlines()) == [
        "  busy · cancelled by ParentCancel(parent_id='parent') · last turn: "
        + ("word " * 11)
        + "word…",
        "  idle · no turns",
    ]
