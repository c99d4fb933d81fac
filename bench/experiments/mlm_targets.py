"""How much of a masked LM's gain over the unigram loss is the corpus' rare-word placeholder? PTB writes every rare
word as the string "<unk>". The WordPiece tokenizer trained on it (BERT mini) splits that string into ordinary
pieces ("<", "unk", ">"): masked, they are targets a model learns to predict almost for free from their
neighbours. The byte-level BPE tokenizer (RoBERTa mini) matches the string to its own <unk> special token, which is
never masked, so none of its targets are. The learning regime's check (a small model at least 1 nat below the
unigram cross-entropy, runs/experiment.reference) scores all targets alike; this splits the cached small model's
eval loss and the unigram cross-entropy between the placeholder's pieces and the other targets.

    HF_HUB_OFFLINE=1 python bench/experiments/mlm_targets.py [--tasks bert_small_base roberta_small_base] [--seed 0]

A small model is taken from the cache (runs/out/cache/small, written by any growth run or sweep); a task without
one is refused before anything is measured or written. Writes bench/results/mlm_targets.json.
"""
from __future__ import annotations

import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from bench.cli import check_result_file, refused_as_one_line  # noqa: E402
from bench.result_file import RESULTS, write_result  # noqa: E402
from runs.cli import OneLineArgumentParser  # noqa: E402
from models import get_family  # noqa: E402
from runs.experiment import pretrain_small  # noqa: E402
from runs.small_model import resolve_small, small_cache_dir  # noqa: E402
from runs.record import SUMMARY  # noqa: E402
from tasks import get_task  # noqa: E402

PLACEHOLDER = "<unk>"   # how PTB writes a rare word


def placeholder_pieces(tokenizer) -> list[int]:
    """The ids the tokenizer makes of the placeholder that can be MLM targets (specials are never masked)."""
    ids = tokenizer(PLACEHOLDER, add_special_tokens=False)["input_ids"]
    return sorted(set(ids) - set(tokenizer.all_special_ids))


def split_losses(model, family, data, batches) -> dict:
    """Per-target model and unigram cross-entropy (nats) over `batches`, overall and split by placeholder pieces."""
    pieces = torch.tensor(placeholder_pieces(data.tokenizer), dtype=torch.long)
    logp = data.unigram_log_probs()
    model_ce, unigram_ce, is_piece = [], [], []
    model.eval()
    with torch.no_grad():
        for batch in batches:
            labels = batch["labels"]
            targets = labels[family.scored(batch)]
            logits = family.head_logits(model, batch).float()
            model_ce.append(torch.nn.functional.cross_entropy(logits, targets, reduction="none"))
            unigram_ce.append(-logp[targets])
            is_piece.append(torch.isin(targets, pieces))
    model_ce, unigram_ce, is_piece = torch.cat(model_ce), torch.cat(unigram_ce).float(), torch.cat(is_piece)

    def part(mask: torch.Tensor) -> dict:
        n = int(mask.sum())
        return {"targets": n, "model": float(model_ce[mask].mean()) if n else None,
                "unigram": float(unigram_ce[mask].mean()) if n else None,
                "gap": float(unigram_ce[mask].mean() - model_ce[mask].mean()) if n else None}

    return {"placeholder_pieces": data.tokenizer.convert_ids_to_tokens(pieces.tolist()),
            "placeholder_share": float(is_piece.float().mean()), "all": part(torch.ones_like(is_piece)),
            "placeholder": part(is_piece), "other": part(~is_piece)}


def measure(task, seed: int, log) -> dict:
    family, data = get_family(task.family), task.pretrain_data()
    small, info = resolve_small(task, seed, None, torch.device("cpu"), log, False, pretrain_small)
    batches = data.eval_batches(task.recipe.batch_size, task.recipe.eval_batches)
    return {"task": task.name, "scale": task.scale, "seed": seed, "tokenizer": task.tokenizer,
            "small_record": info["path"], **split_losses(small, family, data, batches)}


def table(results: list[dict]) -> str:
    f = lambda x: "--" if x is None else f"{x:.3f}"  # noqa: E731
    lines = ["| task (tokenizer) | placeholder share of targets | gap, all targets | gap, placeholder pieces | "
             "gap, other targets | model loss, other targets |", "|---|---:|---:|---:|---:|---:|"]
    for r in results:
        lines.append(f"| {r['task']} ({r['tokenizer']}) | {100 * r['placeholder_share']:.1f}% | {f(r['all']['gap'])} | "
                     f"{f(r['placeholder']['gap'])} | {f(r['other']['gap'])} | {f(r['other']['model'])} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = OneLineArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", nargs="+", default=["bert_small_base", "roberta_small_base"])
    ap.add_argument("--scale", default="mini")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(RESULTS / "mlm_targets.json"))
    args = ap.parse_args(argv)
    with refused_as_one_line():          # an unknown task or scale, or a task that is not a masked LM
        from runs.preflight import check_seed
        check_seed(args.seed)
        check_result_file(args.out)
        tasks = [get_task(name, args.scale) for name in args.tasks]
        for task in tasks:
            if get_family(task.family).objective != "mlm":
                raise ValueError(f"{task.name} is not a masked-LM task; this splits masked-LM targets (bert_*, roberta_*)")
        # every task or none: a result file written without a task would silently drop its committed row
        missing = [t.name for t in tasks if not (small_cache_dir(t, args.seed) / SUMMARY).exists()]
        if missing:
            raise ValueError(f"no cached small model for seed {args.seed} of {', '.join(missing)}; pretrain it first "
                             f"(any growth run of the task does, e.g. python run.py --method stackbert --task "
                             f"{missing[0]} --scale {args.scale} --seed {args.seed})")
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    results = [measure(task, args.seed, log) for task in tasks]
    text = table(results)
    print(text)
    write_result(args.out, {"results": results, "table": text})
    return 0


if __name__ == "__main__":
    sys.exit(main())
