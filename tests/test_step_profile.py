"""bench/perf/step_profile.py profiles training steps only: its first device run (H200, 2026-11-27) profiled the trainer's
whole run, model set-up and the final evaluation included, and divided by the step count, which put the trainer's
GEMM time per step at twice the raw loop's. These tests count what is inside the window."""
import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from bench.perf.gpu_mfu import SyntheticTokens  # noqa: E402
from bench.perf.step_profile import breakdown, copy_sources, profiled_window  # noqa: E402
from bench.perf.throughput import raw_run, trainer_run  # noqa: E402
from tasks import get_task  # noqa: E402

OPTIMIZER_STEP = "Optimizer.step#"      # torch's record_function name around every optimizer.step()


def tiny_timing_task(steps: int, log_every: int, bf16: bool = False):
    task = get_task("bert_small_base", scale="tiny")
    return task.with_(recipe=task.recipe.with_(steps=steps, batch_size=2, log_every=log_every, eval_every=10 * steps,
                                               eval_batches=1, bf16=bf16, warmup=1))


@pytest.mark.parametrize("run", [trainer_run, raw_run], ids=["trainer", "raw"])
def test_the_window_holds_exactly_the_steps_between_two_marks(run):
    torch.set_num_threads(1)
    task = tiny_timing_task(steps=9, log_every=3)                 # marks at steps 3 and 6 of 9
    data = SyntheticTokens(task.objective, task.large.vocab, task.recipe.seq_len)
    prof, steps = profiled_window(run, task, data, torch.device("cpu"), compile=False)
    names = [e.name for e in prof.events()]
    assert steps == 3
    assert sum(n.startswith(OPTIMIZER_STEP) for n in names) == 3     # not 9: no step outside the window
    # no evaluation inside: the trainer evaluates under no_grad after its last step, and every profiled
    # forward is followed by a backward
    forwards = sum(n == "aten::embedding" for n in names)
    backwards = sum(n == "aten::embedding_backward" for n in names)
    assert forwards == backwards > 0
    out = breakdown(prof, steps, "cpu")
    assert out["busy_ms_per_step"] > 0 and out["span_ms_per_step"] >= out["busy_ms_per_step"]


def test_a_run_with_one_mark_is_refused():
    task = tiny_timing_task(steps=4, log_every=2)                 # one mark only (step 2)
    data = SyntheticTokens(task.objective, task.large.vocab, task.recipe.seq_len)
    with pytest.raises(RuntimeError, match="a profile window needs two"):
        profiled_window(raw_run, task, data, torch.device("cpu"), compile=False)


def test_the_profile_names_whose_copies_the_casts_class_holds():
    """A kernel's name (direct_copy_kernel_cuda) does not say what was copied: under bf16 autocast, the copy operators
    with their input shapes name the large model's weights being cast, and the top kernels come most first."""
    torch.set_num_threads(1)
    task = tiny_timing_task(steps=6, log_every=2, bf16=True)
    data = SyntheticTokens(task.objective, task.large.vocab, task.recipe.seq_len)
    prof, steps = profiled_window(raw_run, task, data, torch.device("cpu"), compile=False, record_shapes=True)
    sources = copy_sources(prof, steps, "cpu", top=50)
    ffn_weight = f"[{task.large.ffn}, {task.large.hidden}]"
    assert any(k.startswith("aten::copy_") and ffn_weight in k for k in sources), sources
    assert list(sources.values()) == sorted(sources.values(), reverse=True)
    top = breakdown(prof, steps, "cpu", top=3)["top_kernels_ms_per_step"]
    assert len(top) == 3 and list(top.values()) == sorted(top.values(), reverse=True)


def test_throughput_compile_flag_reaches_both_loops_and_the_record(tmp_path, monkeypatch):
    """`bench/perf/throughput.py --compile` (the device script's mini-step-compiled part) must time compiled loops, both
    of them, warm-up included, and say so in its result; without the flag both stay eager."""
    import json

    import bench.perf.throughput as throughput
    for flag in (False, True):
        seen = []

        def fake(name):
            def run(task, data, device, compile=False, at_mark=None):
                seen.append((name, compile))
                r = task.recipe
                return [float(s) for s in range(r.log_every, r.steps - r.log_every + 1, r.log_every)]
            return run
        monkeypatch.setattr(throughput, "trainer_run", fake("trainer"))
        monkeypatch.setattr(throughput, "raw_run", fake("raw"))
        out = tmp_path / f"t{flag}.json"
        throughput.main(["--scale", "tiny", "--steps", "30", "--log-every", "10", "--repeats", "1", "--out", str(out)]
                        + (["--compile"] if flag else []))
        assert sorted(seen) == [("raw", flag)] * 2 + [("trainer", flag)] * 2
        assert json.loads(out.read_text())["compile"] is flag


def test_the_profile_takes_a_scale_and_that_scales_batch(tmp_path):
    """`--scale regime` profiles the README job's grown BERT (4L/144, its recipe's 64 x 64), not the paper's BERT-Base
    at a paper batch; the result says which model, scale, batch, device and threads it measured."""
    import json

    from bench.perf.gpu_mfu import MODELS, timed_task
    from bench.perf.step_profile import main
    regime = get_task("bert_small_base", scale="regime")
    task, batch = timed_task("bert_base", None, 9, 3, bf16=False, scale="regime")
    assert task.large == regime.large and batch == regime.recipe.batch_size != MODELS["bert_base"][1]
    paper_task, paper_batch = timed_task("bert_base", None, 9, 3, bf16=False)
    assert paper_task.large == get_task("bert_small_base", scale="paper").large
    assert paper_batch == MODELS["bert_base"][1]
    torch.set_num_threads(1)
    out = tmp_path / "profile.json"
    main(["--device", "cpu", "--scale", "tiny", "--models", "bert_base", "--steps", "2", "--batch", "2", "--no-bf16",
          "--out", str(out)])
    result = json.loads(out.read_text())
    row, = result["rows"]
    tiny = get_task("bert_small_base", scale="tiny").large.short()
    assert (row["scale"], row["batch"], row["spec"]) == ("tiny", 2, tiny)
    assert result["threads"] == 1 and result["pending"] == [] and row["raw"]["top_kernels_ms_per_step"]


def test_cpu_operators_fall_in_the_classes_gpu_kernels_do():
    """On the CPU the profile's events are operators, not kernels: a linear layer's forward and its backward's matrix
    products are GEMM there as cuBLAS's kernels are on a GPU; dropout is not."""
    from bench.perf.step_profile import kernel_class
    for name in ("aten::linear", "autograd::engine::evaluate_function: AddmmBackward0",
                 "autograd::engine::evaluate_function: MmBackward0", "aten::bmm", "aten::mm",
                 "ampere_sgemm_128x64_nn", "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_TNN"):
        assert kernel_class(name) == "gemm", name
    assert kernel_class("aten::scaled_dot_product_attention") == "attention"
    assert kernel_class("Optimizer.step#AdamW.step") == "optimizer"
    for name in ("aten::dropout", "autograd::engine::evaluate_function: NativeDropoutBackward0", "aten::gelu",
                 "aten::embedding"):
        assert kernel_class(name) == "other_elementwise", name
