"""Run the mutants: ``python -m mutants [--all | --sample N [--seed S] | ID ...]``.

By default the run is bounded for a shared machine: the first ``--sample`` mutants of a
shuffle with a fixed seed (12 of them, about five minutes on two busy cores); ``--all`` runs
the whole catalogue; ``ID ...`` runs those. Exit status: 0 when every survivor is accepted in
``tests/mutants-accepted.txt``, 1 otherwise (2 when a mutant no longer applies).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .catalogue import MUTANTS, Mutant

ROOT = Path(__file__).resolve().parent.parent
ACCEPTED = ROOT / "tests" / "mutants-accepted.txt"
#: A mutant that makes a test hang is killed: the suite would fail (pytest-timeout).
TIME_LIMIT = 600.0


def accepted() -> dict[str, str]:
    """The accepted survivors: ``ID  reason`` a line, ``#`` comments."""
    found: dict[str, str] = {}
    for line in ACCEPTED.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            mutant_id, _, reason = line.partition(" ")
            found[mutant_id] = reason.strip()
    return found


def apply(mutant: Mutant, package: Path) -> None:
    """Write the mutated module into the copy ``package`` of ``trio_agents``."""
    path = package.parent / mutant.path
    source = path.read_text(encoding="utf-8")
    if source.count(mutant.old) != 1:
        raise SystemExit(
            f"mutant {mutant.id}: its line is not found exactly once in {mutant.path}; "
            f"update mutants/catalogue.py"
        )
    path.write_text(source.replace(mutant.old, mutant.new), encoding="utf-8")


def run(mutant: Mutant) -> tuple[bool, float]:
    """Whether the tests killed ``mutant``, and how long they took."""
    with tempfile.TemporaryDirectory(prefix=f"mutant-{mutant.id}-") as tmp:
        package = Path(tmp) / "trio_agents"
        shutil.copytree(ROOT / "trio_agents", package, ignore=shutil.ignore_patterns("__pycache__"))
        apply(mutant, package)
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [tmp, os.environ.get("PYTHONPATH")])),
        }
        started = time.monotonic()
        # -P: the working directory (the unmutated package) is not put first on sys.path.
        command = [
            sys.executable,
            "-P",
            "-m",
            "pytest",
            "-x",
            "-q",
            "-p",
            "no:randomly",
            "-p",
            "no:cacheprovider",
            *mutant.tests,
        ]
        try:
            result = subprocess.run(
                command, cwd=ROOT, env=env, capture_output=True, timeout=TIME_LIMIT, check=False
            )
        except subprocess.TimeoutExpired:
            return True, time.monotonic() - started
        return result.returncode != 0, time.monotonic() - started


def choose(args: argparse.Namespace) -> list[Mutant]:
    if args.ids:
        known = {m.id: m for m in MUTANTS}
        unknown = [i for i in args.ids if i not in known]
        if unknown:
            raise SystemExit(f"no mutant {', '.join(unknown)}; see mutants/catalogue.py")
        return [known[i] for i in args.ids]
    if args.all:
        return list(MUTANTS)
    chosen = list(MUTANTS)
    random.Random(args.seed).shuffle(chosen)
    return chosen[: args.sample]


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m mutants", description=__doc__)
    parser.add_argument("ids", nargs="*", help="run only these mutants")
    parser.add_argument("--all", action="store_true", help="run the whole catalogue")
    parser.add_argument("--sample", type=int, default=12, help="how many (default: 12)")
    parser.add_argument("--seed", type=int, default=0, help="the shuffle's seed")
    args = parser.parse_args()
    known = accepted()
    survivors: list[Mutant] = []
    chosen = choose(args)
    for mutant in chosen:
        killed, seconds = run(mutant)
        verdict = "killed" if killed else ("accepted" if mutant.id in known else "SURVIVED")
        print(f"{verdict:9} {mutant.id:36} {seconds:6.1f} s  {mutant.path}", flush=True)
        if not killed:
            survivors.append(mutant)
    killed_count = len(chosen) - len(survivors)
    print(f"\nkill score: {killed_count}/{len(chosen)} killed", end="")
    print(f" ({100 * killed_count / len(chosen):.0f}%)" if chosen else "")
    unexplained = [m for m in survivors if m.id not in known]
    for mutant in survivors:
        reason = known.get(mutant.id, "not accepted: add a test that kills it, or a reason")
        print(f"  survivor {mutant.id}: {reason}")
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
