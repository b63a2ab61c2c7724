"""What the per-job supervisor and the sandbox cost: ``shell.run("true")`` with the supervisor,
without it, and under ``SandboxShell`` (bubblewrap, when ``bwrap`` is installed).

Each run starts ``/bin/sh -c true`` and awaits its exit and the end of its output. Without the
supervisor the executor spawns the shell directly as a process-group leader (the fallback of
every platform but Linux); with it, the executor spawns ``python -I -S _supervisor.py``, which
forks the shell, reports its pid and exit over a socket pair, and exits once nothing of the job
is left. The floor is ``trio.run_process(["/bin/sh", "-c", "true"])`` in the same run: the
least a trio program pays for one shell. Figures are runs per second, the best of several
rounds run interleaved, and the difference per run in milliseconds. The sandboxed row is
``workspace-write`` (the default policy): the supervisor forks ``bwrap``, which makes the
mount, PID, IPC and network namespaces before it runs the shell.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Awaitable, Callable

import trio

from trio_agents.kernel import open_root
from trio_agents.shell import LocalShell, SandboxShell, ShellExecRequest
from trio_agents.shell._child import supervisor_available
from trio_agents.shell._local import LocalShellExecutor

from ._common import best_rates, line

ROUNDS = 3
RUNS = 40


async def _floor(runs: int) -> float:
    start = time.perf_counter()
    for _ in range(runs):
        await trio.run_process(["/bin/sh", "-c", "true"])
    return time.perf_counter() - start


def _executor(supervise: bool, sandbox: bool = False) -> Callable[[int], Awaitable[float]]:
    async def measure(runs: int) -> float:
        async with open_root() as root:
            if sandbox:
                await root.plugin(SandboxShell())
            else:
                await root.plugin(LocalShell(), LocalShell.Config(supervise=supervise))
            shell = root.get("shell")
            assert isinstance(shell, LocalShellExecutor)
            spec = shell.resolve(ShellExecRequest("true"))
            start = time.perf_counter()
            for _ in range(runs):
                result = await shell.run(spec)
                assert result.exit_code == 0
            return time.perf_counter() - start

    return measure


async def _main() -> None:
    sides = [("raw trio.run_process", _floor), ("LocalShell, process group", _executor(False))]
    if supervisor_available():
        sides.append(("LocalShell, supervised", _executor(True)))
        if shutil.which("bwrap") is not None:
            sides.append(("SandboxShell, workspace-write", _executor(True, sandbox=True)))
    rates = await best_rates(sides, ROUNDS, RUNS)
    print(f"shell runs of `true` ({RUNS} per round, best of {ROUNDS})")
    for name, rate in rates.items():
        print(line(name, rate))
    if "LocalShell, supervised" in rates:
        extra = 1000 / rates["LocalShell, supervised"] - 1000 / rates["LocalShell, process group"]
        print(f"  {'supervisor overhead per run':<52}{extra:>12.1f} ms")
    if "SandboxShell, workspace-write" in rates:
        extra = (
            1000 / rates["SandboxShell, workspace-write"] - 1000 / rates["LocalShell, supervised"]
        )
        print(f"  {'sandbox overhead per run (over supervised)':<52}{extra:>12.1f} ms")


def main() -> None:
    """Print the figures."""
    trio.run(_main)


if __name__ == "__main__":
    main()
