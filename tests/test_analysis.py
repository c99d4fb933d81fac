"""Analysis on synthetic run records with known answers (written in the real format by runs.record.RunWriter).

Scratch reaches loss 4.0 at 400 FLOPs; a method that reaches it at 200 saves exactly 0.5, and so on.
"""
import json
import math
from pathlib import Path

import pandas as pd
import pytest

from analysis import all_savings, cost_to_reach, curves_frame, load_runs, runs_frame, summarize
from analysis.tables import fit_steps_table, init_table, savings_table, to_latex, to_markdown
from records import SCRATCH, write_run      # tests/records.py: synthetic records in the real format
from tasks import SCALES


def analyse(root):
    runs, problems = load_runs(root)
    r, c = runs_frame(runs), curves_frame(runs)
    seeds = all_savings(c, r)
    return r, c, seeds, summarize(seeds), problems


def row(df, label, seed=0):
    return df[(df["label"] == label) & (df["seed"] == seed)].iloc[0]


def test_half_the_flops_is_a_saving_of_one_half(tmp_path):
    write_run(tmp_path, "scratch", SCRATCH)
    write_run(tmp_path, "stackbert", [(0, 0, 9.0), (1, 50, 7.0), (2, 100, 5.0), (3, 150, 4.5), (4, 200, 4.0)])
    _, _, seeds, _, _ = analyse(tmp_path)
    s = row(seeds, "stackbert")
    assert s["target"] == 4.0 and s["reached"]
    assert s["flops_to_target"] == pytest.approx(200) and s["saving_flops"] == pytest.approx(0.5)
    assert s["saving_wall"] == pytest.approx(0.5)
    assert row(seeds, "scratch")["saving_flops"] == pytest.approx(0.0)


def test_interpolates_linearly_between_eval_points(tmp_path):
    curve = pd.DataFrame({"step": [0, 1, 2], "flops": [0.0, 100.0, 200.0], "wall": [0.0, 1.0, 2.0],
                          "eval_loss": [9.0, 6.0, 3.0]})
    # 4.0 lies 2/3 of the way from 6.0 (at 100) to 3.0 (at 200)
    assert cost_to_reach(curve, 4.0) == pytest.approx(100 + 200 / 3)
    assert cost_to_reach(curve, 4.0, cost="wall") == pytest.approx(1 + 2 / 3)
    write_run(tmp_path, "scratch", SCRATCH)
    write_run(tmp_path, "ligo", [(0, 0, 9.0), (1, 100, 6.0), (2, 200, 3.0)])
    _, _, seeds, _, _ = analyse(tmp_path)
    assert row(seeds, "ligo")["saving_flops"] == pytest.approx(1 - (100 + 200 / 3) / 400)


def test_never_reaching_the_target_is_reported_not_a_number(tmp_path):
    write_run(tmp_path, "scratch", SCRATCH)
    write_run(tmp_path, "ki", [(0, 0, 10.0), (1, 300, 6.0), (2, 600, 4.5)])
    r, _, seeds, summary, _ = analyse(tmp_path)
    ki = row(seeds, "ki")
    assert not ki["reached"] and math.isnan(ki["flops_to_target"]) and math.isnan(ki["saving_flops"])
    table = savings_table(summary, r, "bert_small_base", "mini")
    ki_row = table[table["Method"] == "KI"].iloc[0]
    assert ki_row["Savings (FLOPs)"] == "not reached" and ki_row["Savings (Walltime)"] == "not reached"
    assert "not reached" in to_markdown(table)


def test_fit_cost_counts_and_reaching_at_step_zero_costs_the_fit(tmp_path):
    write_run(tmp_path, "scratch", SCRATCH)
    # the grown model is already below the target right after a fit of 40 FLOPs
    write_run(tmp_path, "ligo", [(0, 40, 3.9), (1, 140, 3.5)])
    r, _, seeds, _, _ = analyse(tmp_path)
    assert row(seeds, "ligo")["flops_to_target"] == pytest.approx(40)
    assert row(seeds, "ligo")["saving_flops"] == pytest.approx(0.9)
    assert row(r, "ligo")["fit_flops"] == 40


def test_small_pretraining_variant_charges_the_small_model(tmp_path):
    write_run(tmp_path, "scratch", SCRATCH)
    small = {"path": "x", "pretrain_flops": 100.0, "pretrain_wall": 1.0, "source": "cache"}
    write_run(tmp_path, "stackbert", [(0, 0, 9.0), (1, 100, 6.0), (2, 200, 4.0)], small=small)
    # another curve: bit-equal curves would be read as one computation (analysis/identical.py)
    write_run(tmp_path, "net2net", [(0, 0, 9.0), (1, 100, 6.5), (2, 200, 4.0)],
              small={"path": "y", "pretrain_flops": None, "source": "given"})
    r, _, seeds, summary, _ = analyse(tmp_path)
    s = row(seeds, "stackbert")
    assert s["saving_flops"] == pytest.approx(0.5)
    assert s["saving_flops_with_small"] == pytest.approx(1 - 300 / 400)
    assert s["saving_wall_with_small"] == pytest.approx(1 - 3 / 4)
    assert row(seeds, "scratch")["saving_flops_with_small"] == pytest.approx(0.0)   # nothing to charge
    table = savings_table(summary, r, "bert_small_base", "mini")
    assert table.set_index("Method").loc["Net2Net", "Savings incl. small-model pretraining (FLOPs)"] == "unknown"


def test_seed_s_is_measured_against_scratch_seed_s_only(tmp_path):
    write_run(tmp_path, "scratch", SCRATCH, seed=0)                                        # final 4.0 at 400
    write_run(tmp_path, "scratch", [(s, 2 * f, v + 1) for s, f, v in SCRATCH], seed=1)     # final 5.0 at 800
    write_run(tmp_path, "ligo", [(0, 0, 9.0), (1, 100, 4.5), (2, 200, 4.0)], seed=0)
    write_run(tmp_path, "ligo", [(0, 0, 9.0), (1, 100, 6.5), (2, 200, 4.5)], seed=1)   # 5.0 at 175
    write_run(tmp_path, "ligo", [(0, 0, 9.0), (1, 100, 3.0)], seed=2)                      # no scratch s2
    r, _, seeds, summary, _ = analyse(tmp_path)
    s0, s1, s2 = row(seeds, "ligo", 0), row(seeds, "ligo", 1), row(seeds, "ligo", 2)
    # each seed: its own scratch seed's final value is the target, its total cost the denominator
    assert s0["target"] == 4.0 and s0["scratch_flops"] == 400 and s0["saving_flops"] == pytest.approx(0.5)
    assert s1["target"] == 5.0 and s1["scratch_flops"] == 800
    assert s1["flops_to_target"] == pytest.approx(175) and s1["saving_flops"] == pytest.approx(1 - 175 / 800)
    # a seed without its scratch twin gets no number, never another seed's (or a seed-mean) denominator
    assert not s2["paired"] and not s2["reached"] and math.isnan(s2["saving_flops"])
    assert s2["note"] == "no scratch s2"
    lig = summary.set_index("label").loc["ligo"]
    expect = pd.Series([0.5, 1 - 175 / 800])
    assert lig["saving_flops_mean"] == pytest.approx(expect.mean())
    assert lig["saving_flops_std"] == pytest.approx(expect.std(ddof=1))
    assert (lig["n_seeds"], lig["n_paired"], lig["n_reached"]) == (3, 2, 2)
    cell = savings_table(summary, r, "bert_small_base", "mini").set_index("Method").loc["LiGO", "Savings (FLOPs)"]
    assert cell == f"{100 * expect.mean():.1f}% ± {100 * expect.std(ddof=1):.1f} (no scratch s2)"


def test_a_single_seed_without_its_scratch_seed_has_no_saving(tmp_path):
    write_run(tmp_path, "scratch", SCRATCH, seed=0)
    write_run(tmp_path, "ligo", [(0, 0, 9.0), (1, 100, 3.0)], seed=1)
    r, _, _, summary, _ = analyse(tmp_path)
    t = savings_table(summary, r, "bert_small_base", "mini").set_index("Method")
    assert t.loc["LiGO", "Savings (FLOPs)"] == "no scratch s1"
    assert t.loc["LiGO", "Savings incl. small-model pretraining (Walltime)"] == "no scratch s1"


def test_a_shallower_stage_crossing_the_target_does_not_count(tmp_path):
    """MSLT-like: the shallow stages (full_model False) get below scratch's final loss first; only the full
    model's points count, interpolated from the full-model point before, never from a shallow one."""
    write_run(tmp_path, "scratch", SCRATCH)
    d = write_run(tmp_path, "mslt", [(0, 0, 9.0), (1, 50, 3.8), (2, 100, 3.5), (3, 200, 4.4), (4, 300, 3.6)])
    rows = [json.loads(line) for line in (d / "metrics.jsonl").read_text().splitlines()]
    for r in rows:
        r["full_model"] = r["step"] >= 3
        r["stage"] = "full" if r["step"] >= 3 else f"stack{r['step']}"
    (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    _, curves, seeds, _, _ = analyse(tmp_path)
    s = row(seeds, "mslt")
    # full-model points: (200, 4.4), (300, 3.6): 4.0 is half way
    assert s["flops_to_target"] == pytest.approx(250) and s["saving_flops"] == pytest.approx(1 - 250 / 400)
    assert list(curves[curves["label"] == "mslt"]["full_model"]) == [False, False, False, True, True]


def test_a_staged_record_without_full_model_counts_from_its_last_stage_only(tmp_path):
    """Records made before `full_model` was logged: a single-stage run is the full model throughout; in a staged
    one only its last stage counts (its init point and shallower stages cannot be told apart)."""
    write_run(tmp_path, "scratch", SCRATCH)
    d = write_run(tmp_path, "mslt", [(0, 0, 3.0), (1, 50, 3.8), (2, 100, 4.5), (3, 150, 3.9)])
    rows = [json.loads(line) for line in (d / "metrics.jsonl").read_text().splitlines()]
    for r in rows:
        r["stage"] = ["init", "stack1", "full", "full"][r["step"]]
    (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    r, curves, seeds, summary, _ = analyse(tmp_path)
    assert list(curves[curves["label"] == "mslt"]["full_model"]) == [False, False, True, True]
    assert curves[curves["label"] == "scratch"]["full_model"].all()
    # 4.0 between (100, 4.5) and (150, 3.9), not at step 0 (3.0) nor in the shallow stage (3.8 at 50)
    assert row(seeds, "mslt")["flops_to_target"] == pytest.approx(100 + 50 * 5 / 6)


def test_a_staged_run_with_no_full_model_point_says_so(tmp_path):
    write_run(tmp_path, "scratch", SCRATCH)
    d = write_run(tmp_path, "mslt", [(0, 0, 9.0), (1, 50, 3.8)])
    rows = [json.loads(line) for line in (d / "metrics.jsonl").read_text().splitlines()]
    (d / "metrics.jsonl").write_text("".join(json.dumps({**r, "full_model": False}) + "\n" for r in rows))
    r, _, seeds, summary, _ = analyse(tmp_path)
    assert row(seeds, "mslt")["note"] == "no full-model eval"
    cell = savings_table(summary, r, "bert_small_base", "mini").set_index("Method").loc["MSLT", "Savings (FLOPs)"]
    assert cell == "no full-model eval: s0"


def mark_same(d: Path, fingerprint: str) -> None:
    """Give a record's step-0 row a computation fingerprint (runs/computation.py)."""
    rows = [json.loads(line) for line in (d / "metrics.jsonl").read_text().splitlines()]
    rows[0]["computation"] = fingerprint
    (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_one_computation_is_one_row_and_one_line(tmp_path):
    from analysis.figures import Panel, panels_figure
    curve = [(0, 0, 9.0), (1, 100, 5.0), (2, 200, 4.0)]
    write_run(tmp_path, "scratch", SCRATCH)
    for seed in (0, 1):
        mark_same(write_run(tmp_path, "stackbert", curve, seed=seed), f"fp{seed}")
        mark_same(write_run(tmp_path, "net2net", curve, seed=seed), f"fp{seed}")
    mark_same(write_run(tmp_path, "interpolation", curve, seed=0), "fp0")      # same on s0 only
    mark_same(write_run(tmp_path, "interpolation", curve, seed=1), "other")
    d = write_run(tmp_path, "mslt", curve)                     # a recorded twin (old record: no fingerprint)
    cfg = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**cfg, "same_computation_as": "ki-s0"}))
    write_run(tmp_path, "ki", curve[:2] + [(2, 200, 3.9)])   # only the recorded twin link says they are one
    r, curves, _, summary, _ = analyse(tmp_path)
    methods = list(savings_table(summary, r, "bert_small_base", "mini")["Method"])
    # never two rows of one computation unmarked: merged where it holds for every seed, marked where on some
    assert methods == ["Scratch", "StackBERT = Net2Net (s0 = Interpolation)",
                       "Interpolation (s0 = StackBERT = Net2Net)", "MSLT = KI"]
    fig, _ = panels_figure(curves[curves["seed"] == 0], [Panel(("bert_small_base",))], "mini")
    legend = [t.get_text() for t in fig.legends[0].get_texts()]          # the figure's one legend
    # seed 0 alone: there interpolation is the same computation too (names in the paper's order)
    assert "StackBERT = Interpolation = Net2Net" in legend and "Net2Net" not in legend and "MSLT = KI" in legend


def with_training_losses(d: Path, losses: dict, teacher: dict | None = None) -> Path:
    """Give a record's rows at the steps named a training loss {step: train_loss} and cumulative teacher FLOPs
    {step: flops} (0 where not named)."""
    rows = [json.loads(line) for line in (d / "metrics.jsonl").read_text().splitlines()]
    for r in rows:
        if r["step"] in losses:
            r.update(train_loss=losses[r["step"]], flops_teacher=(teacher or {}).get(r["step"], 0.0))
    (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return d


def test_the_closing_training_loss_is_the_last_eval_interval_and_says_when_a_teacher_ran():
    from runs.record import Run
    metrics = [{"step": s, "train_loss": s / 100, "flops_teacher": 10.0 if s >= 200 else 0.0} for s in range(50, 401, 50)]
    run = Run(Path("."), {"task": {"recipe": {"eval_every": 200}}}, metrics, {})
    assert run.closing_training_loss() == (pytest.approx((2.5 + 3.0 + 3.5 + 4.0) / 4), False)   # steps 250-400
    metrics[-2]["flops_teacher"] = metrics[-1]["flops_teacher"] = 12.0                    # the teacher ran at 350
    assert run.closing_training_loss()[1] is True
    assert Run(Path("."), {"task": {"recipe": {}}}, metrics, {}).closing_training_loss()[0] == 4.0   # no interval
    assert Run(Path("."), {"task": {}}, [{"step": 0, "eval_loss": 5.0}], {}).closing_training_loss() == (None, False)


def test_the_generalisation_table_puts_training_beside_eval_loss_one_row_a_computation(tmp_path):
    from analysis.__main__ import markdown
    from analysis.tables import generalisation_table
    recipe = {"eval_every": 2}
    curve = [(0, 0, 9.0), (1, 50, 6.0), (2, 100, 5.0), (3, 150, 4.5), (4, 200, 4.0)]
    with_training_losses(write_run(tmp_path, "scratch", SCRATCH, recipe=recipe), {1: 9.0, 2: 8.0, 3: 4.5, 4: 4.3})
    with_training_losses(write_run(tmp_path, "scratch", curve[:4] + [(4, 200, 4.6)], label="small",
                                   task="bert_small_base:small", recipe=recipe), {3: 4.7, 4: 4.5})
    for method in ("stackbert", "net2net"):
        mark_same(with_training_losses(write_run(tmp_path, method, curve, recipe=recipe), {3: 3.0, 4: 2.0}), "fp")
    with_training_losses(write_run(tmp_path, "ki", curve, recipe=recipe), {3: 4.0, 4: 3.8}, teacher={3: 5.0, 4: 9.0})
    write_run(tmp_path, "interpolation", curve, recipe=recipe)          # logged no training loss: no row
    r, *_ = analyse(tmp_path)
    df = generalisation_table(r, "bert_small_base", "mini").set_index("Method")
    assert list(df.index) == ["Small (scratch)", "Scratch", "StackBERT = Net2Net", "KI"]
    assert df.loc["Scratch"].tolist() == ["4.400", "4.000", "-0.400", "1"]          # steps 3-4: (4.5 + 4.3) / 2
    assert df.loc["StackBERT = Net2Net"].tolist() == ["2.500", "4.000", "1.500", "1"]
    assert df.loc["KI", "Training loss (last eval interval)"] == "3.900 *"
    assert "* a teacher ran in this interval" in markdown(df.reset_index(), "caption")


def test_records_without_fingerprints_are_one_computation_when_their_curves_are_bit_equal(tmp_path):
    write_run(tmp_path, "scratch", SCRATCH)
    for seed in (0, 1):
        write_run(tmp_path, "stackbert", [(0, 0, 9.0), (1, 100, 5.0 + seed), (2, 200, 4.0)], seed=seed)
        write_run(tmp_path, "net2net", [(0, 0, 9.0), (1, 100, 5.0 + seed), (2, 200, 4.0)], seed=seed)
        write_run(tmp_path, "ligo", [(0, 0, 9.0), (1, 100, 5.0 + seed), (2, 200, 4.0 - 1e-12)], seed=seed)
    r, _, _, summary, _ = analyse(tmp_path)
    assert list(savings_table(summary, r, "bert_small_base", "mini")["Method"]) == [
        "Scratch", "StackBERT = Net2Net", "LiGO"]


def test_unigram_line_on_text_curves(tmp_path):
    from analysis.figures import UNIGRAM_LABEL, Panel, panels_figure
    for method, pts in (("scratch", SCRATCH), ("ligo", [(0, 0, 9.0), (1, 100, 4.0)])):
        d = write_run(tmp_path, method, pts)
        cfg = json.loads((d / "config.json").read_text())
        (d / "config.json").write_text(json.dumps({**cfg, "reference": {"unigram_ce": 7.5, "eval_items": 64}}))
    write_run(tmp_path / "v", "scratch", [(0, 0, 0.1), (1, 100, 0.8)], task="deit_s_b", acc=True)
    _, curves, _, _, _ = analyse(tmp_path)
    fig, _ = panels_figure(curves, [Panel(("bert_small_base",)), Panel(("deit_s_b",))], "mini")
    text, vision = fig.axes
    line = [ln for ln in text.get_lines() if ln.get_label() == UNIGRAM_LABEL]
    assert len(line) == 1 and list(line[0].get_ydata()) == [7.5, 7.5]
    assert text.get_ylim()[1] >= 7.5                  # inside the zoomed range, not cut off
    assert not [ln for ln in vision.get_lines() if ln.get_label() == UNIGRAM_LABEL]


def test_a_twin_run_of_two_tasks_is_one_line_in_their_panel_and_each_small_model_is_named(tmp_path):
    """Figure 2(c) draws two pairs that share one scratch run (a sweep's twin record in the second task):
    one scratch curve and one scratch-final line named after both tasks, one unigram line, and one small-model
    line per task (their small models differ), each named."""
    from analysis.figures import UNIGRAM_LABEL, Panel, panels_figure
    tasks = ("bert_small_large", "bert_base_large")
    for task, small_final in zip(tasks, (6.0, 5.0)):
        for method, pts in (("scratch", SCRATCH), ("ligo", [(0, 0, 9.0), (1, 100, small_final - 1.5)])):
            d = write_run(tmp_path, method, pts, task=task)
            cfg = json.loads((d / "config.json").read_text())
            (d / "config.json").write_text(json.dumps({**cfg, "reference": {"unigram_ce": 7.5, "eval_items": 64}}))
            mark_same(d, "scratch-fp" if method == "scratch" else f"{task}-ligo")
        write_run(tmp_path, "scratch", [(0, 0, 10.0), (1, 50, small_final)], task=f"{task}:small", label="small")
    _, curves, _, _, _ = analyse(tmp_path)
    fig, drawn = panels_figure(curves, [Panel(tasks, "flops", ("scratch", "ligo"))], "mini")
    ax = fig.axes[0]
    labels = [ln.get_label() for ln in ax.get_lines()]
    both = ", ".join(tasks)
    assert drawn and labels.count(f"Scratch ({both})") == 1 and labels.count(f"scratch final ({both})") == 1
    assert not [lab for lab in labels if lab in {f"Scratch ({t})" for t in tasks}]
    assert labels.count(f"{UNIGRAM_LABEL} ({both})") == 1
    assert {f"LiGO ({t})" for t in tasks} <= set(labels)
    smalls = {ln.get_label(): ln.get_ydata()[0] for ln in ax.get_lines() if ln.get_label().startswith("small")}
    assert smalls == {f"small model final ({t})": v for t, v in zip(tasks, (6.0, 5.0))}


def test_a_panel_with_scratch_alone_says_growth_runs_are_missing_not_that_nothing_ran(tmp_path):
    from analysis.figures import Panel, panels_figure
    write_run(tmp_path, "scratch", SCRATCH)
    _, curves, _, _, _ = analyse(tmp_path)
    fig, drawn = panels_figure(curves, [Panel(("bert_small_base",)), Panel(("deit_s_b",))], "mini")
    with_scratch, empty = ([t.get_text() for t in ax.texts] for ax in fig.axes)
    assert not drawn and with_scratch == ["no growth runs yet"] and empty == ["no runs"]
    assert fig.axes[0].lines                          # scratch is still drawn as the reference


def patch(d: Path, config=None, summary=None) -> Path:
    """Add keys to a written record's config.json / summary.json (reference, recipes, units)."""
    for name, extra in (("config.json", config), ("summary.json", summary)):
        if extra:
            data = json.loads((d / name).read_text())
            for k, v in extra.items():
                data[k] = {**data[k], **v} if isinstance(v, dict) and isinstance(data.get(k), dict) else v
            (d / name).write_text(json.dumps(data))
    return d


def test_regime_checks_pass_fail_and_say_what_is_missing(tmp_path):
    from analysis.regime import check_all
    ref = {"reference": {"unigram_ce": 6.0, "eval_items": 512}}
    patch(write_run(tmp_path, "scratch", SCRATCH), ref, {"units": 1000})                # final 4.0, 400 FLOPs
    patch(write_run(tmp_path, "scratch", [(0, 0, 9.0), (1, 50, 4.8)], label="small", task="bert_small_base:small"),
          ref, {"units": 2000})
    patch(write_run(tmp_path, "ligo", [(0, 10, 7.0), (1, 110, 4.0)]), ref)               # fit 10 = 2.5% of 400
    # no small record, no reference: the recipes give the token counts (small 1x2x8, a quarter of large 4x2x8)
    patch(write_run(tmp_path, "scratch", SCRATCH, task="bert_small_large"), {"task": {
        "recipe": {"steps": 4, "batch_size": 2, "seq_len": 8}, "small_recipe": {"steps": 1, "batch_size": 2,
                                                                               "seq_len": 8}}})
    # the paper's own BERT setting: the small model 220K steps for a 400K-step large run (0.55x) passes
    patch(write_run(tmp_path, "scratch", SCRATCH, task="bert_base_large"), {"task": {
        "recipe": {"steps": 400_000, "batch_size": 256, "seq_len": 128},
        "small_recipe": {"steps": 220_000, "batch_size": 256, "seq_len": 128}}})
    acc = [(0, 0, 0.1), (1, 100, 0.8)]
    patch(write_run(tmp_path, "scratch", acc, task="deit_s_b", acc=True), {"reference": {"eval_items": 4000}})
    write_run(tmp_path, "scratch", [(0, 0, 0.1), (1, 50, 0.7)], label="small", task="deit_s_b:small", acc=True)
    runs, _ = load_runs(tmp_path)
    got = {(c.task, c.name.split(" ")[0] + " " + c.name.split(" ")[1]): (c.status, c.detail)
           for c in check_all(runs_frame(runs))}
    assert got[("bert_small_base", "small final")] == ("PASS",
                                                       "small 4.800 (worst of 1 seed) vs unigram 6.000 - 1 = 5.000")
    assert got[("bert_small_base", "scratch final")][0] == "PASS"
    assert got[("bert_small_base", "LiGO fit")] == ("FAIL", "fit 10 = 2.50% of scratch's 400")
    assert got[("bert_small_base", "small pretrained")] == (
        "PASS", "small 2,000 tokens (recorded) vs large 1,000 (recorded): 2.00x")
    assert got[("bert_small_large", "small final")][0].startswith("n/a (records carry no reference.unigram_ce")
    assert got[("bert_small_large", "scratch final")][0].startswith("n/a (no small-model record")
    assert got[("bert_small_large", "LiGO fit")][0] == "n/a (no run labelled ligo or ligo_copy)"
    assert got[("bert_small_large", "small pretrained")] == ("FAIL",
                                                             "small 16 tokens (small_recipe) vs large 64 (recipe): 0.25x")
    assert got[("bert_base_large", "small pretrained")] == (
        "PASS", "small 7,208,960,000 tokens (small_recipe) vs large 13,107,200,000 (recipe): 0.55x")
    assert got[("deit_s_b", "eval images")] == ("FAIL", "4,000 eval images")
    assert got[("deit_s_b", "scratch final")] == ("PASS",
                                                  "scratch 80.00% (worst of 1 seed) vs small 70.00% (best of 1) + 1")
    assert ("deit_s_b", "small final") not in got and ("deit_s_b", "small pretrained") not in got


def test_the_no_growth_control_fails_a_task_whose_small_model_alone_reaches_scratch(tmp_path, capsys):
    """--controls: bench/experiments/small_continued.py's records (task <task>_smallcont); the check pairs seeds, says which
    reached, and a FAIL puts the regime warning in that task's table captions."""
    from analysis.__main__ import main
    from analysis.regime import check_all
    runs_dir, controls = tmp_path / "runs", tmp_path / "controls"
    for seed in (0, 1):
        write_run(runs_dir, "scratch", SCRATCH, seed=seed)                                        # final 4.0
        write_run(runs_dir, "ligo", [(0, 10, 7.0), (1, 110, 4.0)], seed=seed)
        write_run(runs_dir, "scratch", SCRATCH, seed=seed, task="bert_depth_only")
    write_run(controls, "direct_copy", [(0, 0, 5.0), (1, 50, 3.9)], task="bert_small_base_smallcont")   # reaches
    write_run(controls, "direct_copy", [(0, 0, 5.0), (1, 50, 4.2)], seed=1, task="bert_small_base_smallcont")
    write_run(controls, "direct_copy", [(0, 0, 5.0), (1, 50, 4.1)], task="bert_depth_only_smallcont")    # short
    # ends short, but one evaluation reached scratch's 4.0: a saving would credit that evaluation, so the check does
    write_run(runs_dir, "scratch", SCRATCH, task="bert_width_only")
    write_run(controls, "direct_copy", [(0, 0, 5.0), (1, 50, 3.95), (2, 60, 4.05)], task="bert_width_only_smallcont")
    runs, _ = load_runs(runs_dir)
    ctl, _ = load_runs(controls)
    got = {c.task: (c.status, c.detail) for c in check_all(runs_frame(runs), runs_frame(ctl))
           if c.name.startswith("the small model trained on")}
    assert got["bert_small_base"] == ("FAIL", "s0: trained on 3.900 vs scratch 4.000; s1: trained on 4.200 vs "
                                              "scratch 4.000 (reached at s0)")
    assert got["bert_depth_only"] == ("PASS", "s0: trained on 4.100 vs scratch 4.000")
    assert got["bert_width_only"] == ("FAIL", "s0: trained on 4.050 (best 3.950) vs scratch 4.000 (reached at s0)")
    assert not any(c.name.startswith("the small model trained on") for c in check_all(runs_frame(runs)))
    out = tmp_path / "out"
    assert main(["--runs", str(runs_dir), "--controls", str(controls), "--out", str(out), "--formats", "png"]) == 0
    assert "REGIME CHECK FAILED" in (out / "savings-bert_small_base-mini.md").read_text()
    assert main(["--runs", str(runs_dir), "--controls", str(tmp_path / "none"), "--out", str(tmp_path / "o2")]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == f"error: --controls {tmp_path / 'none'}: no such directory" and not (tmp_path / "o2").exists()


def test_the_best_evaluation_counts_only_the_full_model_as_a_saving_does(tmp_path):
    """best_loss (the control check's "reached at any evaluation") reads the evaluations a saving may credit: a
    shallower stage's lower loss is not one (analysis/savings.py, paper §4.1)."""
    d = write_run(tmp_path, "mslt", [(0, 0, 7.0), (1, 50, 3.0), (2, 100, 4.5)])
    rows = [json.loads(line) for line in (d / "metrics.jsonl").read_text().splitlines()]
    for row in rows:
        row["full_model"] = row["step"] != 1        # step 1 measured a shallower stage
    (d / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    runs, _ = load_runs(tmp_path)
    assert runs_frame(runs)["best_loss"].iloc[0] == 4.5


def test_vision_uses_accuracy_higher_is_better(tmp_path):
    acc = [(0, 0, 0.1), (1, 100, 0.5), (2, 200, 0.7), (3, 300, 0.75), (4, 400, 0.8)]
    write_run(tmp_path, "scratch", acc, task="deit_s_b", acc=True)
    write_run(tmp_path, "ligo", [(0, 0, 0.6), (1, 100, 0.9)], task="deit_s_b", acc=True)
    r, _, seeds, summary, _ = analyse(tmp_path)
    s = row(seeds, "ligo")
    assert s["metric"] == "eval_acc" and s["target"] == pytest.approx(0.8)
    assert s["flops_to_target"] == pytest.approx(100 * (0.8 - 0.6) / (0.9 - 0.6))
    table = savings_table(summary, r, "deit_s_b", "mini")
    assert "Final eval acc." in table.columns


def test_loader_reports_incomplete_corrupt_truncated_and_skips_model_dirs(tmp_path):
    write_run(tmp_path, "scratch", SCRATCH)
    inc = write_run(tmp_path, "ligo", SCRATCH[:2], complete=False)
    bad = tmp_path / "bert_small_base-mini" / "mslt-s0"
    bad.mkdir()
    (bad / "config.json").write_text("{not json")
    (bad / "metrics.jsonl").write_text("")
    mid = write_run(tmp_path, "net2net", SCRATCH)
    lines = (mid / "metrics.jsonl").read_text().splitlines()
    (mid / "metrics.jsonl").write_text("\n".join([lines[0], "{oops"] + lines[1:]) + "\n")
    trunc = write_run(tmp_path, "stackbert", SCRATCH)
    with open(trunc / "metrics.jsonl", "a") as f:
        f.write('{"step": 5, "flo')
    (trunc / "model").mkdir()
    (trunc / "model" / "config.json").write_text(json.dumps({"model_type": "bert"}))
    write_run(tmp_path / "copy", "scratch", SCRATCH, method_config={"other": 1})     # same identity, other run
    write_run(tmp_path / "same", "scratch", SCRATCH)                                  # an identical copy: silent
    runs, problems = load_runs(tmp_path)
    assert sorted(r.dir.name for r in runs) == ["scratch-s0", "stackbert-s0"]
    kinds = {(p.dir.parent.parent.name, p.dir.name): p.kind for p in problems}
    assert kinds == {(tmp_path.name, "ligo-s0"): "incomplete", (tmp_path.name, "mslt-s0"): "corrupt",
                     (tmp_path.name, "net2net-s0"): "corrupt", (tmp_path.name, "stackbert-s0"): "truncated",
                     ("copy", "scratch-s0"): "duplicate"}
    assert inc.name in str([p for p in problems if p.kind == "incomplete"][0])


def test_a_metrics_value_that_is_not_a_number_makes_the_run_corrupt_not_unreached(tmp_path):
    write_run(tmp_path, "scratch", SCRATCH)
    bad = write_run(tmp_path, "ligo", SCRATCH)
    rows = [json.loads(line) for line in (bad / "metrics.jsonl").read_text().splitlines()]
    rows[1]["eval_loss"] = "abc"
    (bad / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    runs, problems = load_runs(tmp_path)
    assert [r.dir.name for r in runs] == ["scratch-s0"]
    assert [(p.dir.name, p.kind) for p in problems] == [("ligo-s0", "corrupt")]
    assert "eval_loss is 'abc', not a finite number" in problems[0].message


def test_fit_steps_and_init_tables(tmp_path):
    write_run(tmp_path, "scratch", SCRATCH)
    write_run(tmp_path, "ligo", [(0, 10, 7.0), (1, 110, 4.0)], method_config={"fit_steps": 100})
    write_run(tmp_path, "ligo", [(0, 50, 6.5), (1, 150, 4.0)], label="ligo-fit500", method_config={"fit_steps": 500})
    write_run(tmp_path, "ligo", [(0, 5, 7.0), (1, 105, 4.0)], label="ligo-layerdrop", method_config={"fit_steps": 100})
    write_run(tmp_path, "scratch", [(0, 0, 9.0), (1, 50, 6.0)], label="small", task="bert_small_base:small")
    r, _, _, summary, _ = analyse(tmp_path)
    t3 = fit_steps_table(summary, r, "bert_small_base", "mini")
    assert list(t3["# of Steps"]) == ["100", "500"]                       # the layer-drop variant is not a row
    assert list(t3["Savings"]) == ["72.5%", "62.5%"]
    t5 = init_table(r, "bert_small_base", "mini").set_index("Model")["Eval loss"]
    assert list(t5) == ["6.000", "7.000", "4.000", "4.000"]


def test_an_untrained_init_run_feeds_table5_not_the_savings(tmp_path):
    write_run(tmp_path, "scratch", SCRATCH)
    write_run(tmp_path, "ligo", [(0, 10, 7.0), (1, 110, 4.0)])
    d = write_run(tmp_path, "ligo", [(0, 10, 7.0)], label="ligo-init", steps=0)   # grown, exported, evaluated
    write_run(tmp_path, "ligo", [(0, 10, 7.0), (1, 60, 5.0)], label="ligo-short", steps=2)
    (d / "eval.json").write_text(json.dumps({"suites": {"glue": {"tasks": {
        "sst2": {"metrics": {"accuracy": 81.5, "score": 81.5}}}, "average": 81.5}}}))
    r, _, seeds, _, problems = analyse(tmp_path)
    assert set(seeds["label"]) == {"scratch", "ligo", "ligo-short"}
    # another recipe is flagged for a trained run only, naming what differs from scratch's
    assert [(p.kind, p.dir.name) for p in problems] == [("mismatch", "ligo-short-s0")]
    assert problems[0].message.endswith("(steps 2 vs 4)")
    t5 = init_table(r, "bert_small_base", "mini").set_index("Model")
    assert t5.loc["Large (LiGO init)", "SST-2"] == "81.50" and t5.loc["Large (LiGO init + pretrain)", "SST-2"] == "--"


def test_downstream_scores_from_eval_json(tmp_path):
    write_run(tmp_path, "scratch", SCRATCH)
    d = write_run(tmp_path, "ligo", [(0, 0, 9.0), (1, 200, 4.0)])
    # the shape runs/evaluation writes (evaluate_run): suites -> tasks -> metrics with a "score", suite average
    (d / "eval.json").write_text(json.dumps({"suites": {
        "glue": {"tasks": {"sst2": {"metrics": {"accuracy": 88.0, "score": 88.0}},
                           "cola": {"metrics": {"mcc": 60.0, "score": 60.0}}}, "average": 74.0},
        "squad": {"tasks": {"squad_v1": {"metrics": {"f1": 86.5, "exact_match": 77.25, "score": 81.9}}}},
        "adapters": {"tasks": {"sst2": {"metrics": {"score": 88.5}}}}}}))
    r, _, _, summary, _ = analyse(tmp_path)
    t1 = savings_table(summary, r, "bert_small_base", "mini").set_index("Method")
    assert t1.loc["LiGO", "SST-2"] == "88.00" and t1.loc["LiGO", "Avg. GLUE"] == "74.00"
    assert t1.loc["LiGO", "SQuADv1.1 EM"] == "77.25" and t1.loc["Scratch", "SST-2"] == "--"
    assert not any(c.startswith("AF ") for c in t1.columns)
    t6 = savings_table(summary, r, "bert_small_base", "mini", adapters=True).set_index("Method")
    assert t6.loc["LiGO", "AF SST-2"] == "88.50" and "SST-2" not in t6.columns


def test_a_downstream_score_says_which_seeds_it_averages(tmp_path):
    """A row of two seeds whose downstream column has one evaluated seed must not read as a two-seed mean."""
    def evaluated(d, score):
        (d / "eval.json").write_text(json.dumps({"suites": {"mini": {"tasks": {
            "bbc_news": {"metrics": {"accuracy": score, "score": score}}}, "average": score}}}))
    for seed in (0, 1):
        write_run(tmp_path, "scratch", SCRATCH, seed=seed)
        d = write_run(tmp_path, "ligo", [(0, 10, 7.0), (1, 110, 4.0)], seed=seed)
        evaluated(d, 70.0 + 4 * seed)
        write_run(tmp_path, "scratch", [(0, 0, 9.0), (1, 50, 6.0)], label="small", task="bert_small_base:small",
                  seed=seed)
    evaluated(tmp_path / "bert_small_base-mini" / "scratch-s0", 60.0)
    r, _, _, summary, _ = analyse(tmp_path)
    t1 = savings_table(summary, r, "bert_small_base", "mini").set_index("Method")
    assert t1.loc["LiGO", "BBC News (mini)"] == "72.00 ± 2.83" and t1.loc["LiGO", "Seeds"] == "2"
    assert t1.loc["Scratch", "BBC News (mini)"] == "60.00 (s0)"
    t5 = init_table(r, "bert_small_base", "mini").set_index("Model")
    assert t5.loc["Large (LiGO init + pretrain)", "BBC News (mini)"] == "72.00 ± 2.83"
    assert t5.loc["Large (scratch)", "BBC News (mini)"] == "60.00 (s0)" and t5.loc["Large (scratch)", "Seeds"] == "2"


def test_renderers_escape_and_align():
    df = pd.DataFrame({"Method": ["LiGO_x"], "Savings (FLOPs)": ["44.7% ± 1.0"], "Eval − training": ["3 § (s1) ¶"]})
    tex = to_latex(df, "caption", "table:x")
    assert r"44.7\% $\pm$ 1.0" in tex and r"LiGO\_x" in tex and r"\begin{tabular}{l|cc}" in tex
    # the marks and the minus sign a pdfLaTeX without UTF-8 input would refuse
    assert r"Eval $-$ training" in tex and r"3 \S{} (s1) \P{}" in tex and not set("§¶−") & set(tex)
    assert to_markdown(df).splitlines()[1] == "|:---|---:|---:|"


def test_a_wall_time_saving_from_a_machine_at_another_speed_is_flagged(tmp_path):
    """Runs of one architecture on the shared CPU have run up to 2x apart per FLOP; a wall-time saving taken
    across such runs measures the machine. Per FLOP, not per step: a method with cheaper steps is not flagged."""
    from analysis.__main__ import markdown
    from analysis.tables import SPEED_NOTE
    write_run(tmp_path, "scratch", SCRATCH, wall_per_flop=0.01)
    write_run(tmp_path, "ligo", [(0, 10, 9.0), (1, 100, 5.0), (2, 200, 3.9)], wall_per_flop=0.0105)
    write_run(tmp_path, "stackbert", [(0, 0, 9.0), (1, 50, 5.0), (2, 100, 3.9)], wall_per_flop=0.02)  # half speed
    r, c, seeds, summary, _ = analyse(tmp_path)
    assert row(seeds, "ligo")["speed_vs_scratch"] == pytest.approx(1 / 1.05)
    assert row(seeds, "stackbert")["speed_vs_scratch"] == pytest.approx(0.5)
    df = savings_table(summary, r, "bert_small_base", "mini")
    cells = df.set_index("Method")
    assert cells.loc["StackBERT", "Savings (Walltime)"].endswith(" ‡")
    assert cells.loc["StackBERT", "Savings (FLOPs)"] == "76.1%"            # FLOPs are never flagged
    assert "‡" not in cells.loc["LiGO", "Savings (Walltime)"]
    assert SPEED_NOTE in markdown(df, "caption")


def test_no_wall_time_saving_across_machines(tmp_path):
    """A sweep's 1-thread jobs against scratch's 2-thread runs: wall time compares only on one device and thread
    count, so those seeds get no wall saving (the cell names them), while their FLOPs savings stand."""
    from analysis.__main__ import markdown
    from analysis.tables import MACHINE_NOTE
    two, one = ({"device": "cpu", "device_name": "x86_64", "threads": n} for n in (2, 1))
    for seed in (0, 1):
        write_run(tmp_path, "scratch", SCRATCH, seed=seed, environment=two)
        write_run(tmp_path, "ligo", [(0, 10, 9.0), (1, 100, 5.0), (2, 200, 3.9)], seed=seed,
                  environment=(two, one)[seed], wall_per_flop=(0.01, 0.015)[seed])
        write_run(tmp_path, "stackbert", [(0, 0, 9.0), (1, 50, 5.0), (2, 100, 3.9)], seed=seed, environment=one,
                  wall_per_flop=0.02)
    r, c, seeds, summary, _ = analyse(tmp_path)
    ligo = seeds[seeds["label"] == "ligo"].set_index("seed")
    assert list(ligo["wall_elsewhere"]) == [False, True]
    assert ligo.loc[0, "saving_wall"] == pytest.approx(ligo.loc[0, "saving_flops"])   # same speed as scratch
    assert math.isnan(ligo.loc[1, "saving_wall"]) and ligo.loc[1, "saving_flops"] == ligo.loc[0, "saving_flops"]
    df = savings_table(summary, r, "bert_small_base", "mini")
    cells = df.set_index("Method")
    assert cells.loc["LiGO", "Savings (Walltime)"].endswith("(other machine: s1)")
    assert cells.loc["StackBERT", "Savings (Walltime)"] == "other machine: s0 s1"     # and no ‡: not load
    assert cells.loc["StackBERT", "Savings (FLOPs)"] == "76.1% ± 0.0"
    assert MACHINE_NOTE in markdown(df, "caption")


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_a_non_finite_metric_makes_the_run_corrupt_not_a_traceback_or_an_earlier_final(tmp_path, value, capsys):
    """A NaN final eval_loss crashed the savings (pandas IndexError, after --out was made); in a scratch run it
    would have made an earlier evaluation the target."""
    write_run(tmp_path / "runs", "scratch", SCRATCH)
    bad = write_run(tmp_path / "runs", "ligo", SCRATCH)
    rows = [json.loads(line) for line in (bad / "metrics.jsonl").read_text().splitlines()]
    rows[-1]["eval_loss"] = value
    (bad / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    runs, problems = load_runs(tmp_path / "runs")
    assert [r.dir.name for r in runs] == ["scratch-s0"]
    assert [(p.dir.name, p.kind) for p in problems] == [("ligo-s0", "corrupt")]
    assert f"eval_loss is {value!r}, not a finite number" in problems[0].message
    from analysis.__main__ import main
    assert main(["--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "out"), "--formats", "png"]) == 0
    assert "ligo-s0" in (tmp_path / "out" / "report.md").read_text()


def test_a_record_without_config_is_reported_not_silently_missing(tmp_path):
    write_run(tmp_path, "scratch", SCRATCH)
    orphan = write_run(tmp_path, "ligo", SCRATCH)
    (orphan / "config.json").unlink()
    runs, problems = load_runs(tmp_path)
    assert [r.dir.name for r in runs] == ["scratch-s0"]
    assert [(p.dir.name, p.kind) for p in problems] == [("ligo-s0", "corrupt")]
    assert "no config.json" in problems[0].message


def test_a_rerun_into_the_same_out_removes_its_own_stale_files_and_nothing_else(tmp_path, capsys):
    from analysis.__main__ import main
    runs, out = tmp_path / "runs", tmp_path / "out"
    write_run(runs, "scratch", SCRATCH)
    gpt2 = write_run(runs, "scratch", SCRATCH, task="gpt2_base_medium")
    write_run(runs, "ligo", SCRATCH, task="gpt2_base_medium")
    assert main(["--runs", str(runs), "--out", str(out), "--formats", "png"]) == 0
    assert (out / "savings-gpt2_base_medium-mini.md").exists()
    (out / "notes.md").write_text("mine")
    import shutil
    shutil.rmtree(gpt2.parent)
    assert main(["--runs", str(runs), "--out", str(out), "--formats", "png"]) == 0
    assert not (out / "savings-gpt2_base_medium-mini.md").exists()       # its runs are gone: so is its table
    assert not (out / "curves-gpt2_base_medium-mini.png").exists()
    assert (out / "savings-bert_small_base-mini.md").exists() and (out / "notes.md").read_text() == "mine"
    assert "stale ones removed" in capsys.readouterr().out


def test_cli_regenerates_everything_in_seconds(tmp_path, capsys):
    runs = tmp_path / "runs"
    for seed in (0, 1):
        write_run(runs, "scratch", SCRATCH, seed=seed)
        write_run(runs, "ligo", [(0, 10, 9.0), (1, 100, 5.0), (2, 200, 3.9)], seed=seed)
    write_run(runs, "stackbert", SCRATCH[:2], complete=False)
    out = tmp_path / "out"
    from analysis.__main__ import main
    # PNG only: PDF goes through the same savefig, and the shared CI machine is slow at drawing
    assert main(["--runs", str(runs), "--out", str(out), "--formats", "png"]) == 0
    for name in ("report.md", "regime.md", "table1-mini.md", "table1-mini.tex", "savings-bert_small_base-mini.md",
                 "figure2-mini.png", "curves-bert_small_base-mini.png", "savings_seeds.csv"):
        assert (out / name).exists(), name
    report = (out / "report.md").read_text()
    assert "incomplete" in report and "stackbert-s0" in report and "figure4-mini" in report
    # the regime is checked in the report, in regime.md and on stdout; without the data it says n/a, never PASS
    regime = (out / "regime.md").read_text()
    assert "## Regime checks" in report and "n/a (no small-model record" in regime and "| PASS |" not in regime
    assert "n/a (no small-model record" in capsys.readouterr().out
    with pytest.raises(SystemExit):     # savings always pair seeds: the option that did not is gone
        main(["--runs", str(runs), "--out", str(out), "--no-pair-seeds"])


def test_a_summary_that_does_not_match_its_metrics_is_left_out(tmp_path):
    """Two writers on one directory once left summary.json at step 400 over metrics ending at step 88: such a
    record must not reach the tables."""
    write_run(tmp_path, "scratch", SCRATCH)
    d = write_run(tmp_path, "stackbert", [(0, 0, 9.0), (1, 50, 7.0), (2, 100, 5.0)])
    summary = json.loads((d / "summary.json").read_text())
    (d / "summary.json").write_text(json.dumps({**summary, "step": 400}))
    runs, problems = load_runs(tmp_path)
    assert [r.method for r in runs] == ["scratch"]
    assert [(p.kind, "summary.json says step 400 but metrics.jsonl ends at step 2" in p.message)
            for p in problems] == [("corrupt", True)]


def test_tables_of_a_task_whose_regime_fails_say_so_in_their_caption(tmp_path):
    """A scratch run that ends worse than the small model (BERT mini, 2026-11-23: 5.406 against 4.999) makes every
    growth method 'save' ~99%: the tables must not print that as a ranking without saying the regime failed."""
    runs, out = tmp_path / "runs", tmp_path / "out"
    write_run(runs, "scratch", SCRATCH)                                                      # final 4.0
    write_run(runs, "scratch", [(0, 0, 9.0), (1, 50, 3.5)], label="small", task="bert_small_base:small")
    write_run(runs, "ligo", [(0, 5, 4.5), (1, 100, 3.9)])                                   # fit 1.25%
    write_run(runs, "scratch", SCRATCH, task="gpt2_base_medium")                            # no small: n/a, no warning
    write_run(runs, "ligo", [(0, 5, 9.0), (1, 300, 3.9)], task="gpt2_base_medium")
    from analysis.__main__ import main
    assert main(["--runs", str(runs), "--out", str(out), "--formats", "png"]) == 0
    for name in ("savings-bert_small_base-mini.md", "table1-mini.md", "savings-bert_small_base-mini.tex"):
        assert "REGIME CHECK FAILED (not met: scratch final < small final)" in (out / name).read_text(), name
    assert "REGIME CHECK FAILED" not in (out / "savings-gpt2_base_medium-mini.md").read_text()
    # the target at regime.md's three decimals: a final of 4.0 printed as "4" reads as a rounded figure
    assert "targets (scratch final per seed) s0 4.000" in (out / "savings-bert_small_base-mini.md").read_text()


def test_a_latex_caption_holds_its_notes_as_sentences(tmp_path):
    """The markdown puts a table's notes under it; LaTeX has one caption, so each note must start a sentence there
    (they ran on as "s1 3.39 other machine: the seeds ...")."""
    from analysis import tables
    from analysis.__main__ import write_table
    df = pd.DataFrame({"Method": ["LiGO"], "Savings (wall)": [f"40.0 {tables.OTHER_MACHINE}: s1"]})
    write_table(df, tmp_path, "t", "caption ends here")
    tex = (tmp_path / "t.tex").read_text()
    assert "caption ends here. other machine: the seeds named ran on another device" in tex


@pytest.mark.parametrize("damage, message", [
    (lambda rows, summary: rows[2].update(flops=50.0), "cumulative FLOPs decrease at step 2"),
    (lambda rows, summary: rows[1].update(full_model="yes"), "full_model is 'yes', not true or false"),
    (lambda rows, summary: summary.update(eval_loss=3.5), "summary.json eval_loss 3.5 is not the last logged row's 4.0"),
    (lambda rows, summary: summary.update(flops=999.0), "summary.json flops 999.0 is not the last logged row's 400.0"),
    (lambda rows, summary: rows[0].update(flops=-1.0), "a negative step or FLOPs count"),
])
def test_records_that_contradict_themselves_are_left_out_with_one_line(tmp_path, damage, message):
    d = write_run(tmp_path, "scratch", SCRATCH)
    rows = [json.loads(line) for line in (d / "metrics.jsonl").read_text().splitlines()]
    summary = json.loads((d / "summary.json").read_text())
    damage(rows, summary)
    (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (d / "summary.json").write_text(json.dumps(summary))
    runs, problems = load_runs(tmp_path)
    assert runs == [] and [(p.kind, p.dir.name) for p in problems] == [("corrupt", "scratch-s0")]
    assert message in problems[0].message and "\n" not in problems[0].message


@pytest.mark.parametrize("scale", SCALES)
def test_a_record_filed_under_another_task_and_a_corrupt_eval_json_are_reported(tmp_path, scale):
    # at every scale run.py writes, the default (regime) included: the analysis cannot import tasks/, so its list
    # of scales is its own, and a scale missing there left that scale's folders unchecked
    write_run(tmp_path, "scratch", SCRATCH, scale=scale)
    stray = write_run(tmp_path, "ligo", [(0, 0, 9.0), (1, 200, 4.0)], task="gpt2_base_medium", scale=scale)
    stray.rename(tmp_path / f"bert_small_base-{scale}" / "ligo-s0")
    d = write_run(tmp_path, "net2net", [(0, 0, 9.0), (1, 200, 4.0)], scale=scale)
    (d / "eval.json").write_text("{not json")
    runs, problems = load_runs(tmp_path)
    found = {(p.kind, p.dir.name): p.message for p in problems}
    assert f"filed under bert_small_base-{scale}" in found["corrupt", "ligo-s0"]
    assert "eval.json unreadable" in found["eval", "net2net-s0"]
    assert {r.dir.name for r in runs} == {"scratch-s0", "net2net-s0"}       # the run stays; its scores do not
    assert runs_frame(runs).set_index("label").loc["net2net", "downstream"] == {}


def test_seeds_whose_operator_drew_with_seed_0_are_marked():
    """A record made before a run's --seed reached its method says method.config.seed 0 at seed 1: its row's Seeds
    cell names it (§) and the table gets the footnote; a method without a seed option, or one seeded as its run,
    is not marked."""
    import pandas as pd
    from analysis import tables
    from analysis.__main__ import notes
    runs = pd.DataFrame({"seed": [0, 1, 2, 1], "method_config": [{"seed": 0}, {"seed": 0}, {"seed": 2}, {}]})
    assert tables._fixed_draws(runs) == " § (s1)"
    assert tables._fixed_draws(runs.iloc[[0, 2, 3]]) == ""
    table = pd.DataFrame({"Method": ["LiGO"], "Seeds": ["3" + tables._fixed_draws(runs)]})
    assert tables.DRAWS_NOTE in notes(table) and tables.DRAWS_NOTE not in notes(table.assign(Seeds="3"))


# --- figures a reader understands without the code (issue 44) ---

BERT_SMALL = {"family": "bert", "layers": 2, "hidden": 128, "heads": 2}
BERT_LARGE = {"family": "bert", "layers": 4, "hidden": 192, "heads": 3}


def figure_records(root: Path, unigram: float = 7.5) -> pd.DataFrame:
    """bert_small_base (recorded shapes 2L/128 -> 4L/192, unigram reference) and deit_s_b (no shapes recorded), with
    scratch and LiGO at seeds 0 and 1, LiGO's warmup0 variant at seed 0 only; returns the curves."""
    for seed in (0, 1):
        for method, pts in (("scratch", SCRATCH), ("ligo", [(0, 0, 9.0), (1, 100, 5.0), (2, 200, 4.5 - 0.1 * seed)])):
            patch(write_run(root, method, pts, seed=seed), config={
                "task": {"small": BERT_SMALL, "large": BERT_LARGE},
                "reference": {"unigram_ce": unigram, "eval_items": 64}})
            write_run(root, method, [(0, 0, 0.1), (1, 100, 0.5 + 0.1 * (method == "ligo")), (2, 200, 0.8)], seed=seed,
                      task="deit_s_b", acc=True)
    write_run(root, "ligo", [(0, 0, 9.0), (1, 100, 4.8), (2, 200, 4.4)], label="ligo-warmup0")
    return analyse(root)[1]


def lines_by_name(ax) -> dict:
    return {ln.get_label(): ln for ln in ax.get_lines()}


def test_a_method_keeps_its_colour_on_every_figure_and_a_variant_differs_in_style_not_colour(tmp_path):
    from analysis.figures import Panel, panels_figure
    curves = figure_records(tmp_path)
    text, _ = panels_figure(curves, [Panel(("bert_small_base",), "flops", ("scratch", "ligo", "ligo-warmup0"))],
                            "mini")
    vision, _ = panels_figure(curves, [Panel(("deit_s_b",), "wall", ("ligo", "scratch"))], "mini")
    a, b = lines_by_name(text.axes[0]), lines_by_name(vision.axes[0])
    assert a["LiGO"].get_color() == b["LiGO"].get_color() != a["Scratch"].get_color()
    assert a["Scratch"].get_color() == b["Scratch"].get_color()
    variant, method = a["LiGO (warmup0)"], a["LiGO"]
    assert variant.get_color() == method.get_color()
    assert variant.get_linestyle() != method.get_linestyle() and variant.get_marker() != method.get_marker()


def test_a_variant_keeps_its_look_whatever_other_runs_an_analysis_holds():
    """A variant's line style and marker come from its own name: adding a run (another variant, another method)
    must not restyle the others (they were numbered over the labels present), the same variant of two methods
    looks alike, and one method's variants stay distinct up to the 28 looks there are."""
    from analysis.styles import METHOD_STYLE, line_styles
    few = line_styles(["ligo", "ligo-warmup0", "stackbert-paper_lr"])
    more = line_styles(["ligo", "ligo-warmup0", "stackbert-paper_lr", "ligo-fit10", "ligo-copies", "bert2bert-staged",
                        "ki"])
    assert all(more[label] == look for label, look in few.items())
    assert more["ligo"] == METHOD_STYLE != more["ligo-warmup0"]
    assert line_styles(["stackbert-warmup0"])["stackbert-warmup0"] == few["ligo-warmup0"]
    many = line_styles([f"ligo-v{i}" for i in range(28)])
    assert len(set(many.values())) == 28 and METHOD_STYLE not in many.values()


def test_panel_titles_carry_the_recorded_shapes_and_the_legend_lies_outside_the_axes(tmp_path):
    from matplotlib.transforms import Bbox
    from analysis.figures import Panel, panels_figure
    curves = figure_records(tmp_path)
    every = ("scratch", "ligo", "ligo-warmup0")
    fig, drawn = panels_figure(curves, [Panel(("bert_small_base",), "flops", every, "(a)"), Panel(("deit_s_b",))],
                               "mini", "Figure 2: BERT (paper: BERT-Small→BERT-Base)")
    text, vision = fig.axes
    assert drawn and text.get_title() == "(a) BERT 2L/128 → 4L/192"
    assert vision.get_title() == "deit_s_b"                      # records that do not say their shapes: the task
    assert fig._suptitle.get_text() == "Figure 2: BERT (paper: BERT-Small→BERT-Base) [mini scale]"
    fig.canvas.draw()
    (legend,) = fig.legends
    assert all(ax.get_legend() is None for ax in fig.axes)
    box = legend.get_window_extent()
    assert not any(Bbox.intersection(box, ax.get_window_extent()) for ax in fig.axes)
    # the caption says what the band is and over how many seeds, per line where it differs
    names = [t.get_text() for t in legend.get_texts()]
    assert "min–max over them: 2 seeds" in legend.get_title().get_text() and "LiGO (warmup0) [1]" in names
    assert "LiGO" in names and "Scratch" in names


def test_a_caption_whose_usual_line_is_one_seed_says_so_in_words():
    """Lines of one seed beside one of two (a comparison half made): no "over 1 seeds"."""
    from analysis.legend import caption
    text = caption({"scratch": {"(c)": 2}, "ligo": {"(c)": 1}, "bert2bert": {"(c)": 1}}, set())
    assert "min–max over them: one seed (no band), or the number in [brackets]" in text
    assert "1 seeds" not in text


def test_a_line_with_other_seeds_on_another_panel_says_which_in_the_one_legend(tmp_path):
    from analysis.figures import Panel, panels_figure
    curve = [(0, 0, 9.0), (1, 100, 5.0), (2, 200, 4.0)]
    for task in ("roberta_small_base", "gpt2_base_medium"):
        for seed in (0, 1):
            write_run(tmp_path, "scratch", SCRATCH, seed=seed, task=task)
        for seed in ((0,) if task == "roberta_small_base" else (0, 1)):      # StackBERT: one seed on RoBERTa only
            write_run(tmp_path, "stackbert", curve, seed=seed, task=task)
    curves = analyse(tmp_path)[1]
    fig, _ = panels_figure(curves, [Panel(("roberta_small_base",), "flops", title="(a)"),
                                    Panel(("roberta_small_base",), "wall", title="(b) by wall time"),
                                    Panel(("gpt2_base_medium",), "flops", title="(c)")], "mini")
    names = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "StackBERT [1 in (a) (b); 2 in (c)]" in names and "Scratch" in names


def test_y_limits_come_from_the_method_curves_and_a_far_reference_line_is_written_at_the_edge(tmp_path):
    from analysis.figures import Panel, panels_figure
    curves = figure_records(tmp_path, unigram=30.0)
    fig, _ = panels_figure(curves, [Panel(("bert_small_base",))], "mini")
    ax = fig.axes[0]
    low, high = ax.get_ylim()
    assert 8.0 <= high < 9.0 and low < 4.0                       # curves after step 0 span 4.0..8.0; 30 is far
    notes = [t.get_text() for t in ax.texts]
    assert notes == ["↑ unigram cross-entropy: 30 (above the axis)"]


def test_the_twins_figure_keeps_method_colours_variant_styles_and_its_legend_off_the_axes(tmp_path, monkeypatch):
    from matplotlib.transforms import Bbox
    from analysis import axes
    from analysis.figures import plt
    rows = [{"label": label, "name": name, "seed": seed, "step": step, "space": space, "twins": 1 - step / 400,
             "gap": 1e-3 * (step + 1)}
            for label, name, seeds in (("ligo", "LiGO", 2), ("ligo-copies", "LiGO (copies)", 1))
            for seed in range(seeds) for step in (0, 200, 400) for space in ("D", "F")]
    saved = []
    monkeypatch.setattr(axes, "save", lambda fig, path, formats: saved.append(fig) or [])    # the figure, unsaved
    axes.twins_figure(pd.DataFrame(rows), "bert_width_only", "mini", tmp_path)
    (fig,) = saved
    fig.canvas.draw()
    lines = lines_by_name(fig.axes[0])
    assert lines["LiGO"].get_color() == lines["LiGO (copies)"].get_color()
    assert lines["LiGO"].get_linestyle() != lines["LiGO (copies)"].get_linestyle()
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == ["LiGO", "LiGO (copies) [1 seed]"]
    assert not any(Bbox.intersection(legend.get_window_extent(), ax.get_window_extent()) for ax in fig.axes)
    plt.close(fig)


def test_the_verdict_links_reproduce_md_from_where_its_file_lies_when_out_is_reached_through_a_link(tmp_path):
    """The link is computed between real paths: through a symlinked folder at another depth (a home directory
    linked to a data disk) a link computed from the path as given climbed the wrong number of folders."""
    import re
    from analysis.__main__ import REPRODUCE, main
    runs = tmp_path / "runs"
    for seed in (0, 1):
        write_run(runs, "scratch", SCRATCH, seed=seed)
        write_run(runs, "ligo", [(0, 10, 9.0), (1, 100, 5.0), (2, 200, 3.9)], seed=seed)
    real = tmp_path / "disk" / "a" / "b"
    real.mkdir(parents=True)
    (tmp_path / "home").symlink_to(real, target_is_directory=True)
    out = tmp_path / "home" / "out"
    assert main(["--runs", str(runs), "--out", str(out), "--formats", "png"]) == 0
    links = re.findall(r"\]\(([^)#]+)#", (out / "verdict-mini.md").read_text())
    assert links and all((real / "out" / link).resolve() == REPRODUCE for link in links), links


def test_a_wall_panels_runs_from_another_machine_are_named_by_method_within_the_panels_width(tmp_path):
    """The note ran as one line across the neighbouring panels' titles (results/regime's Figure 2)."""
    from analysis.figures import Panel, panels_figure
    two, one = ({"device": "cpu", "device_name": "x86_64", "threads": n} for n in (2, 1))
    for seed in (0, 1):
        write_run(tmp_path, "scratch", SCRATCH, seed=seed, environment=two)
        for label in ("ligo", "stackbert", "interpolation", "bert2bert", "ki", "mslt", "net2net"):
            write_run(tmp_path, label, [(0, 10, 9.0), (1, 100, 5.0), (2, 200, 3.9)], seed=seed, environment=one)
    _, curves, _, _, _ = analyse(tmp_path)
    panels = [Panel(("bert_small_base",)), Panel(("bert_small_base",), x="wall"), Panel(("deit_s_b",))]
    fig, _ = panels_figure(curves, panels, "mini")
    title = fig.axes[1].get_title()
    note = title[title.index("not drawn"):]
    assert "LiGO s0 s1" in note and "StackBERT s0 s1" in note and "bert2BERT s0 s1" in note, note
    width = fig.get_figwidth() / 3 * 17
    assert note.count("\n") >= 1 and all(len(line) <= width for line in note.splitlines()), note


def test_a_task_with_only_scratch_says_so_on_the_terminal(tmp_path, capsys):
    """A comparison adopted from a probe holds scratch before any growth run: its savings line names that instead
    of ending in an empty list."""
    from analysis.__main__ import main as analysis
    from records import SCRATCH, write_run
    runs = tmp_path / "records"
    write_run(runs, "scratch", SCRATCH, seed=0)
    assert analysis(["--runs", str(runs), "--out", str(tmp_path / "out"), "--formats", "png"]) == 0
    line = next(li for li in capsys.readouterr().out.splitlines() if li.startswith("  ") and "[" in li)
    assert line.endswith(": no growth run yet (scratch only)"), line


def test_a_run_grown_from_another_pretraining_of_its_small_model_is_flagged(tmp_path):
    """The small-s<seed> record beside a task's runs is the small model they are shown against; a run whose cache
    entry was pretrained again and ended elsewhere (config.small pretrain_result) is kept and flagged with both
    ends; one that ended the same, or a record that does not say (older), or one grown under another small recipe
    (another small model), is not."""
    recipe = {"steps": 4}
    small = write_run(tmp_path, "scratch", [(0, 0, 9.0), (4, 40, 6.25)], task="bert_small_base:small",
                      label="small", recipe={}, steps=4)
    ended = {k: json.loads((small / "summary.json").read_text()).get(k) for k in ("step", "flops", "eval_loss")}
    write_run(tmp_path, "scratch", SCRATCH)
    grow = dict(points=[(0, 0, 9.0), (1, 200, 4.0)], small_recipe=recipe)
    write_run(tmp_path, "ligo", small={"pretrain_result": ended}, **grow)
    write_run(tmp_path, "net2net", small={"pretrain_result": {**ended, "eval_loss": 6.2500001}}, **grow)
    write_run(tmp_path, "stackbert", small={}, **grow)
    write_run(tmp_path, "ki", small={"pretrain_result": {**ended, "eval_loss": 5.0}}, points=grow["points"],
              small_recipe={"steps": 8})
    runs, problems = load_runs(tmp_path)
    assert len(runs) == 6
    assert [(p.kind, p.dir.name) for p in problems] == [("mismatch", "net2net-s0")]
    assert "small-s0's record (eval_loss 6.2500001 vs 6.25)" in problems[0].message
