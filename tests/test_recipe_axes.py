"""The grown model's recipe as a named axis (tasks/grown_recipes.py): a preset changes the grown run's recipe and
nothing else, is recorded and named, a warm-up-0 run is at its peak lr from its first step, bad uses are refused in
one line; when to log changes no number; the analysis compares a declared variant with scratch's own recipe, shows
the saving without the fit, and draws the recipe axis."""
import json

import pytest

from analysis.axes import recipe_curve_table, recipe_rows, recipe_table
from analysis.frames import curves_frame, runs_frame
from analysis.load import load_runs
from analysis.savings import all_savings, summarize
from analysis.tables import display, savings_table
from methods import METHODS, get_method
from records import SCRATCH, write_run
from runs.experiment import default_out, run_experiment
from runs.settings import route
from tasks import get_task


def grown_task(*items, method="stackbert", steps=4):
    task = get_task("bert_small_base", "tiny")
    task = task.with_(recipe=task.recipe.with_(steps=steps, log_every=1, eval_every=2))
    return route(task, METHODS[method], list(items))[0]


def rows(out):
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def test_warmup0_starts_at_the_peak_lr_and_is_recorded_and_named(tmp_path):
    task = grown_task(("grown_recipe", "warmup0"))
    method = get_method("stackbert", task=task)
    assert default_out(task, method, 0).name == "stackbert-warmup0-s0"
    out = run_experiment(task, method, out=tmp_path / "w0", progress=False, log=lambda m: None)
    config = json.loads((out / "config.json").read_text())
    assert config["grown_recipe"]["name"] == "warmup0" and config["grown_recipe"]["changes"] == {"warmup": 0}
    assert config["task"]["grown_recipe"] == "warmup0" and config["task"]["recipe"]["warmup"] == 0
    peak, steps = task.recipe.lr, task.recipe.steps
    lr = {r["step"]: r["lr"] for r in rows(out) if "lr" in r}
    # the lr logged after step s is the one step s + 1 uses: linear decay from the peak, no ramp before it
    assert lr[1] == pytest.approx(peak * (steps - 1) / steps)
    same = run_experiment(grown_task(), method, out=tmp_path / "same", progress=False, log=lambda m: None)
    warmup = get_task("bert_small_base", "tiny").recipe.warmup
    assert warmup > 1 and {r["step"]: r["lr"] for r in rows(same) if "lr" in r}[1] == pytest.approx(peak / warmup)
    assert json.loads((same / "config.json").read_text())["grown_recipe"]["name"] == "same"
    assert "grown_recipe" not in json.loads((same / "config.json").read_text())["task"]   # records stay as before
    assert display("ligo-warmup0") == "LiGO (warmup0)" and display("ligo_copy-paper_lr") == "LiGO (copy start) (paper_lr)"


def test_presets_change_only_the_large_recipe():
    base = get_task("bert_small_base", "mini")
    task = route(base, METHODS["ligo"], [("grown_recipe", "warmup0_paper_lr")])[0]
    assert (task.recipe.warmup, task.recipe.lr) == (0, 2e-4)            # the paper's BERT peak lr
    assert task.recipe.with_(warmup=base.recipe.warmup, lr=base.recipe.lr) == base.recipe
    assert task.small_recipe == base.small_recipe                         # the small model is not retrained
    llama = route(get_task("llama_small_base", "mini"), METHODS["lemon"], [("grown_recipe", "paper_lr")])[0]
    assert llama.recipe.lr == 3e-4
    deit = get_task("deit_s_b", "mini")
    tenth = route(deit, METHODS["net2net"], [("grown_recipe", "lr_tenth")])[0]
    assert tenth.recipe.lr == pytest.approx(deit.recipe.lr / 10)
    # recorded as applied: a preset relative to the recipe must not be worked out again from the changed recipe
    from tasks.grown_recipes import describe
    assert describe(tenth)["changes"] == {"lr": tenth.recipe.lr}
    official = route(base, METHODS["ligo"], [("grown_recipe", "official")])[0]
    assert official.recipe.warmup == 0 and official.recipe.lr == base.recipe.lr


@pytest.mark.parametrize("method, items, message", [
    ("scratch", [("grown_recipe", "warmup0")], "grown_recipe=warmup0 sets a grown model's training"),
    ("ligo", [("warmup", "5"), ("grown_recipe", "warmup0")], "--set warmup and grown_recipe=warmup0 both set warmup"),
    ("ligo", [("grown_recipe", "warmup")], "did you mean 'warmup0'"),
])
def test_bad_uses_are_refused(method, items, message):
    with pytest.raises((ValueError, KeyError), match=message):
        route(get_task("bert_small_base", "mini"), METHODS[method], items)
    with pytest.raises(ValueError, match="the official LiGO code grows bert and roberta only, not gpt2"):
        route(get_task("gpt2_base_medium", "mini"), METHODS["ligo"], [("grown_recipe", "official")])


def test_when_to_log_changes_no_number(tmp_path):
    """eval_every and log_every are logging-only (runs.record.LOGGING_FIELDS): the sweeps and the analysis treat two
    records that differ there as one computation, which holds only if training does not depend on them."""
    outs = []
    for every in (2, 4):
        task = grown_task(method="net2net").with_()
        task = task.with_(recipe=task.recipe.with_(eval_every=every, log_every=every))
        outs.append(rows(run_experiment(task, get_method("net2net", task=task), out=tmp_path / f"e{every}",
                                        progress=False, log=lambda m: None)))
    dense, sparse = ({r["step"]: r for r in o} for o in outs)
    assert set(sparse) < set(dense)
    for step, r in sparse.items():
        for key in ("eval_loss", "flops", "lr", "twins"):
            assert r.get(key) == dense[step].get(key), (step, key)


def test_analysis_compares_a_declared_variant_with_scratch_and_flags_an_undeclared_one(tmp_path):
    base = {"lr": 1e-3, "warmup": 100, "eval_every": 200}
    write_run(tmp_path, "scratch", SCRATCH, recipe=base)
    write_run(tmp_path, "ligo", [(0, 10, 7.0), (1, 110, 5.0), (2, 210, 4.0)], recipe=base,
              grown_recipe={"name": "same", "changes": {}})
    write_run(tmp_path, "ligo", [(0, 10, 7.0), (1, 110, 4.0)], label="ligo-warmup0",
              recipe={**base, "warmup": 0, "eval_every": 50}, grown_recipe={"name": "warmup0", "changes": {"warmup": 0}})
    write_run(tmp_path, "ligo", [(0, 10, 7.0), (1, 120, 4.0)], label="ligo-tuned", recipe={**base, "lr": 5e-4})
    runs, problems = load_runs(tmp_path)
    assert [(p.kind, p.dir.name) for p in problems] == [("mismatch", "ligo-tuned-s0")]
    r, c = runs_frame(runs), curves_frame(runs)
    seeds = all_savings(c, r)
    summary = summarize(seeds)
    table = savings_table(summary, r, "bert_small_base", "mini").set_index("Method")
    assert table.loc["LiGO (warmup0)", "Savings (FLOPs)"] == "72.5%"
    # without the fit: the 10 FLOPs it spent come off the cost (110 -> 100 of scratch's 400)
    assert table.loc["LiGO (warmup0)", "Savings excl. fit (FLOPs)"] == "75.0%"
    # the undeclared one is marked in every row it stands in, the declared variant and `same` are not
    assert dict(r.set_index("label")["recipe_differs"].fillna("--")) == {
        "scratch": "--", "ligo": "--", "ligo-warmup0": "--", "ligo-tuned": "lr 0.0005 vs 0.001"}
    assert table["Seeds"].to_dict() == {"Scratch": "1", "LiGO": "1", "LiGO (tuned)": "1 ¶", "LiGO (warmup0)": "1"}
    from analysis.__main__ import markdown
    from analysis.tables import generalisation_table
    assert "¶ trained under another recipe" in markdown(table.reset_index(), "caption")
    assert "¶" not in markdown(table.drop("LiGO (tuned)").reset_index(), "caption")
    r.loc[:, "closing_train_loss"] = 3.0        # these records logged no training loss; the mark is the point here
    assert generalisation_table(r, "bert_small_base", "mini").set_index("Method").loc["LiGO (tuned)", "Seeds"] == "1 ¶"
    axis = recipe_table(recipe_rows(seeds, r, "bert_small_base", "mini")).set_index("Method")
    assert axis.loc["LiGO", "same"] == "47.5% (1/1)" and axis.loc["LiGO", "warmup0"] == "72.5% (1/1)"


def test_a_record_older_than_the_axis_is_same_only_when_it_trained_with_scratchs_recipe(tmp_path):
    """Growth runs recorded before config `grown_recipe` existed stand in the `same` column when their recipe is
    scratch's (when to log aside); one with another recipe stays off the axis (a flagged mismatch), scratch and a
    small model are never on it. The curve table then says where each start stands when a preset reaches nothing."""
    base = {"lr": 1e-3, "warmup": 100, "eval_every": 200}
    write_run(tmp_path, "scratch", SCRATCH, recipe=base)
    write_run(tmp_path, "ligo", [(0, 10, 7.0), (2, 210, 5.5), (4, 410, 3.9)], recipe={**base, "eval_every": 100},
              small={"pretrain_flops": 1.0})                              # old: no grown_recipe, scratch's recipe
    write_run(tmp_path, "ligo", [(0, 10, 7.0), (2, 210, 5.0), (4, 410, 4.5)], label="ligo-paper_lr",
              recipe={**base, "lr": 2e-4}, small={"pretrain_flops": 1.0},
              grown_recipe={"name": "paper_lr", "changes": {"lr": 2e-4}})
    write_run(tmp_path, "ligo", [(0, 10, 7.0), (4, 410, 3.0)], label="ligo-tuned", recipe={**base, "lr": 5e-4},
              small={"pretrain_flops": 1.0})                              # old, another lr: no preset
    runs, problems = load_runs(tmp_path)
    assert [(p.kind, p.dir.name) for p in problems] == [("mismatch", "ligo-tuned-s0")]
    r, c = runs_frame(runs), curves_frame(runs)
    assert dict(zip(r["label"], r["grown_recipe"].fillna("--"))) == {
        "scratch": "--", "ligo": "same", "ligo-paper_lr": "paper_lr", "ligo-tuned": "--"}
    axis = recipe_rows(all_savings(c, r), r, "bert_small_base", "mini")
    assert sorted(zip(axis["method"], axis["preset"])) == [("ligo", "paper_lr"), ("ligo", "same")]
    curves = recipe_curve_table(c, axis, "bert_small_base", "mini", steps=(0, 2)).set_index(["Recipe", "Method"])
    assert curves.loc[("same", "LiGO"), "step 2"] == "5.500" and curves.loc[("same", "LiGO"), "end"] == "3.900"
    assert curves.loc[("paper_lr", "LiGO"), "step 2"] == "5.000" and curves.loc[("paper_lr", "LiGO"), "end"] == "4.500"
    assert curves.loc[("task's", "Scratch"), "step 0"] == f"{SCRATCH[0][2]:.3f}"
    assert list(curves.index.get_level_values(0)) == ["task's", "same", "paper_lr"]


def test_analysis_prints_the_headline_savings(tmp_path, capsys):
    from analysis.__main__ import main
    write_run(tmp_path / "runs", "scratch", SCRATCH)
    write_run(tmp_path / "runs", "ligo", [(0, 1, 7.0), (1, 101, 4.0)])        # a fit within the regime's 2%
    write_run(tmp_path / "runs", "ligo", [(0, 1, 7.0), (1, 201, 4.0)], label="ligo-warmup0",
              grown_recipe={"name": "warmup0", "changes": {}})
    write_run(tmp_path / "runs", "ligo_copy", [(0, 1, 7.0), (1, 301, 4.0)])      # a method whose name has brackets
    assert main(["--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "out"), "--formats", "png"]) == 0
    out = capsys.readouterr().out
    # the main comparison; variants in the tables
    assert "  bert_small_base [mini]: LiGO 74.8%; LiGO (copy start) 24.8%\n" in out
    assert (tmp_path / "out" / "recipes-bert_small_base-mini.md").exists()


def test_the_official_start_taken_apart_steps_add_up_and_need_every_rung(tmp_path):
    """starts-<task>-<scale>: LiGO's copy start, then LiGO's parts one group a row; each row's step from the
    one above is the difference of their savings, so the steps add up to the official start's lead over LiGO; with a
    rung missing the table is not written (its part would be folded into the next row, under the wrong name)."""
    from analysis.axes import START_PARTS, start_parts_table
    write_run(tmp_path, "scratch", SCRATCH)
    # each rung reaches scratch's final (4.0, at 400 FLOPs) sooner: 300, 240, 220, 180 FLOPs
    reach = {"ligo_copy": 300, "ligo_copy-random": 240, "ligo-pinv": 220, "ligo": 180}
    for label, flops in reach.items():
        write_run(tmp_path, label.split("-")[0], [(0, 0, 6.0), (1, flops // 2, 5.0), (2, flops, 4.0)], label=label)
    runs, problems = load_runs(tmp_path)
    assert not problems
    r, c = runs_frame(runs), curves_frame(runs)
    table = start_parts_table(c, summarize(all_savings(c, r)), "bert_small_base", "mini")
    assert list(table["Start"]) == [name for _, name in START_PARTS]
    assert list(table["FLOPs saved"]) == ["25.0%", "40.0%", "45.0%", "55.0%"]
    assert list(table["step from above"]) == ["--", "+15.0", "+5.0", "+10.0"]
    assert list(table["step 0"]) == ["6.000"] * 4 and list(table["end"]) == ["4.000"] * 4
    without = [run for run in runs if run.dir.name != "ligo_copy-random-s0"]
    r, c = runs_frame(without), curves_frame(without)
    assert start_parts_table(c, summarize(all_savings(c, r)), "bert_small_base", "mini").empty
