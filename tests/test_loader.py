"""tasks/data/loader.py: the DataLoader hands the trainer exactly the batches its inline `train_batch` calls make,
in the trainer's order, from any step on, whatever the number of workers or the workers' own random state."""
import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from helpers import write_image_folder  # noqa: E402
from runs import distributed  # noqa: E402
from tasks import get_task  # noqa: E402
from tasks.data import PretrainData, load_pretrain_data  # noqa: E402
from tasks.data import loader as loader_mod  # noqa: E402
from tasks.data.loader import default_workers, train_loader  # noqa: E402


@pytest.fixture(scope="module")
def mlm():
    return get_task("bert_small_base", "tiny").pretrain_data()      # the suite's cached tiny PTB corpus


@pytest.fixture(scope="module")
def image_folder(tmp_path_factory):
    """An ImageFolder (train/ and val/, two classes) of small random JPEGs, read as ImageNet."""
    root = write_image_folder(tmp_path_factory.mktemp("imagenet"), ("cat", "dog"), {"train": 4, "val": 4}, (30, 40),
                              ".jpg")
    return load_pretrain_data("imagenet", "image", path=str(root), image_size=16)


def assert_inline(pairs, data, batch_size, seed, indices):
    """The loader's pairs are (i, data.train_batch(i)) for `indices`, in order, equal key by key."""
    assert [i for i, _ in pairs] == list(indices)
    for i, batch in pairs:
        inline = data.train_batch(i, batch_size, seed)
        assert batch.keys() == inline.keys()
        for key in inline:
            assert torch.equal(batch[key], inline[key]), (i, key)


@pytest.mark.parametrize("workers", [0, 2])
def test_text_mlm_resumed_mid_run_equals_inline(mlm, workers):
    state = torch.get_rng_state()
    pairs = list(train_loader(mlm, 4, seed=7, start_step=3, total_steps=6, grad_accum=2, workers=workers))
    assert_inline(pairs, mlm, 4, 7, range(6, 12))          # steps 3..5, two micro-batches each
    assert "labels" in pairs[0][1] and (pairs[0][1]["labels"] != -100).any()     # masked: a real MLM batch
    assert torch.equal(state, torch.get_rng_state())      # the run's RNG stream is not drawn from


def test_images_with_workers_equal_inline(image_folder):
    pairs = list(train_loader(image_folder, 3, seed=1, start_step=2, total_steps=5, workers=2))
    assert_inline(pairs, image_folder, 3, 1, range(2, 5))
    assert pairs[0][1]["pixel_values"].shape == (3, 3, 16, 16)


def test_order_is_the_trainers_under_several_ranks(monkeypatch):
    """Rank 1 of 2 with accumulation 3: the trainer's `micro_index` for each (step, micro) of its loop."""
    monkeypatch.setattr(distributed, "world_size", lambda: 2)
    monkeypatch.setattr(distributed, "rank", lambda: 1)
    data = load_pretrain_data("digits", "image")
    loader = train_loader(data, 5, seed=0, start_step=4, total_steps=7, grad_accum=3, index_fn=distributed.micro_index)
    trainer = [distributed.micro_index(step, micro, 3) for step in range(4, 7) for micro in range(3)]
    assert trainer == [27, 28, 29, 33, 34, 35, 39, 40, 41] and len(loader) == len(trainer)
    assert_inline(list(loader), data, 5, 0, trainer)


class GlobalRandomData(PretrainData):
    """A batch that (wrongly) draws from the global RNG: what the worker seeds would change."""
    kind, objective, n_train = "image", "image", 100

    def train_batch(self, step, batch_size, seed):
        return {"noise": torch.rand(batch_size)}


def test_worker_randomness_does_not_reach_batches():
    data = load_pretrain_data("digits", "image")
    runs = [list(train_loader(data, 6, seed=2, start_step=0, total_steps=4, workers=2, worker_seed=ws))
            for ws in (0, 12345)]
    for pairs in runs:
        assert_inline(pairs, data, 6, 2, range(4))
    # the control: the worker seed does reach the workers' global RNG, so the equality above could have failed
    leaky = [[b["noise"] for _, b in train_loader(GlobalRandomData(), 3, 0, start_step=0, total_steps=2, workers=2,
                                                  worker_seed=ws)] for ws in (0, 12345)]
    assert not torch.equal(leaky[0][0], leaky[1][0])


def test_zero_workers_calls_train_batch_inline_when_asked(monkeypatch):
    data = load_pretrain_data("digits", "image")
    calls = []
    monkeypatch.setattr(data, "train_batch", lambda i, b, s: calls.append(i) or {"i": torch.tensor(i)})
    it = iter(train_loader(data, 2, seed=0, start_step=1, total_steps=4, workers=0))
    assert calls == []                                    # nothing made ahead
    assert next(it)[0] == 1 and calls == [1]
    assert [i for i, _ in it] == [2, 3] and calls == [1, 2, 3]


def test_default_workers(monkeypatch):
    assert default_workers("cpu") == 0
    monkeypatch.setattr(loader_mod.os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    assert default_workers("cuda") == 15                  # one core left to the training process
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    assert default_workers("cuda:0") == 3                 # the node's cores shared among its ranks


@pytest.mark.parametrize("kwargs, message", [
    ({"workers": -1}, "workers must be an integer >= 0"),
    ({"workers": 0, "prefetch_factor": 4}, "prefetch_factor needs workers >= 1"),
    ({"workers": 2, "prefetch_factor": 0}, "prefetch_factor must be an integer >= 1"),
    ({"workers": 0, "persistent_workers": True}, "persistent_workers needs workers >= 1"),
    ({"start_step": 9}, "start_step must be within 0 .. total_steps"),
])
def test_bad_arguments_refused_in_one_line(kwargs, message):
    data = load_pretrain_data("digits", "image")
    args = {"start_step": 0, "total_steps": 5, **kwargs}
    with pytest.raises(ValueError, match=message) as err:
        train_loader(data, 4, 0, **args)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("args, needle", [
    (["--target-mfu", "3"], "--target-mfu is a fraction of the peak"),
    (["--source-sizes", "10x3"], "both sides must be >= 32 pixels"),
    (["--text-batches", "1"], "must be >= 2"),
    (["--gpu", "Quadro K600"], "no dense bf16 peak known"),
])
def test_pipeline_benchmark_refuses_bad_input_in_one_line(args, needle, tmp_path, capsys):
    from bench.perf.pipeline import main
    out = tmp_path / "pipeline.json"
    with pytest.raises(SystemExit) as exit_:
        main([*args, "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert exit_.value.code == 2 and needle in err and "\n" not in err and not out.exists()


def test_a_run_trains_the_same_numbers_with_workers(tmp_path):
    """run.py --workers 2 (batches made by two forked DataLoader processes) trains exactly what the inline default
    trains: every metrics number equal, wall time aside."""
    import run
    from runs.record import load_run
    args = ["--method", "net2net", "--task", "bert_small_base", "--scale", "tiny", "--quiet", "--steps", "4",
            "--set", "log_every=1"]
    assert run.main([*args, "--out", str(tmp_path / "inline")]) == 0
    assert run.main([*args, "--out", str(tmp_path / "workers"), "--workers", "2"]) == 0
    strip = lambda rows: [{k: v for k, v in r.items() if k != "wall"} for r in rows]  # noqa: E731
    inline, workers = load_run(tmp_path / "inline").metrics, load_run(tmp_path / "workers").metrics
    assert len(inline) == 5 and strip(inline) == strip(workers)       # step 0 and steps 1-4


def test_run_py_refuses_negative_workers(tmp_path, capsys):
    import run
    out = tmp_path / "run"
    assert run.main(["--method", "scratch", "--task", "bert_small_base", "--scale", "tiny", "--quiet",
                     "--out", str(out), "--workers", "-1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "workers must be an integer >= 0" in err and not out.exists()


def test_pipeline_benchmark_times_whole_rounds_for_many_workers():
    """Asked for 2 batches with 2 workers, the benchmark makes 8 a worker and times from the end of the first round:
    its first device run timed 10 batches with 12 workers, nothing after the first round, and reported a rate 2.3x
    what 12 cores can make, with NaN per CPU second."""
    import math
    from bench.perf.pipeline import ROUNDS_PER_WORKER, loader_rate
    data = load_pretrain_data("digits", "image")
    row = loader_rate(data, 4, batches=2, workers=2)
    assert row["batches"] == ROUNDS_PER_WORKER * 2
    assert all(math.isfinite(row[k]) and row[k] > 0 for k in ("samples_per_s", "samples_per_cpu_s"))


def test_the_host_against_sent_comparison_alternates_which_goes_first_over_whole_batches():
    """The paired CPU cost of a batch made on the host against as a GPU loader sends it: each round makes one batch of
    each, of the same images, in alternating order (the one timed second gets warm caches), every batch even-sized
    (Mixup/CutMix mixes pairs), and the ratio is the host's time over the sent one's."""
    import time

    from bench.perf.image_stages import SENT_BATCH, SENT_ROUNDS, host_against_sent
    calls = []

    class Fake:
        def __init__(self, name, ms):
            self.name, self.ms = name, ms

        def make_batch(self, split, idx, seed):
            calls.append((self.name, split, tuple(idx)))
            end = time.process_time() + self.ms * len(idx) / 1e3
            while time.process_time() < end:
                pass
    out = host_against_sent(Fake("host", 0.4), Fake("sent", 0.2), n=20)
    assert len(calls) == 2 * SENT_ROUNDS and SENT_BATCH % 2 == 0
    firsts = [calls[2 * r][0] for r in range(SENT_ROUNDS)]
    assert firsts == ["host", "sent"] * (SENT_ROUNDS // 2)
    assert all(a[2] == b[2] and len(a[2]) == SENT_BATCH and a[1] == "train" for a, b in zip(calls[::2], calls[1::2]))
    assert 1.5 < out["ratio_median"] < 2.5 and out["ratio_min"] <= out["ratio_median"] <= out["ratio_max"]
