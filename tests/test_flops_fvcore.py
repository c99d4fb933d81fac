"""An independent FLOPs cross-check with fvcore (issue 44: the design names it): fvcore's FlopCountAnalysis traces
the model and counts each matmul's multiply-adds; twice its matmul count must equal the analytic forward_flops the
ledger charges. Attention runs eagerly here: fvcore does not see inside SDPA (DESIGN.md §6), the other cross-check,
torch's FlopCounterMode under the MATH backend, covers it (tests/test_family_*.py)."""
import pytest
import torch
from fvcore.nn import FlopCountAnalysis

from models import get_family
from tasks import get_task

MATMULS = ("linear", "matmul", "bmm", "addmm", "einsum")    # fvcore's operator names for multiply-add work


class Logits(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model(input_ids=input_ids).logits


@pytest.mark.parametrize("family,task", [("bert", "bert_small_base"), ("gpt2", "gpt2_base_medium"),
                                         ("llama", "llama_small_base")])
def test_fvcore_counts_the_analytic_forward_flops(family, task):
    spec, fam = get_task(task, scale="tiny").large, get_family(family)
    torch.manual_seed(0)
    model = fam.build(spec).eval()
    model.set_attn_implementation("eager")
    ids = torch.randint(5, spec.vocab, (2, 16))
    analysis = FlopCountAnalysis(Logits(model), (ids,))
    analysis.unsupported_ops_warnings(False)
    analysis.uncalled_modules_warnings(False)
    counted = sum(v for op, v in analysis.by_operator().items() if op in MATMULS)
    # every position decoded (no labels: BERT's head runs on all 2 x 16 tokens here)
    assert 2 * counted == fam.forward_flops(spec, 2, 16, head_tokens=2 * 16).total > 0
