"""Run every benchmark: ``python -m benchmarks``."""

from __future__ import annotations

from . import (
    bench_agents,
    bench_compaction,
    bench_fibers,
    bench_memory,
    bench_postgres,
    bench_resume,
    bench_sessions,
    bench_shell,
)


def main() -> None:
    """Run the benchmarks in turn; each prints its own figures."""
    bench_fibers.main()
    bench_agents.main()
    bench_compaction.main()
    bench_memory.main()
    bench_sessions.main()
    bench_postgres.main()
    bench_resume.main()
    bench_shell.main()


if __name__ == "__main__":
    main()
