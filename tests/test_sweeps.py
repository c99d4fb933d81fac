"""The sweep runner (bench/sweeps/cli.py, bench/sweeps/registry.py, bench/sweeps/records.py): labels, plans, resume status,
settings, the checks before any run, twins recorded instead of computed again, stale records left alone."""
import pytest

from analysis import load_runs, runs_frame
from records import SCRATCH, write_run


def test_sweep_labels_match_figures_and_resume_status(tmp_path):
    from analysis.figures import PAPER_FIGURES
    from bench.sweeps.registry import SWEEPS, plan
    from bench.sweeps.cli import run_dir, status
    labels = {e.name for s in SWEEPS.values() for scale in ("paper", "mini") for e in s.entries(scale)}
    for _, panels in PAPER_FIGURES.values():
        for p in panels:
            assert set(p.labels or ()) <= labels, p
    todo = plan(["bert", "ligo_init"], "mini", [0, 1])
    # bert: scratch + 8 methods; ligo_init adds each LiGO start's -init run; 2 seeds; shared runs listed once
    assert len(todo) == len({(e.task, e.name, s) for e, s in todo}) == 2 * (9 + 2)
    chosen = plan(["recipes"], "mini", [0, 1], labels=["stackbert-warmup0", "ligo-warmup0"])   # --runs
    assert [(e.name, s) for e, s in chosen] == [("ligo-warmup0", 0), ("ligo-warmup0", 1), ("stackbert-warmup0", 0),
                                                ("stackbert-warmup0", 1)]
    assert dict(chosen[0][0].settings)["grown_recipe"] == "warmup0"
    deit = plan(["symmetry"], "mini", [2], labels=["ligo_copy-copies"], tasks=["deit_s_b"])    # --tasks
    assert [(e.task, e.name, s) for e, s in deit] == [("deit_s_b", "ligo_copy-copies", 2)]
    with pytest.raises(KeyError, match="gpt2_base_medium"):      # a pair the sweep does not cover selects nothing
        plan(["symmetry"], "mini", [0], tasks=["gpt2_base_medium"])
    d = run_dir(tmp_path, todo[0][0], "mini", 0)
    assert status(d) == "new"
    write_run(tmp_path, "scratch", SCRATCH[:2], complete=False)
    assert status(d) == "resume"
    (d / "summary.json").write_text("{}")
    assert status(d) == "done"


def test_lemon_decay_trains_the_large_model_for_lemons_uncut_share_and_shares_the_small_model():
    """LEMON's schedule (max lr kept, faster decay) is the large model's recipe cut to 43.3% of its steps; the
    small model's recipe, and so its cache, must stay the task's; `all` (the paper's) leaves the sweep out."""
    from bench.sweeps.registry import LEMON_VIT_SAVING, SWEEPS
    from bench.sweeps.cli import build
    from tasks.registry import get_task
    for scale in ("mini", "tiny"):
        entry = next(e for e in SWEEPS["lemon"].entries(scale) if e.name == "lemon-decay")
        task, method, _ = build(entry, scale)
        full = get_task("deit_s_b", scale)
        assert task.recipe.steps == round(full.recipe.steps * (1 - LEMON_VIT_SAVING)) < full.recipe.steps
        assert task.recipe.with_(steps=full.recipe.steps) == full.recipe and task.small_recipe == full.small_recipe
        assert method.name == "lemon"
    assert "lemon-decay" not in {e.name for e in SWEEPS["all"].entries("tiny")}


def test_extra_starts_run_direct_copy_and_lemon_on_each_headline_pair_that_takes_them():
    """Issue 61's "LEMON and direct copy where they apply": where a method refuses a pair (its check_pair), the sweep
    leaves it out instead of failing the sweep; where it takes one, the sweep runs it. `all` leaves the sweep out."""
    from bench.sweeps.registry import SWEEPS
    from methods.registry import get_method
    from tasks.registry import get_task
    for scale in ("regime", "tiny"):
        by_task = {}
        for e in SWEEPS["extra_starts"].entries(scale):
            by_task.setdefault(e.task, []).append(e.name)
        assert by_task == {"bert_small_base": ["scratch", "direct_copy"],
                           "gpt2_base_medium": ["scratch", "direct_copy", "lemon"],
                           "deit_s_b": ["scratch", "direct_copy", "lemon"]}, scale
        bert = get_task("bert_small_base", scale)
        with pytest.raises(ValueError, match="post-LN bert in depth"):     # BERT grows depth, post-norm
            get_method("lemon", bert).check_pair(bert)
    paper = {(e.task, e.name) for e in SWEEPS["all"].entries("tiny")}
    assert ("gpt2_base_medium", "lemon") not in paper and ("bert_small_base", "direct_copy") not in paper


def test_official_start_sweep_swaps_one_part_of_the_official_start_at_a_time():
    """official_start's variants are LiGO's copy start with LiGO's random rows and LiGO's start with the copy start's
    pseudo-inverse tying; the rest of each config is its base method's own, and the plain labels are the
    recipes sweep's runs (the same settings, so the same directories)."""
    from bench.sweeps.registry import SWEEPS
    from bench.sweeps.cli import build
    entries = {e.name: e for e in SWEEPS["official_start"].entries("mini")}
    configs = {name: build(e, "tiny")[1].config for name, e in entries.items() if e.method != "scratch"}
    official, ligo = configs["ligo"], configs["ligo_copy"]
    assert (official.width_init, official.tying, official.depth_init) == ("random", "literal", "stackbert_noisy")
    assert (ligo.width_init, ligo.tying, ligo.depth_init) == ("net2net", "pinv", "stackbert")
    assert set(entries) == {"scratch", "ligo_copy", "ligo", "ligo-pinv", "ligo_copy-random"}
    for name, base, changed in (("ligo-pinv", official, {"tying": "pinv"}),
                                ("ligo_copy-random", ligo, {"width_init": "random"})):
        got = {k: v for k, v in vars(configs[name]).items() if v != vars(base)[k]}
        assert got == changed, name
    recipes = {e.name: e for e in SWEEPS["recipes"].entries("mini")}
    same = lambda e: (e.task, e.method, e.name, e.settings)      # noqa: E731
    assert all(same(entries[n]) == same(recipes[n]) for n in ("scratch", "ligo", "ligo_copy"))


def test_symmetry_sweep_takes_the_official_start_apart_on_both_pairs():
    """E3's pairs (width-only BERT, DeiT) carry the same parts as official_start's BERT runs (random rows alone, all
    but the literal tying), evaluated as densely as the sweep's other starts, so the official start's lead over
    LiGO splits the same way on every pair that has it."""
    from bench.sweeps.registry import DENSE_EVAL, SWEEPS, official_start_parts
    entries = SWEEPS["symmetry"].entries("mini")
    for task in ("deit_s_b", "bert_width_only"):
        mine = {e.name: e for e in entries if e.task == task}
        for part in official_start_parts(task, DENSE_EVAL):
            assert mine[part.name] == part, (task, part.name)
        assert {"ligo", "ligo_copy", "ligo_copy-copies", "net2net", "direct_copy"} <= set(mine)


def test_sweep_set_reaches_the_recipe_it_names():
    """--set lr=... is the growth run's recipe, --set small_recipe.lr=... the small model's pretraining, as in
    run.py; a small_recipe key that is no recipe field is refused in one line naming the accepted kinds."""
    from bench.sweeps.registry import Entry
    from bench.sweeps.cli import build
    from tasks.registry import get_task
    full = get_task("bert_small_base", "tiny")
    task, _, _ = build(Entry("bert_small_base", "ligo"), "tiny", (("lr", 3e-4), ("small_recipe.warmup", 1)))
    assert task.recipe == full.recipe.with_(lr=3e-4)
    assert task.small_recipe == full.small_recipe.with_(warmup=1) != full.small_recipe
    with pytest.raises(ValueError, match=r"did you mean 'small_recipe.warmup'.*small_recipe.<recipe field>"):
        build(Entry("bert_small_base", "ligo"), "tiny", (("small_recipe.warmpu", 1),))


def test_sweep_checks_every_entry_before_it_runs_any(tmp_path, monkeypatch, capsys):
    """A bad option of the sweep's second entry is refused before the first trains, and a negative seed before
    anything: one line, exit 2, nothing written."""
    from bench.sweeps.registry import SWEEPS, Entry, Sweep
    from bench.sweeps.cli import main
    entries = [Entry("bert_small_base", "scratch"), Entry("bert_small_base", "ligo", "ligo-badlr", (("fit_lr", -1.0),))]
    monkeypatch.setitem(SWEEPS, "probe", Sweep("probe", "a test", lambda scale: entries))
    for args, needle in ((["--seeds", "0"], "ligo fit_lr must be a finite number > 0, got -1.0"),
                         (["--seeds", "0", "-1", "--methods", "scratch"],
                          "--seeds must be integers in [0, 2**63), got 0 -1")):
        assert main(["probe", "--scale", "tiny", "--out", str(tmp_path / "out"), *args]) == 2
        err = capsys.readouterr().err.strip()
        assert err == f"error: {needle}"
        assert not (tmp_path / "out").exists()


def test_sweep_records_a_twin_instead_of_running_the_same_computation_again(tmp_path):
    """tiny bert_small_base grows 1 -> 2 layers, where stacking, interpolation and Net2Net's stacking coincide:
    the first is run, the other two get its record under their own names."""
    from bench.sweeps.cli import run_sweep
    from runs.record import load_run
    logs = []
    out = run_sweep(["bert"], "tiny", [0], tmp_path, only=["stackbert", "interpolation", "net2net"], log=logs.append)
    assert len(out["ran"]) == 1 and len(out["same computation"]) == 2 and not out["failed"], logs
    base = tmp_path / "bert_small_base-tiny"
    first, twin = load_run(base / "stackbert-s0"), load_run(base / "net2net-s0")
    assert twin.config["same_computation_as"] == "stackbert-s0" and twin.method == "net2net"
    assert twin.metrics == first.metrics and twin.summary == first.summary
    runs, _ = load_runs(tmp_path)
    assert set(runs_frame(runs)["label"]) >= {"stackbert", "interpolation", "net2net"}


def test_sweep_takes_scratch_from_another_task_that_trains_the_same_large_model(tmp_path):
    """bert_depth_only's large model, data and recipe are bert_small_base's: its scratch run is that task's, recorded
    under its own task (and computing it gives the same curve); another recipe is another computation."""
    from analysis.frames import twin_of
    from bench.sweeps.cli import run_sweep
    from runs.record import load_run
    curve = lambda run: [(m["step"], m.get("flops"), m.get("eval_loss")) for m in run.metrics]  # noqa: E731
    logs = []
    first = run_sweep(["bert"], "tiny", [0], tmp_path / "r", only=["scratch"], log=logs.append)
    again = run_sweep(["depth_only"], "tiny", [0], tmp_path / "r", only=["scratch"], log=logs.append)
    assert len(first["ran"]) == 1 and not again["ran"] and len(again["same computation"]) == 1, logs
    assert again["same computation"][0].endswith("= bert_small_base-tiny/scratch-s0")
    source, twin = (load_run(tmp_path / "r" / f"{t}-tiny" / "scratch-s0")
                    for t in ("bert_small_base", "bert_depth_only"))
    assert twin.config["same_computation_as"] == "bert_small_base-tiny/scratch-s0"
    assert twin.config["task"]["name"] == "bert_depth_only" and twin.summary == source.summary
    computed = run_sweep(["depth_only"], "tiny", [0], tmp_path / "alone", only=["scratch"], log=logs.append)
    assert len(computed["ran"]) == 1, logs
    assert curve(load_run(tmp_path / "alone" / "bert_depth_only-tiny" / "scratch-s0")) == curve(twin)
    other = run_sweep(["width_only"], "tiny", [0], tmp_path / "r", only=["scratch"], common=(("lr", 5e-4),),
                      log=logs.append)
    assert len(other["ran"]) == 1 and not other["same computation"], logs
    runs, _ = load_runs(tmp_path / "r")
    frame = runs_frame(runs)
    assert set(frame[frame["label"] == "scratch"]["task"]) == {"bert_small_base", "bert_depth_only", "bert_width_only"}
    assert all(twin_of(r) is None for r in runs)


def test_sweep_reports_a_complete_record_of_another_recipe_as_stale_and_leaves_it_alone(tmp_path):
    """BERT mini's lr changed (2e-3 -> 1e-3, 2026-11-23): a sweep must not count the records of the old recipe as
    its result ('complete, skipped'), nor overwrite them: it names them, what differs, and exits non-zero."""
    from bench.sweeps.cli import main, run_sweep
    logs = []
    out = run_sweep(["bert"], "tiny", [0], tmp_path, only=["scratch"], log=logs.append)
    assert len(out["ran"]) == 1 and not out["failed"], logs
    run = tmp_path / "bert_small_base-tiny" / "scratch-s0"
    before = {f.name: f.read_bytes() for f in run.iterdir() if f.is_file()}
    out = run_sweep(["bert"], "tiny", [0], tmp_path, only=["scratch"], common=(("lr", 5e-4),), log=logs.append)
    assert not out["ran"] and not out["done"] and len(out["stale"]) == 1, logs
    assert out["stale"][0].endswith("its task was recorded with another configuration (differs in: recipe.lr)")
    assert {f.name: f.read_bytes() for f in run.iterdir() if f.is_file()} == before
    assert main(["bert", "--scale", "tiny", "--seeds", "0", "--methods", "scratch", "--out", str(tmp_path),
                 "--set", "lr=5e-4"]) == 1
    assert run_sweep(["bert"], "tiny", [0], tmp_path, only=["scratch"], log=logs.append)["done"] == [str(run)]


def test_a_method_default_added_for_another_method_makes_no_record_stale_or_unresumable(tmp_path):
    """The task records its per-scale method defaults (fit_steps for LiGO; MSG's ramp_steps came later): a default
    the run's method does not have changes nothing it computed, so its record stays done and resumable."""
    import json
    from bench.sweeps.cli import run_sweep
    from runs.preflight import check_resumable
    logs = []
    assert not run_sweep(["bert"], "tiny", [0], tmp_path, only=["scratch"], log=logs.append)["failed"], logs
    run = tmp_path / "bert_small_base-tiny" / "scratch-s0"
    config = json.loads((run / "config.json").read_text())
    older = {**config, "task": {**config["task"], "method_defaults": [["fit_steps", 3]]}}
    (run / "config.json").write_text(json.dumps(older))
    assert run_sweep(["bert"], "tiny", [0], tmp_path, only=["scratch"], log=logs.append)["done"] == [str(run)]
    check_resumable(run, older, config, None)
    with pytest.raises(ValueError, match=r"differs in: recipe"):
        check_resumable(run, older, {**config, "task": {**config["task"], "recipe": {}}}, None)


def test_sweep_eval_settings_reach_the_evaluation_and_a_pruned_run_is_refused_before_anything(tmp_path, monkeypatch,
                                                                                              capsys):
    """--set eval.KEY=VALUE sets the fine-tuning of --eval as it does run.py's; a complete run pruned before it was
    evaluated holds no model to evaluate, refused up front (one line, exit 2, nothing written) rather than failing
    after every other run of the sweep."""
    import bench.sweeps.cli as sweeps
    out, seen = tmp_path / "out", []
    monkeypatch.setattr(sweeps, "evaluate", lambda run, suites, options, log: seen.append((run.name, suites, options)))
    args = ["bert", "--scale", "tiny", "--seeds", "0", "--methods", "scratch", "--out", str(out)]
    assert sweeps.main([*args, "--eval", "mini", "--set", "eval.seeds=0,1", "--set", "eval.epochs=2"]) == 0
    assert [(run, suites) for run, suites, _ in seen] == [("scratch-s0", ["mini"])]
    assert (seen[0][2].seeds, seen[0][2].epochs) == ((0, 1), 2)
    monkeypatch.undo()
    assert sweeps.main([*args, "--prune"]) == 0            # complete, then pruned: no model/ left, no eval.json
    capsys.readouterr()
    before = sorted((p, p.stat().st_mtime_ns) for p in out.rglob("*"))
    assert sweeps.main([*args, "--eval", "mini"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --eval mini: 1 complete run(s) were pruned before this evaluation") and "\n" not in err
    assert sorted((p, p.stat().st_mtime_ns) for p in out.rglob("*")) == before


def test_a_small_models_committed_record_is_not_overwritten_by_another_pretraining(tmp_path):
    """A run that grew from a small model pretrained again on another CPU (its eval loss some 1e-7 away) must not
    replace the committed small-s<seed> record the other runs of that seed grew from; the sweep's log says why it
    was kept. The same pretraining, evaluated since, is copied again (its eval.json joins the record)."""
    import json
    from types import SimpleNamespace
    from bench.sweeps.cli import finish_run
    cache, task = tmp_path / "cache" / "small-entry", tmp_path / "out" / "pair-regime"
    run, committed = task / "lemon-s0", task / "small-s0"
    for d in (cache, run, committed):
        d.mkdir(parents=True)
    summary = {"step": 6400, "flops": 1.0e14, "units": 409600, "eval_loss": 3.98663774, "eval_acc": None}
    (committed / "summary.json").write_text(json.dumps(summary))
    (committed / "config.json").write_text('{"seed": 0}')
    (cache / "summary.json").write_text(json.dumps({**summary, "eval_loss": 3.9866373}))
    (cache / "config.json").write_text('{"seed": 0, "pretrained": "again"}')
    (cache / "eval.json").write_text('{"suites": {"mini": {}}}')
    (run / "config.json").write_text(json.dumps({"small": {"source": "cache", "path": str(cache)}}))
    before = {p.name: p.read_bytes() for p in committed.iterdir()}
    logs = []
    finish_run(run, SimpleNamespace(small_label="small"), 0, ok=True, prune_done=False, log=logs.append)
    assert {p.name: p.read_bytes() for p in committed.iterdir()} == before
    assert len(logs) == 1 and f"{committed} kept" in logs[0] and "eval_loss 3.9866373 vs 3.98663774" in logs[0]
    (cache / "summary.json").write_text(json.dumps(summary))         # the same computation, evaluated since
    logs.clear()
    finish_run(run, SimpleNamespace(small_label="small"), 0, ok=True, prune_done=False, log=logs.append)
    assert not logs and (committed / "eval.json").is_file()
    assert json.loads((committed / "config.json").read_text())["pretrained"] == "again"
