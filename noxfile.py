"""Automation for trio_agents: ``nox -s tests lint typecheck docs`` is what CI runs.

Every session installs from the ``[dependency-groups]`` of ``pyproject.toml`` so that the
groups stay the single list of what each job needs.
"""

from __future__ import annotations

import nox

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.sessions = ["tests", "lint", "typecheck", "docs"]
nox.options.reuse_existing_virtualenvs = True

PYPROJECT = nox.project.load_toml("pyproject.toml")


def _groups(*names: str) -> list[str]:
    deps: list[str] = []
    for name in names:
        deps.extend(nox.project.dependency_groups(PYPROJECT, name))
    return deps


@nox.session(python="3.11")
def tests(session: nox.Session) -> None:
    """Run the test suite under coverage (branch) and report it per package."""
    session.install("-e", ".", *_groups("test"))
    session.env["COVERAGE_PROCESS_START"] = "pyproject.toml"
    session.run("coverage", "erase")
    session.run("coverage", "run", "-m", "pytest", *session.posargs)
    session.run("coverage", "combine", success_codes=[0, 1])
    session.run("coverage", "report")


@nox.session(python="3.11")
def stress(session: nox.Session) -> None:
    """The stress-style tests with the large budget (tests/budget.py); prints their figures."""
    session.install("-e", ".", *_groups("test"))
    session.env["TRIO_AGENTS_STRESS"] = "1"
    files = session.posargs or [
        "tests/test_stress_acp_fuzz.py",
        "tests/test_stress_acp_process.py",
        "tests/test_stress_crash_loop.py",
        "tests/test_stress_soak.py",
        "tests/test_stress_ownership.py",
        "tests/test_agent_stateful.py",
        "tests/test_kernel_stateful.py",
    ]
    session.run("pytest", "-s", "-p", "no:randomly", "-o", "faulthandler_timeout=900", *files)


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
    session.install("-e", ".", *_groups("typing"))
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
    session.install("-e", ".", *_groups("bench"))
    session.run("python", "-m", "benchmarks", *session.posargs)


@nox.session(python="3.11")
def demo(session: nox.Session) -> None:
    """Run the end-to-end lifecycle demo on the embedded scripted model."""
    session.install("-e", ".")
    session.run("trio-agents", "demo", "--store", "memory")
