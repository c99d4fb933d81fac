"""Distributed training (runs/distributed.py): `torchrun --nproc_per_node 2 run.py ...` on CPU (gloo) computes what
one process computes with the same global batch (batch_size x grad_accum x processes): the same losses (to
float-summation order), the same FLOPs ledger (each rank's analytic FLOPs summed over the ranks), the same eval
numbers, the same LiGO operator fit; and only rank 0 writes the record.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

import run
from runs import distributed
from runs.record import load_run

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--task", "bert_small_base", "--scale", "tiny", "--quiet", "--set", "log_every=1"]
REL = 1e-5


def torchrun(args: list[str], nproc: int = 2) -> None:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
           str(ROOT / "run.py"), *args]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    if sys.platform == "linux":      # one host: keep gloo on loopback whatever the host name resolves to
        env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    done = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]


def same_numbers(one: Path, two: Path, extra_fit: float = 0.0) -> None:
    """Every metrics row and the summary agree: FLOPs and units exactly, losses to REL. `extra_fit`: the FLOPs the
    second run's fit computes beyond the first's (LiGO materialises once per rank per step)."""
    a, b = load_run(one), load_run(two)
    assert [r["step"] for r in a.metrics] == [r["step"] for r in b.metrics]   # rank 1 logged nothing extra

    def flops(row, extra=0.0):
        return {k: v + extra if k in ("flops", "flops_fit") else v for k, v in row.items() if k.startswith("flops")}
    for x, y in zip(a.metrics, b.metrics):
        assert flops(x, extra_fit) == pytest.approx(flops(y), rel=1e-12)
        assert x["units"] == y["units"] and x.keys() == y.keys()
        for key in ("train_loss", "eval_loss", "eval_acc"):
            if key in x:
                assert y[key] == pytest.approx(x[key], rel=REL), (x["step"], key)
    assert a.summary["flops"] + extra_fit == pytest.approx(b.summary["flops"], rel=1e-12)
    assert {**a.summary["flops_by_phase"], "fit": a.summary["flops_by_phase"]["fit"] + extra_fit} == pytest.approx(
        b.summary["flops_by_phase"], rel=1e-12)
    assert b.summary["eval_loss"] == pytest.approx(a.summary["eval_loss"], rel=REL)
    for d in (a, b):
        assert d.config["distributed"]["global_batch"] == a.config["distributed"]["global_batch"]
    assert b.config["distributed"]["world_size"] == 2 and a.config["distributed"]["world_size"] == 1
    from safetensors.torch import load_file
    wa, wb = load_file(one / "model" / "model.safetensors"), load_file(two / "model" / "model.safetensors")
    assert wa.keys() == wb.keys()
    for k in wa:
        torch.testing.assert_close(wb[k], wa[k], rtol=1e-4, atol=1e-5)


def test_ligo_fit_and_training_on_two_processes_match_one(tmp_path):
    """LiGO: the operator fit (gradients all-reduced) and then DDP training; 2 x 1 micro-batch = 1 x 2."""
    args = ["--method", "ligo", *TINY, "--steps", "4", "--set", "eval_every=2", "--set", "fit_steps=3"]
    one, two = tmp_path / "one", tmp_path / "two"
    assert run.main([*args, "--set", "grad_accum=2", "--out", str(one)]) == 0   # also caches the small model
    torchrun([*args, "--out", str(two)])
    fa, fb = (json.loads((d / "ligo_fit.json").read_text()) for d in (one, two))
    # one process materialises once a step for its two micro-batches, two processes once each (methods/ligo.py)
    assert fb["materialise_flops"] == fa["materialise_flops"] > 0
    same_numbers(one, two, extra_fit=3 * fa["materialise_flops"])
    assert fb["loss"] == pytest.approx(fa["loss"], rel=REL)
    assert fb["flops_per_step"] == pytest.approx(fa["flops_per_step"] + fa["materialise_flops"], rel=1e-12)
    assert load_run(two).metrics[0]["flops_fit"] == pytest.approx(3 * fb["flops_per_step"], rel=1e-12)   # over ranks
    oa, ob = (torch.load(d / "ligo_operator.pt") for d in (one, two))
    for k in oa:
        torch.testing.assert_close(ob[k], oa[k], rtol=1e-4, atol=1e-6)
    assert sorted(p.name for p in two.iterdir()) == sorted(p.name for p in one.iterdir())


def test_accumulation_and_layer_dropping_on_two_processes_match_one(tmp_path):
    """DDP with no_sync accumulation (2 per rank) and unused parameters (dropped layers) = 1 x 4 micro-batches."""
    args = ["--method", "scratch", *TINY, "--steps", "4", "--set", "eval_every=2", "--set", "layer_drop=0.5"]
    one, two = tmp_path / "one", tmp_path / "two"
    assert run.main([*args, "--set", "grad_accum=4", "--out", str(one)]) == 0
    torchrun([*args, "--set", "grad_accum=2", "--out", str(two)])
    same_numbers(one, two)
    full = 4 * load_run(one).metrics[1]["flops"]     # 4 steps as costly as the first (no layer dropped at step 0)
    assert load_run(one).summary["flops"] < full                 # layers were dropped: DDP saw unused parameters


def test_fsdp_on_two_processes_matches_one(tmp_path):
    """FSDP2 (weights, gradients and optimizer state sharded; gathered for the checkpoint and the export)."""
    args = ["--method", "scratch", *TINY, "--steps", "4", "--set", "eval_every=2"]
    one, two = tmp_path / "one", tmp_path / "two"
    assert run.main([*args, "--set", "grad_accum=2", "--out", str(one)]) == 0
    torchrun([*args, "--fsdp", "--out", str(two)])
    same_numbers(one, two)
    ca, cb = (torch.load(d / "checkpoint.pt", weights_only=False) for d in (one, two))
    assert ca["model"].keys() == cb["model"].keys() and cb["state"]["step"] == ca["state"]["step"] == 4


def test_single_process_opens_no_process_group_and_keeps_its_data_order(tmp_path):
    assert run.main(["--method", "scratch", *TINY, "--steps", "2", "--out", str(tmp_path / "r")]) == 0
    assert not dist.is_initialized() and distributed.world_size() == 1 and distributed.is_main()
    assert [distributed.micro_index(s, m, 3) for s in range(2) for m in range(3)] == list(range(6))
    stream = distributed.rank_stream(lambda i: i, 2)
    assert [next(stream) for _ in range(5)] == list(range(5))
    config = load_run(tmp_path / "r").config["distributed"]
    assert config == {"world_size": 1, "mode": None, "backend": None, "global_batch": config["global_batch"]}


def test_resume_refuses_another_world_size(tmp_path):
    out = tmp_path / "r"
    assert run.main(["--method", "scratch", *TINY, "--steps", "2", "--out", str(out)]) == 0
    (out / "summary.json").unlink()
    config = json.loads((out / "config.json").read_text())
    config["distributed"].update(world_size=2, mode="ddp")
    (out / "config.json").write_text(json.dumps(config))
    assert run.main(["--method", "scratch", *TINY, "--steps", "2", "--out", str(out), "--resume"]) == 2


def test_two_processes_copy_a_small_model_another_pair_pretrained(tmp_path, monkeypatch):
    """Under torchrun rank 0 copies another pair's pretraining of the same small model and every rank then reads
    it; no rank pretrains it again (a rank that did would wait forever on a collective the others never join)."""
    import runs.small_model as small_model
    from runs import out_dirs
    from runs.experiment import pretrain_small
    from tasks import get_task
    monkeypatch.setattr(out_dirs, "OUT_ROOT", tmp_path / "out")
    monkeypatch.setenv("GROWBENCH_OUT", str(tmp_path / "out"))
    base, large = get_task("bert_small_base", "tiny"), get_task("bert_small_large", "tiny")
    small_model.resolve_small(base, 0, None, torch.device("cpu"), lambda msg: None, False, pretrain_small)
    torchrun(["--method", "stackbert", "--task", "bert_small_large", "--scale", "tiny", "--quiet", "--steps", "2",
              "--out", str(tmp_path / "two")])
    copied = load_run(small_model.small_cache_dir(large, 0))
    assert copied.config["same_computation_as"] == f"small/{small_model.small_cache_dir(base, 0).name}"
    assert load_run(tmp_path / "two").config["small"]["path"] == str(small_model.small_cache_dir(large, 0))
