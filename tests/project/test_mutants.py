"""The mutation catalogue stays in step with the code: every mutant still applies.

A mutant whose line moved no longer applies, and ``nox -s mutants`` stops at it; this check
says so in the ordinary suite, on the change that moved the line.
"""

from __future__ import annotations

import pytest

from mutants.catalogue import MUTANTS, Mutant
from tests.helpers.paths import ROOT


def test_the_catalogue_has_mutants() -> None:
    """The catalogue is not empty (the check below is not vacuous)."""
    assert len(MUTANTS) > 10


def test_mutant_ids_are_unique() -> None:
    """No two mutants share an id (the runner and the accepted list name them by it)."""
    ids = [mutant.id for mutant in MUTANTS]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda mutant: mutant.id)
def test_a_mutant_applies_to_its_module(mutant: Mutant) -> None:
    """The text a mutant replaces stands exactly once in its module, and its tests exist."""
    source = (ROOT / mutant.path).read_text(encoding="utf-8")
    assert source.count(mutant.old) == 1, (
        f"mutant {mutant.id}: its text stands {source.count(mutant.old)} times in "
        f"{mutant.path}, not once; point it at the line's new home in mutants/catalogue.py"
    )
    missing = [test for test in mutant.tests if not (ROOT / test).is_file()]
    assert not missing, f"mutant {mutant.id} names tests that do not exist: {missing}"
