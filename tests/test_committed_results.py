"""The committed results that README.md and REPRODUCE.md cite for the headline are what their commands write from the
committed records today (analysis/recheck.py on the real folders): a run committed into records/ without its results
regenerated, or a rule of the analysis changed without it, fails here. The headline's folders only: the regime
comparison (README's "What growbench finds", REPRODUCE's verdict) and the budget study's two; `python -m
analysis.recheck` checks all (results/mini alone takes minutes)."""
import pytest

from analysis import recheck

HEADLINE = ("regime", "budget-regime", "budget")


@pytest.mark.parametrize("name", HEADLINE)
def test_a_headline_results_folder_is_what_its_command_writes_from_the_committed_records(name):
    folder = recheck.RESULTS / name
    argv, at = recheck.command_of(folder)
    differences = recheck.recheck(folder, argv, at)
    assert differences == [], (f"{folder} is not what `python {' '.join(argv)}` writes from the records today "
                               f"(regenerate it and commit both): {'; '.join(differences)}")
    assert not list(folder.parent.glob(f"{recheck.SIBLING}*")), "the regenerated copy was left beside the folder"
