"""Tracing off costs no import: the package and an untraced runtime never load OpenTelemetry."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import sys
    import trio
    import trio_agents as ta
    from trio_agents.shell import LocalShell, tool_bash

    async def main():
        async with ta.open_runtime() as root:
            await root.plugin(LocalShell())
            await root.plugin(tool_bash)
            agent = (await root.agents.create()).agent
            agent.prompt("!bash echo hi")
            await agent.when_idle()
            await agent.compact()

    trio.run(main)
    loaded = [m for m, module in sys.modules.items() if module is not None]
    # The instrumentation ran (its points are imported), and imported no opentelemetry.
    print("trio_agents.tracing" in loaded, sorted(m for m in loaded if m.startswith("opentelem")))
    """
)


def run(script: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_an_untraced_runtime_never_imports_opentelemetry() -> None:
    """Importing the package and running a turn with a shell command imports no opentelemetry."""
    assert run(SCRIPT) == "True []\n"


def test_an_untraced_runtime_runs_without_the_otel_extra() -> None:
    """With opentelemetry not importable at all (the extra absent), a runtime still runs."""
    blocked = "import sys\nsys.modules['opentelemetry'] = None\n" + SCRIPT
    assert run(blocked) == "True []\n"
