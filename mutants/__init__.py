"""One-line mutations of the ownership core, each run against the tests that should kill it.

``nox -s mutants`` (or ``python -m mutants``) applies each mutant of :mod:`mutants.catalogue`
to a fresh copy of ``trio_agents`` in a temporary directory (put first on ``PYTHONPATH``, so
subprocesses such as the installed ``trio-agents`` command run it too; the work tree is never
changed), runs the mutant's test files with ``-x``, and calls the mutant *killed* when pytest
fails or runs past the time limit, *survived* when it passes. It prints the kill score and every
survivor; a survivor listed in ``tests/mutants-accepted.txt`` (one ``ID  reason`` a line) is
accepted, and any other makes the run fail.

Why a catalogue of our own rather than mutmut or cosmic-ray: both generate every mutant of a
module and run it against the suite, which on the ownership core is thousands of runs of
multi-second trio tests with subprocesses; a curated list of mutations that each break one
promise of the docs, with the test files that pin that promise, runs in minutes and says
which promise a survivor leaves unpinned.
"""
