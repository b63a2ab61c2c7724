"""One store spec everywhere: ``--store DIR | memory | sqlite:PATH | postgresql://...``, a
config file's ``store``, ``open_runtime(store=...)``; ``sessions list/show/delete`` on each."""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import trio_agents.agent as ag
from tests.helpers.cli_support import run_cli
from tests.helpers.support import TRIO_AGENTS
from trio_agents.cli import main
from trio_agents.session import (
    JsonlStore,
    MemoryStore,
    SqliteStore,
    StoreSpecError,
    UserMessage,
    parse_store_spec,
    store_from_spec,
)
from trio_agents.session._spec import StoreSpec

pytestmark = pytest.mark.usefixtures("cli_environment")


def test_each_form_names_its_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """DIR, memory, sqlite:PATH (``~`` expanded), postgresql://...; None is the default root."""
    monkeypatch.setenv("HOME", str(tmp_path))
    jsonl = store_from_spec(str(tmp_path / "dir"))
    assert isinstance(jsonl, JsonlStore)
    assert jsonl.root == tmp_path / "dir"
    assert isinstance(store_from_spec("memory"), MemoryStore)
    sqlite = store_from_spec("sqlite:~/s.db", read_only=True)
    assert isinstance(sqlite, SqliteStore)
    assert (sqlite.path, sqlite.read_only) == (tmp_path / "s.db", True)
    assert parse_store_spec("postgresql://u@localhost/db").kind == "postgresql"
    assert parse_store_spec("postgres://u@localhost/db").target == "postgres://u@localhost/db"
    # Where the command keeps files beside the sessions (chat's input history).
    assert parse_store_spec(f"sqlite:{tmp_path / 's.db'}").directory == tmp_path
    assert parse_store_spec(str(tmp_path / "dir")).directory == tmp_path / "dir"
    assert parse_store_spec("memory").directory is None
    assert parse_store_spec("postgresql://u@localhost/db").directory is None
    default = store_from_spec(None)
    assert isinstance(default, JsonlStore)
    assert default.root == tmp_path / "home" / "sessions"


def test_sqlite_without_a_path_is_refused() -> None:
    """``sqlite:`` alone says what to write."""
    with pytest.raises(StoreSpecError, match=r"^store spec 'sqlite:' names no database file; wr"):
        store_from_spec("sqlite:")


def test_postgresql_without_its_module_says_it_is_not_available(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """When ``trio_agents.session._postgres`` cannot be imported, the spec is one clear error."""
    monkeypatch.setitem(sys.modules, "trio_agents.session._postgres", None)
    with pytest.raises(StoreSpecError, match=r"^PostgreSQL store not available"):
        store_from_spec("postgresql://u@localhost/db")


def stored_ids(kind: str, spec: str, tmp_path: Path) -> list[str]:
    """The session ids the store of ``spec`` holds, read behind the command's back from the
    backend's own storage, so a test on one kind cannot pass on another."""
    if kind == "jsonl":
        return sorted(p.name.removesuffix(".jsonl") for p in (tmp_path / "dir").glob("*.jsonl"))
    if kind == "sqlite":
        with contextlib.closing(sqlite3.connect(tmp_path / "s.db")) as db:
            return [row[0] for row in db.execute("SELECT id FROM sessions ORDER BY id")]
    import psycopg

    with psycopg.connect(spec) as conn:
        rows = conn.execute("SELECT id FROM trio_agents_sessions ORDER BY id").fetchall()
    return [row[0] for row in rows]


@pytest.mark.parametrize("kind", ["jsonl", "sqlite", "postgresql"])
def test_run_then_sessions_list_show_delete(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    kind: str,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The whole round trip of the command on a durable store of each kind (PostgreSQL: the
    tests' own throwaway server, given as the keyword DSN libpq writes); the session is in that
    backend's storage, and nothing else appears in the working directory."""
    monkeypatch.chdir(tmp_path)
    specs = {
        "jsonl": lambda: str(tmp_path / "dir"),
        "sqlite": lambda: f"sqlite:{tmp_path / 's.db'}",
    }
    specs["postgresql"] = lambda: str(request.getfixturevalue("pg_dsn"))
    spec = specs[kind]()
    before = set(os.listdir(tmp_path))
    status, out, err = run_cli(capsys, "run", "hello there", "--session", "s1", "--store", spec)
    assert (status, out) == (0, "hello there\n"), err
    assert stored_ids(kind, spec, tmp_path) == ["s1"]
    made = {"jsonl": {"dir"}, "sqlite": {"s.db", "s.db-lock", "s.db-wal", "s.db-shm"}}
    assert set(os.listdir(tmp_path)) - before <= made.get(kind, set())
    if kind == "sqlite":
        assert f"session s1 ({tmp_path / 's.db'})" in err
    status, out, err = run_cli(capsys, "sessions", "list", "--store", spec)
    assert (status, err) == (0, "")
    assert re.search(r"s1\W+\d+\W+\d{4}-\d\d-\d\d \d\d:\d\d\W+hello there", out), out
    status, out, err = run_cli(capsys, "sessions", "show", "s1", "--store", spec)
    assert (status, out.splitlines()[0], err) == (0, "user: hello there", "")
    status, out, err = run_cli(capsys, "sessions", "delete", "s1", "--store", spec)
    assert (status, out, err) == (0, "deleted s1\n", "")
    assert stored_ids(kind, spec, tmp_path) == []
    status, out, err = run_cli(capsys, "sessions", "show", "s1", "--store", spec)
    assert status == 1
    # A DSN may hold a password: the message names no place for PostgreSQL.
    where = {"jsonl": f" in {tmp_path / 'dir'}", "sqlite": f" in {tmp_path / 's.db'}"}.get(kind, "")
    assert err == (
        f"trio-agents: error: no stored session 's1'{where}; 'trio-agents sessions list' "
        f"shows the ids\n"
    )


def test_sessions_list_on_a_missing_sqlite_file_creates_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``list`` opens the database read-only: no file appears."""
    status, out, err = run_cli(capsys, "sessions", "list", "--store", f"sqlite:{tmp_path / 's.db'}")
    assert (status, out, err) == (0, "no stored sessions\n", "")
    assert [name for name in os.listdir(tmp_path) if name.startswith("s.db")] == []


def test_an_invalid_store_spec_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """Refused before anything starts, for the runtime commands and for ``sessions``."""
    for args in (("run", "hi"), ("sessions", "list")):
        status, out, err = run_cli(capsys, *args, "--store", "sqlite:")
        assert (status, out) == (1, "")
        assert re.fullmatch(r"trio-agents: error: store spec 'sqlite:' names no database.*\n", err)


def test_the_config_files_store_is_used_and_store_beats_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``store = "sqlite:..."`` in the config file; ``--store`` wins over it."""
    db = tmp_path / "conf.db"
    config = tmp_path / "c.toml"
    config.write_text(f'store = "sqlite:{db}"\n')
    status, _, err = run_cli(capsys, "run", "hi", "--session", "c1", "--config", str(config))
    assert status == 0, err
    status, out, _ = run_cli(capsys, "sessions", "list", "--store", f"sqlite:{db}")
    assert "c1" in out
    status, _, err = run_cli(
        capsys, "run", "hi", "--session", "c2", "--config", str(config), "--store", "memory"
    )
    assert status == 0, err
    status, out, _ = run_cli(capsys, "sessions", "list", "--store", f"sqlite:{db}")
    assert "c2" not in out


def test_a_config_files_invalid_store_is_a_listed_problem(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The store spec is checked with the rest of the file."""
    config = tmp_path / "c.toml"
    config.write_text('store = "sqlite:"\n')
    status, out, err = run_cli(capsys, "run", "hi", "--config", str(config))
    assert (status, out) == (1, "")
    assert "store: store spec 'sqlite:' names no database file" in err


async def test_open_runtime_takes_a_spec(tmp_path: Path) -> None:
    """``open_runtime(store="sqlite:PATH")`` is a SqliteStore; what it stored loads again."""
    spec = f"sqlite:{tmp_path / 's.db'}"
    async with ag.open_runtime(store=spec) as root:
        assert isinstance(root.get("sessions"), SqliteStore)
        agent = (await root.agents.create(session_id="r")).agent
        agent.prompt("kept")
        await agent.when_idle()
    async with ag.open_runtime(store=spec) as root:
        resumed = (await root.agents.resume("r")).agent
        assert [r.content for r in resumed.session.records if isinstance(r, UserMessage)] == [
            "kept"
        ]


def test_the_installed_command_on_sqlite(tmp_path: Path) -> None:
    """The real ``trio-agents`` process: run, then list, on one database file."""
    env = {**os.environ, "TRIO_AGENTS_HOME": str(tmp_path / "home"), "NO_COLOR": "1"}
    spec = f"sqlite:{tmp_path / 's.db'}"

    def command(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(TRIO_AGENTS), *args], capture_output=True, text=True, env=env, timeout=60
        )

    ran = command("run", "from a process", "--session", "p1", "--store", spec)
    assert (ran.returncode, ran.stdout) == (0, "from a process\n"), ran.stderr
    listed = command("sessions", "list", "--store", spec)
    assert listed.returncode == 0, listed.stderr
    assert re.search(r"p1\W+\d+\W+.*from a process", listed.stdout), listed.stdout


def test_a_libpq_keyword_dsn_is_a_postgresql_store(monkeypatch: pytest.MonkeyPatch) -> None:
    """``host=... dbname=... user=...`` is PostgreSQL, never a directory of that name; without
    the PostgreSQL support it is one clear error."""
    dsn = "host=127.0.0.1 dbname=agents user=me"
    assert parse_store_spec(dsn) == StoreSpec("postgresql", dsn)
    assert parse_store_spec("dbname = agents").kind == "postgresql"
    monkeypatch.setitem(sys.modules, "trio_agents.session._postgres", None)
    with pytest.raises(StoreSpecError, match=r"^PostgreSQL store not available"):
        store_from_spec(dsn)


@pytest.mark.parametrize(
    ("spec", "meant"),
    [
        ("mem", "memory"),
        ("memroy", "memory"),
        ("Memory ", "memory"),
        ("sqlit:x.db", "'sqlite:x.db'"),
        ("postgres:", "'postgres://'"),
        ("postgresq://u@h/db", "'postgresql://u@h/db'"),
    ],
)
def test_a_slip_of_another_form_is_refused_with_did_you_mean(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    spec: str,
    meant: str,
) -> None:
    """A spec one slip from ``memory`` or a scheme, naming no existing directory, is one line
    with "did you mean", and no directory is made."""
    monkeypatch.chdir(tmp_path)
    status, out, err = run_cli(capsys, "run", "hi", "--store", spec)
    assert (status, out) == (1, "")
    assert re.fullmatch(
        rf"trio-agents: error: store spec {re.escape(repr(spec))} is not an existing directory; "
        rf"did you mean {re.escape(meant)}\? \(.*\)\n",
        err,
    ), err
    assert os.listdir(tmp_path) == []


def test_an_existing_directory_or_a_dotted_path_is_a_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``mem`` that exists is used as it is; ``./mem`` always means a directory."""
    monkeypatch.chdir(tmp_path)
    assert parse_store_spec("./mem") == StoreSpec("jsonl", Path("mem"))
    (tmp_path / "mem").mkdir()
    assert parse_store_spec("mem") == StoreSpec("jsonl", Path("mem"))


def test_an_abbreviated_option_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """``--stor ./s`` is not taken for ``--store``: a usage mistake, "did you mean --store"."""
    with pytest.raises(SystemExit) as exited:
        main(["sessions", "list", "--stor", "./s"])
    out, err = capsys.readouterr()
    assert (exited.value.code, out) == (1, "")
    assert re.fullmatch(
        r"trio-agents: error: unrecognized arguments: --stor \./s; did you mean --store\?\n", err
    ), err
