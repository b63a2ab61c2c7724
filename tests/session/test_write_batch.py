"""The blocking half of a JSONL flush: one batch writes every file, then syncs each once."""

from __future__ import annotations

from pathlib import Path

import pytest

from trio_agents.session import _jsonl_io as io


def job(path: Path, data: bytes, *, create: bool = False, sync: bool = True) -> io.WriteJob:
    return io.WriteJob(path, create, data, sync)


def test_every_file_is_written_before_any_is_synced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The syncs come after all the writes, each synced file once, unsynced ones never."""
    order: list[str] = []
    write_all, sync_fd = io._write_all, io._sync_fd

    def write(fd: int, data: bytes) -> None:
        order.append("write")
        write_all(fd, data)

    def sync(fd: int) -> None:
        order.append("sync")
        sync_fd(fd)

    monkeypatch.setattr(io, "_write_all", write)
    monkeypatch.setattr(io, "_sync_fd", sync)
    jobs = [
        job(tmp_path / "a.jsonl", b"a\n", create=True),
        job(tmp_path / "b.jsonl", b"b\n", create=True, sync=False),
        job(tmp_path / "c.jsonl", b"c\n", create=True),
    ]
    assert io.write_batch(jobs, tmp_path, sync_root=True) == [None, None, None]
    assert order == ["write", "write", "write", "sync", "sync"]
    assert [(tmp_path / n).read_bytes() for n in ("a.jsonl", "b.jsonl", "c.jsonl")] == [
        b"a\n",
        b"b\n",
        b"c\n",
    ]
    assert not list(tmp_path.glob("*.new"))


def test_one_failing_job_does_not_stop_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Open, write, sync and rename failures are reported per job; the rest still land."""
    good = tmp_path / "good.jsonl"
    good.write_bytes(b"h\n")
    no_dir = tmp_path / "missing" / "x.jsonl"
    bad_write = tmp_path / "w.jsonl"
    bad_sync = tmp_path / "s.jsonl"
    write_all, sync_fd = io._write_all, io._sync_fd
    fds: dict[str, int] = {}

    def write(fd: int, data: bytes) -> None:
        if data == b"w\n":
            raise OSError(28, "No space left on device")
        if data == b"s\n":
            fds["s"] = fd
        write_all(fd, data)

    def sync(fd: int) -> None:
        if fd == fds.get("s"):
            raise OSError(5, "Input/output error")
        sync_fd(fd)

    monkeypatch.setattr(io, "_write_all", write)
    monkeypatch.setattr(io, "_sync_fd", sync)
    results = io.write_batch(
        [
            job(no_dir, b"n\n", create=True),
            job(bad_write, b"w\n", create=True),
            job(bad_sync, b"s\n", create=True),
            job(good, b"g\n"),
        ],
        tmp_path,
        sync_root=False,
    )
    assert [type(r).__name__ if r else None for r in results] == [
        "FileNotFoundError",
        "OSError",
        "OSError",
        None,
    ]
    assert good.read_bytes() == b"h\ng\n"
    assert not bad_write.exists()
    assert not bad_sync.exists()


def test_a_failed_rename_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A new file that cannot be moved into place is an error of its job alone."""

    def replace(src: object, dst: object) -> None:
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr("os.replace", replace)
    [result] = io.write_batch([job(tmp_path / "r.jsonl", b"r\n", create=True)], tmp_path, False)
    assert isinstance(result, OSError)
    assert not (tmp_path / "r.jsonl").exists()
