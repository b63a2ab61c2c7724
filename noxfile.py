"""Automation for trio_agents: ``nox -s tests lint typecheck docs`` is what CI runs.

Every session installs from the ``[dependency-groups]`` of ``pyproject.toml`` so that the
groups stay the single list of what each job needs.

``tests`` runs once per declared Python (3.11, 3.12, 3.13) that the machine has, and skips the
missing ones instead of failing (``error_on_missing_interpreters`` is off, also on CI, where
nox would otherwise turn it on): a machine with only 3.11 still passes ``nox -s tests lint
typecheck docs``, and one with more runs the suite on each. ``nox -s tests-3.11`` runs one.
"""

from __future__ import annotations

from pathlib import Path

import nox

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.sessions = ["tests", "lint", "typecheck", "docs"]
nox.options.reuse_existing_virtualenvs = True
nox.options.error_on_missing_interpreters = False

#: The versions pyproject's classifiers declare; the other sessions run on the oldest.
PYTHONS = ["3.11", "3.12", "3.13"]

PYPROJECT = nox.project.load_toml("pyproject.toml")

#: Installs the pinned TypeScript ACP SDK for tests/acp/test_typescript.py (as .ci/run does).
NPM_CI = ["npm", "ci", "--prefix", "tests/acp_ts", "--no-audit", "--no-fund", "--loglevel=error"]


def _groups(*names: str) -> list[str]:
    deps: list[str] = []
    for name in names:
        deps.extend(nox.project.dependency_groups(PYPROJECT, name))
    return deps


@nox.session(python=PYTHONS)
def tests(session: nox.Session) -> None:
    """Run the test suite under coverage (branch) and report it; below the floor fails."""
    session.install("-e", ".[otel]", *_groups("test"))
    # The TypeScript ACP client's test (tests/acp/test_typescript.py) needs node and the SDK
    # that tests/acp_ts/package-lock.json pins.
    if not Path("tests/acp_ts/node_modules").is_dir():
        session.run_install(*NPM_CI, external=True, silent=True)
    # Absolute: the suite's subprocesses run in other directories (a relative path made
    # coverage print a traceback on the stderr of every command run from a tmp_path).
    session.env["COVERAGE_PROCESS_START"] = str(Path("pyproject.toml").resolve())
    session.run("coverage", "erase")
    session.run("coverage", "run", "-m", "pytest", *session.posargs)
    session.run("coverage", "combine", success_codes=[0, 1])
    # The floor (fail_under in pyproject) is for the whole suite; a run of some tests
    # (``nox -s tests -- tests/test_x.py``) reports without it.
    session.run("coverage", "report", *(["--fail-under=0"] if session.posargs else []))


@nox.session(python="3.11")
def stress(session: nox.Session) -> None:
    """The stress-style tests with the large budget (tests/helpers/budget.py); prints their
    figures."""
    session.install("-e", ".", *_groups("test"))
    session.env["TRIO_AGENTS_STRESS"] = "1"
    files = session.posargs or [
        "tests/stress/test_acp_fuzz.py",
        "tests/stress/test_acp_process.py",
        "tests/stress/test_crash_loop.py",
        "tests/stress/test_soak.py",
        "tests/stress/test_ownership.py",
        "tests/stress/test_supervision.py",
        "tests/agent/test_stateful.py",
        "tests/kernel/test_stateful.py",
    ]
    # The large budget runs for minutes: the per-test limits of pyproject would cut it short.
    limits = ["-o", "faulthandler_timeout=900", "-o", "timeout=1800"]
    session.run("pytest", "-s", "-p", "no:randomly", *limits, *files)


@nox.session(python="3.11")
def chaos(session: nox.Session) -> None:
    """The work queue's chaos test, long: 4 worker processes, 3 client processes, 510
    sessions, 5100 prompts, a SIGKILL or SIGSTOP of a random worker every 1.5 s
    (tests/workers/test_chaos.py; the suite runs a short version). Needs PostgreSQL's
    server binaries (tests/helpers/pg_server.py)."""
    session.install("-e", ".", *_groups("test"))
    session.env["TRIO_AGENTS_CHAOS"] = "long"
    limits = ["-o", "faulthandler_timeout=1800", "-o", "timeout=2400"]
    files = session.posargs or ["tests/workers/test_chaos.py"]
    session.run("pytest", "-s", "-p", "no:randomly", *limits, *files)


@nox.session(python="3.11")
def mutants(session: nox.Session) -> None:
    """Mutation testing of the ownership core (mutants/): prints the kill score and the
    survivors; fails on a survivor not accepted in tests/mutants-accepted.txt. Bounded by
    default (a fixed sample); ``nox -s mutants -- --all`` runs the whole catalogue."""
    session.install("-e", ".", *_groups("test"))
    session.run("python", "-m", "mutants", *session.posargs)


@nox.session(python="3.11")
def lint(session: nox.Session) -> None:
    """Check style and the async rules with ruff (lint and format)."""
    session.install(*_groups("lint"))
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session(python="3.11")
def typecheck(session: nox.Session) -> None:
    """Type-check the package, tests and benchmarks with mypy in strict mode, and the typed
    user plugin of tests/typing with no Any allowed."""
    session.install("-e", ".[otel]", *_groups("typing"))
    session.run("mypy")
    # A user's plugin, checked the way its author would: strict, and no Any may reach it.
    session.run("mypy", "--strict", "--disallow-any-expr", "tests/typing")


@nox.session(python="3.11")
def docs(session: nox.Session) -> None:
    """Build the Sphinx documentation with warnings as errors."""
    session.install("-e", ".", *_groups("docs"))
    session.run("sphinx-build", "-W", "--keep-going", "-b", "html", "docs", "docs/_build/html")


@nox.session(python="3.11")
def bench(session: nox.Session) -> None:
    """Run the benchmarks; each prints its ratio to a raw-trio floor measured in the same run."""
    session.install("-e", ".[otel]", *_groups("bench"))
    session.run("python", "-m", "benchmarks", *session.posargs)


@nox.session(python="3.11", name="bench-peers")
def bench_peers(session: nox.Session) -> None:
    """Run the peer frameworks (the pinned ``peers`` group) and trio_agents on the same scripted
    work in one run, with raw trio and raw asyncio floors; prints the "x best peer" column."""
    session.install("-e", ".", *_groups("peers"))
    session.run("python", "-m", "benchmarks.bench_peers", *session.posargs)


@nox.session(python="3.11")
def demo(session: nox.Session) -> None:
    """Run the end-to-end lifecycle demo on the embedded scripted model."""
    session.install("-e", ".")
    session.run("trio-agents", "demo", "--store", "memory")
