"""``--fsync-delay-us N``: run the benchmarks as on a disk whose sync takes N us longer.

The store benchmarks compare group commit (SQLite, PostgreSQL: one sync for many sessions'
flushes) with one sync per session file (JSONL). How much group commit wins depends on what a
sync costs against what a turn costs: on a local SSD whose sync takes 0.2 ms, the agents' own
work is most of a flushed turn and no store can go much faster than the ceiling; on a disk
whose sync takes milliseconds (a network volume, a disk without a write cache) the sync is
most of it. To measure the second kind of disk on the first, ``slow_fsync.c`` is compiled
(with the machine's C compiler) into a shared library that makes ``fsync`` and
``fdatasync`` sleep N us before they sync for real, and every benchmark interpreter runs with
it preloaded (``LD_PRELOAD``): Python's ``os.fsync``, SQLite's syncs and the PostgreSQL
server the benchmark starts (it inherits the environment) all pay it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

__all__ = ["described", "environment"]

_SOURCE = Path(__file__).with_name("slow_fsync.c")
DELAY_VARIABLE = "TRIO_AGENTS_FSYNC_DELAY_US"


def environment(delay_us: int) -> dict[str, str]:
    """The environment of a benchmark interpreter whose syncs take ``delay_us`` longer.

    Raises:
        RuntimeError: no C compiler (``cc``/``gcc``) to build the shim with.
    """
    env = dict(os.environ)
    if delay_us <= 0:
        return env
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise RuntimeError("--fsync-delay-us needs a C compiler (cc or gcc) to build its shim")
    library = Path(tempfile.gettempdir(), f"trio-agents-slow-fsync-{os.getuid()}.so")
    subprocess.run(
        [compiler, "-shared", "-fPIC", "-O2", "-o", str(library), str(_SOURCE), "-ldl"],
        check=True,
    )
    preload = env.get("LD_PRELOAD")
    env["LD_PRELOAD"] = f"{library} {preload}" if preload else str(library)
    env[DELAY_VARIABLE] = str(delay_us)
    return env


def described() -> str:
    """``", every fsync N us slower"`` when this interpreter runs with the shim, else ``""``."""
    delay = os.environ.get(DELAY_VARIABLE)
    return f", every fsync {int(delay):,} us slower (emulated)" if delay else ""
