"""analysis/budget.py, the budget study, on small synthetic records in the real format (tests/records.py): its table
is the records' savings (a changed record changes it), a method with no run at a budget is absent there (neither 0
nor interpolated), the no-growth control is drawn as its own line, and bad input is one line, exit 2, nothing
written."""
import math
import shutil

import numpy as np
import pytest

from analysis import budget
from records import SCRATCH, write_run      # scratch reaches 4.0 at 400 FLOPs, step 4

TASK, CONTROL_TASK = "bert_small_base", "bert_small_base_smallcont"
DOUBLE = [(2 * s, 2 * f, v) for s, f, v in SCRATCH]          # a budget twice as long: 8 steps, 4.0 at 800 FLOPs


def records(tmp_path):
    """Two budgets: `a` (4 steps) with LiGO and StackBERT, its control reaching scratch's 4.0 at 100 of 400 FLOPs
    (saves 75%); `b` (8 steps) with LiGO only, its control ending short of scratch."""
    for seed in (0, 1):
        write_run(tmp_path / "a", "scratch", SCRATCH, seed=seed)
        write_run(tmp_path / "a", "ligo", [(0, 10, 7.0), (2, 200, 4.0), (4, 400, 3.8)], seed=seed)       # saves 50%
        write_run(tmp_path / "a", "stackbert", [(0, 0, 7.0), (4, 300, 4.0)], seed=seed)                  # 25%
        write_run(tmp_path / "a-ctl", "direct_copy", [(0, 0, 5.0), (2, 100, 4.0), (4, 200, 3.9)], seed=seed,
                  task=CONTROL_TASK)
        write_run(tmp_path / "b", "scratch", DOUBLE, seed=seed, steps=8)
        write_run(tmp_path / "b", "ligo", [(0, 10, 7.0), (8, 400, 4.0)], seed=seed, steps=8)             # 50%
        write_run(tmp_path / "b-ctl", "direct_copy", [(0, 0, 5.0), (8, 200, 4.2)], seed=seed, task=CONTROL_TASK,
                  steps=8)
    return [a for name in ("a", "b") for a in ("--point", f"{name}={tmp_path / name}:{tmp_path / f'{name}-ctl'}")]


def row(md: str, name: str) -> list[str]:
    """The cells of the table row named `name` in budget-<task>.md."""
    line = next(li for li in md.splitlines() if li.startswith(f"| {name} |"))
    return [c.strip() for c in line.strip("|").split("|")][1:]


def test_the_table_is_the_records_savings_and_a_changed_record_changes_it(tmp_path):
    points, out = records(tmp_path), tmp_path / "out"
    argv = ["--task", TASK, *points, "--out", str(out), "--formats", "png"]
    assert budget.main(argv) == 0
    assert {p.name for p in out.iterdir()} == {"budget-bert_small_base.png", "budget-bert_small_base.md",
                                               "budget-bert_small_base-seeds.csv", ".written"}
    md = (out / "budget-bert_small_base.md").read_text()
    assert row(md, "LiGO") == ["50.0% ± 0.0 (s0 s1)", "50.0% ± 0.0 (s0 s1)"]
    assert row(md, budget.CONTROL_NAME) == ["75.0% ± 0.0 (s0 s1)", "not reached"]
    assert row(md, "large model's budget") == ["4 steps", "8 steps"]       # read from scratch's records
    # the control reaches scratch at `a`: its savings measure the small model's training kept, and the caption says so
    assert row(md, "regime check")[0] == "FAIL" and "not what growth is worth" in md.split("- **b**")[0]
    # LiGO's seed 1 at `a` now needs 300 FLOPs: 25% saved, so the mean moves to 37.5 and the spread opens
    shutil.rmtree(tmp_path / "a" / "bert_small_base-mini" / "ligo-s1")
    write_run(tmp_path / "a", "ligo", [(0, 10, 7.0), (4, 300, 4.0)], seed=1)
    assert budget.main(argv) == 0
    md = (out / "budget-bert_small_base.md").read_text()
    assert row(md, "LiGO") == [f"37.5% ± {100 * math.sqrt(2 * 0.125 ** 2):.1f} (s0 s1)", "50.0% ± 0.0 (s0 s1)"]


def test_a_method_absent_at_a_budget_is_absent_not_zero_and_the_control_is_its_own_line(tmp_path, monkeypatch):
    drawn = {}
    monkeypatch.setattr(budget.figures, "save", lambda fig, path, formats: drawn.setdefault("fig", fig) and [])
    out = tmp_path / "out"
    assert budget.main(["--task", TASK, *records(tmp_path), "--out", str(out), "--formats", "png"]) == 0
    md = (out / "budget-bert_small_base.md").read_text()
    assert row(md, "StackBERT") == ["25.0% ± 0.0 (s0 s1)", budget.ABSENT]
    assert "StackBERT at b" in md                                     # the caption names what is absent where
    seeds = (out / "budget-bert_small_base-seeds.csv").read_text().splitlines()
    assert not [li for li in seeds if li.startswith("b,") and ",stackbert," in li]
    lines = {line.get_label(): line for line in drawn["fig"].axes[0].lines}
    stackbert = lines["StackBERT"].get_ydata()
    assert stackbert[0] == pytest.approx(25.0) and np.isnan(stackbert[1])   # a break in the line, not 0
    control = lines[budget.CONTROL_NAME]
    assert control.get_linestyle() == "--" and control.get_color() == "black"
    assert control.get_ydata()[0] == pytest.approx(75.0) and np.isnan(control.get_ydata()[1])   # not reached at b


def test_a_budget_failing_the_control_and_another_check_names_both():
    from types import SimpleNamespace

    from analysis.regime import Check
    unigram = Check(TASK, "regime", "small final <= unigram - 1 nat", "FAIL", "small 5.772 vs 5.349")
    control = Check(TASK, "regime", "the small model trained on (no growth) stays short of scratch", "FAIL",
                    "s1: trained on 5.138 vs scratch 5.197")
    status, text = budget.regime_status(SimpleNamespace(checks=[unigram, control]))
    assert status == "FAIL" and "not what growth is worth [s1: trained on 5.138" in text
    assert text.endswith("failed too: small final <= unigram - 1 nat")
    assert "failed too" not in budget.regime_status(SimpleNamespace(checks=[control]))[1]


@pytest.mark.parametrize("change, said", [
    (lambda argv, tmp: [*argv[:1], "bert_nonexistent", *argv[2:]], "no scratch run of bert_nonexistent"),
    (lambda argv, tmp: [a.replace("a=", "") for a in argv], "give NAME=RUNS[:CONTROLS]"),
    (lambda argv, tmp: [a.replace(str(tmp / "a-ctl"), str(tmp / "gone")) for a in argv], "no such directory")])
def test_bad_input_is_one_error_line_exit_2_and_nothing_written(change, said, tmp_path, capsys):
    out = tmp_path / "out"
    argv = change(["--task", TASK, *records(tmp_path), "--out", str(out)], tmp_path)
    assert budget.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and said in err[0], err
    assert not out.exists()


def section_rows(md: str, heading: str) -> dict[str, list[str]]:
    """The rows of the table under `heading` in the 'What the table shows' section, by their first cell."""
    part = md.split(f"### {heading}")[1].split("###")[0]
    lines = [li for li in part.splitlines() if li.startswith("| ") and not li.startswith("| budget |")]
    return {cells[0]: cells[1:] for li in lines for cells in [[c.strip() for c in li.strip("|").split("|")]]}


def test_what_the_table_shows_is_written_from_it_by_the_verdicts_rule(tmp_path):
    points, out = records(tmp_path), tmp_path / "out"
    for seed in (0, 1):       # Net2Net's curves bit-equal to StackBERT's: one computation, counted once
        write_run(tmp_path / "a", "net2net", [(0, 0, 7.0), (4, 300, 4.0)], seed=seed)
    argv = ["--task", TASK, *points, "--out", str(out), "--formats", "png"]
    assert budget.main(argv) == 0
    md = (out / "budget-bert_small_base.md").read_text()
    first = section_rows(md, "First at each budget")
    assert first["a"] == ["FAIL", "LiGO 50.0 ± 0.0", "StackBERT = Net2Net 25.0 ± 0.0",
                          "+25.0 points, beyond the spread", "s0 LiGO, s1 LiGO"]
    assert first["b"][1:4] == ["LiGO 50.0 ± 0.0", "—", "the only one run"]
    moves = section_rows(md, "From one budget to the next")
    assert moves["LiGO"] == ["+0.0, within the spread (level at s0 s1)"]
    assert moves["StackBERT"] == ["—"] and "Net2Net" not in moves        # absent at b; one row for the two labels
    # LiGO's seed 1 at `a` now saves 25%: the lead over StackBERT falls inside the spread, the seeds part ways
    shutil.rmtree(tmp_path / "a" / "bert_small_base-mini" / "ligo-s1")
    write_run(tmp_path / "a", "ligo", [(0, 10, 7.0), (4, 300, 4.0)], seed=1)
    assert budget.main(argv) == 0
    md = (out / "budget-bert_small_base.md").read_text()
    first = section_rows(md, "First at each budget")
    assert first["a"][3:] == ["+12.5 points, within the spread", "s0 LiGO, s1 LiGO and StackBERT = Net2Net"]
    assert section_rows(md, "From one budget to the next")["LiGO"] == [
        "+12.5, within the spread (level at s0; higher at s1)"]
    # one seed decides nothing
    assert budget.main([*argv, "--seeds", "0"]) == 0
    md = (out / "budget-bert_small_base.md").read_text()
    assert section_rows(md, "First at each budget")["a"][3] == "+25.0 points, not decided (1 seed)"
