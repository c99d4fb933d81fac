"""The MLM head decodes only the masked positions in the pretraining loss (models/bert.py): the loss is the dense
head's, the FLOPs are counted for the positions decoded, and every other forward still decodes every position."""
import pytest
import torch
import torch.nn.functional as F
from helpers import learnable_batches
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from models import ModelSpec, get_family
from models.flops import backward_flops

SPECS = {f: ModelSpec(f, 2, 32, 2, vocab=64, positions=16) for f in ("bert", "roberta")}


@pytest.mark.parametrize("family", sorted(SPECS))
def test_sparse_loss_is_the_dense_loss(family, trained):
    spec, fam = SPECS[family], get_family(family)
    model = trained(spec).eval()
    batch = next(learnable_batches(spec, batch=8, seed=3))
    with torch.no_grad():
        dense = fam.logits(model, batch)                       # every position
        want = F.cross_entropy(dense.reshape(-1, spec.vocab), batch["labels"].reshape(-1), ignore_index=-100)
        got = fam.loss(model, batch)
        scored = fam.head_logits(model, batch)
    assert dense.shape[:2] == batch["input_ids"].shape
    mask = batch["labels"] != -100
    assert scored.shape == (int(mask.sum()), spec.vocab)
    torch.testing.assert_close(scored, dense[mask], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("family", sorted(SPECS))
def test_flops_count_the_positions_decoded(family):
    spec, fam = SPECS[family], get_family(family)
    model = fam.build(spec).train()
    batch = next(learnable_batches(spec, batch=8, seed=3))
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        fam.loss(model, batch).backward()
    fwd = fam.batch_flops(spec, batch)
    assert fam.head_tokens(batch) == int((batch["labels"] != -100).sum()) < batch["input_ids"].numel()
    assert fwd.total + backward_flops(fwd) == counter.get_total_flops()
    dense = fam.forward_flops(spec, *batch["input_ids"].shape)
    assert dense.head > fwd.head           # what the dense head would have cost


def test_a_loaded_export_decodes_sparsely_in_training_and_fully_elsewhere(tmp_path, trained):
    spec, fam = SPECS["bert"], get_family("bert")
    fam.export(trained(spec), tmp_path / "m")
    loaded = fam.load(tmp_path / "m").eval()
    batch = next(learnable_batches(spec, batch=4, seed=1))
    assert fam.head_logits(loaded, batch).shape[0] == int((batch["labels"] != -100).sum())
    assert fam.logits(loaded, batch).shape == (*batch["input_ids"].shape, spec.vocab)
