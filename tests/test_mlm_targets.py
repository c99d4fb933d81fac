"""bench/experiments/mlm_targets.py: the split of a masked LM's eval loss between PTB's rare-word placeholder and the rest must
add up to the loss the family computes and to the unigram reference the regime check uses."""
import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from bench.experiments.mlm_targets import main, placeholder_pieces, split_losses  # noqa: E402
from models import build_model, get_family  # noqa: E402
from tasks import get_task  # noqa: E402


@pytest.mark.parametrize("task_name,has_pieces", [("bert_small_base", True), ("roberta_small_base", False)])
def test_split_adds_up_to_the_family_loss_and_the_unigram_reference(task_name, has_pieces):
    task = get_task(task_name, "tiny")
    family, data = get_family(task.family), task.pretrain_data()
    batches = data.eval_batches(task.recipe.batch_size, 4)
    torch.manual_seed(0)
    model = build_model(task.small)
    with torch.no_grad():   # a model that is not uniform over the vocabulary: the two parts' losses differ
        model.get_output_embeddings().bias.normal_(0, 2.0)
    # WordPiece splits "<unk>" into ordinary pieces; the byte-level BPE maps it to its <unk> special, never masked
    assert bool(placeholder_pieces(data.tokenizer)) == has_pieces
    out = split_losses(model, family, data, batches)
    n = [int(family.scored(b).sum()) for b in batches]
    with torch.no_grad():
        family_mean = sum(family.loss(model, b).item() * k for b, k in zip(batches, n)) / sum(n)
    assert out["all"]["targets"] == sum(n) == out["placeholder"]["targets"] + out["other"]["targets"]
    assert out["all"]["model"] == pytest.approx(family_mean, abs=1e-5)
    assert out["all"]["unigram"] == pytest.approx(data.unigram_cross_entropy(batches), abs=1e-6)
    share = out["placeholder_share"]
    assert (share > 0) == has_pieces and share == pytest.approx(out["placeholder"]["targets"] / sum(n))
    if has_pieces:
        for key in ("model", "unigram"):
            parts = share * out["placeholder"][key] + (1 - share) * out["other"][key]
            assert parts == pytest.approx(out["all"][key], abs=1e-5)
        assert out["placeholder"]["model"] != pytest.approx(out["other"]["model"], abs=1e-3)


def test_refuses_a_task_that_is_not_a_masked_lm(capsys, tmp_path):
    with pytest.raises(SystemExit) as e:
        main(["--tasks", "gpt2_base_medium", "--scale", "tiny", "--out", str(tmp_path / "r.json")])
    assert e.value.code == 2 and "gpt2_base_medium is not a masked-LM task" in capsys.readouterr().err
    assert not (tmp_path / "r.json").exists()


def test_refuses_every_task_when_one_has_no_cached_small_model_and_leaves_the_result_file(capsys, tmp_path):
    out = tmp_path / "r.json"
    out.write_text("committed result")
    with pytest.raises(SystemExit) as e:    # no growth run has cached a small model at this seed
        main(["--tasks", "bert_small_base", "roberta_small_base", "--scale", "tiny", "--seed", "987654",
              "--out", str(out)])
    err = capsys.readouterr().err
    assert e.value.code == 2 and len(err.strip().splitlines()) == 1
    assert "no cached small model for seed 987654 of bert_small_base, roberta_small_base" in err
    assert out.read_text() == "committed result"
