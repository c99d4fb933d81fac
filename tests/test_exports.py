"""Every family's export loads with its own ecosystem alone (README "Loading an export"): text models with
transformers' from_pretrained, image models with `timm.create_model("local-dir:DIR", pretrained=True)`, to the
same outputs; and growbench reads back what it wrote. On models that have learned (tests/helpers.train_small): a
bias or norm the export left out or misnamed comes back at its init value, which fresh weights already hold."""
import json

import pytest
import torch

from models import get_family
from tasks import get_task

TASKS = {"bert": "bert_small_base", "roberta": "roberta_small_base", "gpt2": "gpt2_base_medium",
         "llama": "llama_small_base", "vit": "deit_s_b", "cait": "cait_xs_s"}
# each family's large tiny model as its task registers it, and the text ones with the other head tying too
CASES = [(family, None) for family in sorted(TASKS)] + [
    (family, not get_task(TASKS[family], "tiny").large.tie_embeddings)
    for family in sorted(TASKS) if get_family(family).objective != "image"]


def outputs(model, x):
    with torch.no_grad():
        return model(x) if x.is_floating_point() else model(input_ids=x).logits


@pytest.mark.parametrize("family,tied", CASES)
def test_export_loads_without_growbench(family, tied, tmp_path, trained):
    spec = get_task(TASKS[family], "tiny").large
    if tied is not None:
        spec = spec.with_(tie_embeddings=tied)
    fam = get_family(family)
    model = trained(spec).eval()
    fam.export(model, tmp_path)
    if fam.objective == "image":
        import timm
        other = timm.create_model(f"local-dir:{tmp_path}", pretrained=True)
        x = torch.randn(2, spec.in_chans, spec.image_size, spec.image_size)
    else:
        import transformers
        architecture = json.loads((tmp_path / "config.json").read_text())["architectures"][0]
        other = getattr(transformers, architecture).from_pretrained(tmp_path)
        x = torch.randint(4, spec.vocab, (2, 8))
    assert torch.equal(outputs(model, x), outputs(other.eval(), x))
    assert fam.spec_of(fam.load(tmp_path)) == spec


@pytest.mark.parametrize("family", ["vit", "cait"])
def test_timm_transform_from_the_export_feeds_what_training_fed(family, tmp_path, trained):
    """timm's own preprocessing, built from the export's pretrained_cfg alone, turns the task's stored images into
    the tensor the training pipeline makes (its gray channel and its data set's mean and std, not ImageNet's), and
    the timm-loaded model scores them as the trained one does; the architecture is named as growbench's weights on
    a timm constructor, not as the paper model the constructor is named after."""
    import numpy as np
    import timm
    from PIL import Image
    task = get_task(TASKS[family], "tiny")
    data = task.pretrain_data()
    fam = get_family(family)
    model = trained(task.large).eval()
    fam.export(model, tmp_path, preprocessing=data.preprocessing())
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["architecture"].endswith(".growbench") and timm.is_model(config["architecture"])
    other = timm.create_model(f"local-dir:{tmp_path}", pretrained=True).eval()
    assert other.pretrained_cfg["label_names"] == [str(i) for i in range(10)]
    transform = timm.data.create_transform(**timm.data.resolve_data_config({}, model=other))
    images = data.images["valid"][:8]
    x = torch.stack([transform(Image.fromarray(image.numpy())) for image in images])
    batch = data.make_batch("valid", np.arange(8), 0)
    assert torch.allclose(x, batch["pixel_values"], atol=1e-5)
    assert torch.allclose(outputs(other, x), outputs(model, batch["pixel_values"]), atol=1e-4)
    with pytest.raises(ValueError, match="3 channel mean values for a model of 1 input channels"):
        fam.export(model, tmp_path / "rgb", preprocessing={**data.preprocessing(), "mean": [0.5] * 3})
    assert not (tmp_path / "rgb").exists()
