"""Run every benchmark: ``python -m benchmarks``."""

from __future__ import annotations

from . import bench_fibers


def main() -> None:
    """Run the benchmarks in turn; each prints its own figures."""
    bench_fibers.main()


if __name__ == "__main__":
    main()
