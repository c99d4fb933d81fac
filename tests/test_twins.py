"""Copy symmetry, measured (models/twins.py), on weights that have learned: a Net2Net-grown model is all twins in
every grown space, a random init has none, a unit moved 5% off its copy stops being one, copies whose residual-stream
weights moved 2% stop being twins in D although the norms' entries would have hidden it, the measure does not care
which units a method calls new, and a run records it, and which measure made it, at step 0 and at every
evaluation."""
import json

import pytest
import torch

from methods import get_method
from models import build_model, get_family
from models.canonical import OUT, RESIDUAL
from models.twins import (MEASURE, TOLERANCE, incoming, redundant_units, relative_distances,
                          twin_fractions, unit_vectors)
from tasks import make_task

PAIRS = {"vit": make_task("vit", dict(layers=2, hidden=32, heads=2), dict(layers=2, hidden=64, heads=4), "tiny"),
         "bert": make_task("bert", dict(layers=2, hidden=32, heads=2), dict(layers=4, hidden=48, heads=3), "tiny")}


def grown(pair, method, trained):
    task = PAIRS[pair]
    return get_family(task.family).to_canonical(get_method(method, task=task).grow(trained(task.small), task))


@pytest.mark.parametrize("pair", PAIRS)
def test_net2net_start_is_all_twins_and_random_init_none(pair, trained):
    task = PAIRS[pair]
    copied = twin_fractions(grown(pair, "net2net", trained), task.small)
    assert set(copied["twins"]) == {"D", "Q", "K", "V", "F"}        # every space the pair grows
    assert all(v == 1.0 for v in copied["twins"].values()), copied
    assert all(v < 1e-6 for v in copied["twin_gap"].values())
    assert copied["twins_measure"] == MEASURE
    torch.manual_seed(0)
    fresh = twin_fractions(get_family(task.family).to_canonical(build_model(task.large)), task.small)
    assert all(v == 0.0 for v in fresh["twins"].values()), fresh
    assert all(v > 0.1 for v in fresh["twin_gap"].values())


def test_symmetry_breaking_starts_are_not_twins(trained):
    task = PAIRS["vit"]
    direct = twin_fractions(grown("vit", "direct_copy", trained), task.small)["twins"]
    assert all(v == 0.0 for v in direct.values()), direct          # new units are random
    official = twin_fractions(grown("vit", "ligo", trained), task.small)["twins"]
    assert all(v == 0.0 for v in official.values()), official      # new rows are random averages of all units
    lemon = twin_fractions(grown("vit", "lemon", trained), task.small)["twins"]
    assert lemon["D"] == 1.0       # LEMON copies incoming weights; its asymmetry is in the fan-out (split shares)


def test_a_copy_moved_off_its_source_stops_being_a_twin(trained):
    canon = grown("vit", "net2net", trained)
    fc1 = canon.blocks[0]["fc1.weight"]
    n1, n2 = PAIRS["vit"].small.ffn, PAIRS["vit"].large.ffn
    # which row is "the copy" is the method's business: take any row that has a twin, move it 5%
    rows = fc1.double()
    twin = next(i for i in range(n2) for j in range(n2) if i != j and torch.equal(rows[i], rows[j]))
    fc1[twin] += 0.05 * fc1[twin].norm() * torch.randn(fc1.shape[1], generator=torch.Generator().manual_seed(0)) \
        / fc1.shape[1] ** 0.5
    fractions = twin_fractions(canon, PAIRS["vit"].small)["twins"]
    layers = len(canon.blocks)
    assert fractions["F"] == pytest.approx((layers * (n2 - n1) - 1) / (layers * (n2 - n1)))
    assert fractions["D"] == 1.0


def d_slices(canon, unit: int, norms: bool):
    """Every slice of the tensors that produce residual-stream unit `unit`: its weights (`norms` False) or the
    norms' gains and shifts (True); views, so that adding to one moves the model."""
    return [t.select(axis, unit) for section, _, key, t in canon.items()
            for axis, tag in enumerate(canon.axes(section, key))
            if tag == (RESIDUAL, OUT) and incoming(RESIDUAL, key) != norms]


def test_copies_whose_weights_moved_2_percent_are_no_twins_in_d_though_the_norm_entries_hid_it(trained):
    """The residual stream's vector used to hold every norm's gain and shift beside the weights; those entries (~1
    each) outweigh the weights, so a drift of the weights read several times smaller than it is. Each added copy's
    weights (embedding columns, o/fc2 rows, biases; not the norms) moved 2% of their size: no twin is left in D, and
    on these weights that drift is under 1% of the vector with the norm entries in it (what the old measure saw)."""
    task = PAIRS["vit"]
    canon = grown("vit", "net2net", trained)
    rel = relative_distances(unit_vectors(canon)[(RESIDUAL, None)])
    rel.fill_diagonal_(float("inf"))
    # a copy: a unit with a twin of lower index, equal up to float rounding (which unit a method calls new is its
    # business); one per added unit, since Net2Net copies every added unit
    copies = [i for i in range(len(rel)) if (rel[i, :i] < 1e-6).any()]
    assert len(copies) == task.large.hidden - task.small.hidden
    gen = torch.Generator().manual_seed(0)
    for i in copies:
        weights = d_slices(canon, i, norms=False)
        size = torch.cat([w.reshape(-1) for w in weights]).norm()
        norms = torch.cat([n.reshape(-1) for n in d_slices(canon, i, norms=True)]).norm()
        assert 0.02 * size < 0.9 * TOLERANCE * (size ** 2 + norms ** 2) ** 0.5     # what the norm entries hid
        moves = [torch.randn(w.shape, generator=gen, dtype=torch.float64) for w in weights]
        scale = 0.02 * size / torch.cat([m.reshape(-1) for m in moves]).norm()
        for w, m in zip(weights, moves):
            w += (scale * m).to(w.dtype)
    fractions = twin_fractions(canon, task.small)["twins"]
    assert fractions["D"] == 0.0
    assert all(fractions[space] == 1.0 for space in fractions if space != RESIDUAL)      # untouched


def test_groups_count_once_and_order_does_not_matter():
    base = torch.randn(3, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    units = torch.cat([base, base[:1], base[:1], base[1:2] * (1 + TOLERANCE / 10)])   # a triple and a pair
    assert redundant_units(relative_distances(units)) == 3
    assert redundant_units(relative_distances(units[torch.randperm(len(units))])) == 3
    assert redundant_units(relative_distances(torch.cat([base, base[:1] * (1 + 10 * TOLERANCE)]))) == 0


def test_a_run_records_twins_at_step_0_and_every_evaluation(tmp_path):
    from runs.experiment import run_experiment
    task = PAIRS["vit"].with_(recipe=PAIRS["vit"].recipe.with_(steps=4, eval_every=2, log_every=1))
    out = run_experiment(task, get_method("net2net", task=task), out=tmp_path / "run", progress=False,
                         log=lambda msg: None)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    evaluated = [r for r in rows if "eval_loss" in r]
    assert [r["step"] for r in evaluated] == [0, 2, 4]
    assert all(set(r["twins"]) == {"D", "Q", "K", "V", "F"} and set(r["twin_gap"]) == set(r["twins"])
               and r["twins_measure"] == MEASURE for r in evaluated)
    assert all("twins" not in r for r in rows if "eval_loss" not in r)      # only where it evaluates
    assert evaluated[0]["twins"]["D"] == 1.0                                  # the Net2Net start


def test_the_analysis_marks_d_measured_with_the_norm_entries_and_only_that(tmp_path, monkeypatch):
    """Committed records hold twins rows logged before the measure was named (D with the norms' entries); their
    models are not kept, so nothing can measure them again: the twins table marks such a label's D cell and the
    figure its legend entry, both say what the mark means, and a record that names its measure carries no mark."""
    from analysis import axes
    from analysis.__main__ import main
    from records import SCRATCH, write_run
    runs = tmp_path / "runs"
    for label, named, curve in (("net2net", False, SCRATCH), ("lemon", True, SCRATCH[:-1] + [(4, 400, 3.9)])):
        d = write_run(runs, label, curve, task="bert_width_only")
        rows = [json.loads(line) for line in (d / "metrics.jsonl").read_text().splitlines()]
        for r in rows:
            r.update({"twins": {"D": 1.0, "F": 1.0}, "twin_gap": {"D": 0.0, "F": 0.0}},
                     **({"twins_measure": MEASURE} if named else {}))
        (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    figures = []
    monkeypatch.setattr(axes, "save", lambda fig, path, formats: figures.append(
        ([t.get_text() for t in fig.legends[0].get_texts()], fig.get_suptitle())) or [])
    assert main(["--runs", str(runs), "--out", str(tmp_path / "out"), "--formats", "png"]) == 0
    table = (tmp_path / "out" / "twins-bert_width_only-mini.md").read_text()
    d_cells = {line.split("|")[1].strip(): line.split("|")[2].strip() for line in table.splitlines()
               if line.startswith("| ") and "Method" not in line}
    assert d_cells == {"LEMON": "1.00 → 1.00 (gap 0)", "Net2Net": f"1.00 → 1.00 (gap 0) {axes.OLD_D_MARK}"}
    assert f"{axes.OLD_D_MARK} {axes.OLD_D}" in table
    ((names, title),) = figures
    assert sorted(names) == ["LEMON", f"Net2Net {axes.OLD_D_MARK}"]
    assert f"{axes.OLD_D_MARK} {axes.OLD_D}" in title
