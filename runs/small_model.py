"""The small model a run grows from: given (--small, an exported model of the task's family, checked), or from the
cache under OUT_ROOT/cache/small, keyed by everything its weights depend on, pretrained there first when absent
(by one process, others waiting on its lock), or copied from another pair's cache entry that holds the same
pretraining bit for bit or from the repository's shipped copy of it (runs/shipped.py). What a run's config.json
records about it (`small_identity`) and the refusals that keep a cached model from being read against another
vocabulary are here too.
"""
from __future__ import annotations

import hashlib
import json
from contextlib import nullcontext
from pathlib import Path

from methods import get_method
from models import get_family
from models.family import exported_family
from runs import distributed, out_dirs
from runs.lock import RunLock
from runs.atomic import read_json
from runs.record import CONFIG, EVAL_FILE, SAME_RESULT, SUMMARY, clear_run, copy_record, jsonable
from tasks.data.text import TRAINED_TOKENIZERS


# the small models the repository ships, one folder per cache entry (runs/shipped.py makes them)
SHIPPED_ROOT = Path(__file__).resolve().parent.parent / "pretrained" / "small"


def shipped_entry(cache: Path) -> Path | None:
    """The shipped copy of the small-model cache entry `cache` (the same name under pretrained/small), or None."""
    entry = SHIPPED_ROOT / Path(cache).name
    return entry if (entry / SUMMARY).is_file() and (entry / "model").is_dir() else None


def _files_signature(path: Path) -> str:
    """A hash of the names, sizes and mtimes of a file or of the files directly in a directory: changes when
    the model or tokenizer there is replaced, without reading gigabytes of weights."""
    p = Path(path).expanduser()
    files = sorted(f for f in p.iterdir() if f.is_file()) if p.is_dir() else [p]
    sig = "|".join(f"{f.name}:{f.stat().st_size}:{f.stat().st_mtime_ns}" for f in files)
    return hashlib.sha1(sig.encode()).hexdigest()[:10]


def small_cache_key(task, seed: int) -> str:
    """`<scale>-s<seed>-<digest>`: the digest hashes everything the small model's weights depend on."""
    identity = {"spec": task.small.to_dict(), "recipe": jsonable(task.small_recipe.__dict__),
                "data": task.data, "tokenizer": task.tokenizer, "seed": seed}
    if task.data_path is not None:      # a local corpus: a small model pretrained on other text must not be reused
        identity["data_path"] = task.data_key()
    if task.tokenizer not in (None, *TRAINED_TOKENIZERS) and Path(task.tokenizer).expanduser().is_dir():
        identity["tokenizer_files"] = _files_signature(task.tokenizer)   # a saved tokenizer: its files, not its name
    digest = hashlib.sha1(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:10]
    return f"{task.scale}-s{seed}-{digest}"


def small_cache_dir(task, seed: int) -> Path:
    """The cache entry of the small model a task grows from, named by the task (its pretraining record carries
    the task the analysis files it under) and keyed by everything its weights depend on."""
    return out_dirs.OUT_ROOT / "cache" / "small" / f"{task.name}-{small_cache_key(task, seed)}"


def pretrained_for_another_task(task, seed: int) -> Path | None:
    """Another pair's cache entry holding the small model this task's would hold (bert_small_base and
    bert_small_large grow from one BERT-Small): the same key, and a record that is this pretraining bit for bit
    (runs.computation.computed_elsewhere). Its weights are then copied instead of trained again."""
    from runs.computation import computed_elsewhere
    cache = small_cache_dir(task, seed)
    key = cache.name.removeprefix(f"{task.name}-")
    others = [d for d in sorted(cache.parent.glob(f"*-{key}")) if d != cache and (d / "model").is_dir()]
    return computed_elsewhere(task.small_task(), get_method("scratch"), None, seed, others) if others else None


def small_identity(task, seed: int, small_dir: Path | None) -> dict:
    """Which small model a run grows from, as its config.json records it: a given directory (resolved, with a
    signature of its files) or the cache entry (whose name hashes what it was pretrained on)."""
    if small_dir is None:
        return {"source": "cache", "path": str(small_cache_dir(task, seed))}
    p = Path(small_dir).expanduser()
    return {"source": "given", "path": str(small_dir), "resolved": str(p.resolve()), "files": _files_signature(p)}


def describe_small(info: dict) -> str:
    """The start line's account of the small model a run grows from (its config.json's `small`)."""
    if info.get("source") == "given":
        return f"--small {info['path']}"
    return f"cache entry {info['path']}"


def check_small_dir(task, small_dir: Path) -> None:
    """--small must be an exported model of the task's family (checked before anything is written)."""
    small_dir = Path(small_dir)
    if not small_dir.is_dir():
        raise FileNotFoundError(f"--small {small_dir}: no such directory (give an HF/timm model directory)")
    found = exported_family(small_dir)
    if found != task.family:
        held = f"a {found}" if found else "an unrecognised"
        raise ValueError(f"--small {small_dir} holds {held} model, but task {task.name} "
                         f"grows a {task.family} model (give a {task.family} save_pretrained/export directory)")


def copy_into_cache(cache: Path, source: Path, config: dict, line: str, log, skip: tuple[str, ...] = ()) -> bool:
    """Give the cache entry `cache` the small model's record and weights from `source` (the same computation), with
    `config` as its config.json, under the entry's lock, unless another process completed it meanwhile; a
    pretraining of its own cut short is replaced. True where this call copied it."""
    with RunLock(cache, wait=True, on_wait=lambda who: log(f"waiting for {who}: it holds {cache}")):
        if (cache / SUMMARY).exists():
            return False
        log(f"no --small given: the small model is {line}: copied -> {cache}")
        clear_run(cache)
        copy_record(source, cache, config, dirs=("model",), skip=skip)
    return True


def copy_pretrained_for_another_task(task, seed: int, cache: Path, log) -> bool:
    """Give `cache` another pair's pretraining of the same small model (weights and record, under this task's name,
    marked as the same computation), if there is one. True where this call copied it."""
    twin = pretrained_for_another_task(task, seed)
    if twin is None:
        return False
    config = {**read_json(twin / CONFIG), "task": jsonable(task.small_task().to_dict()),
              "same_computation_as": f"{twin.parent.name}/{twin.name}"}
    # not its eval.json: that record names the task it was evaluated for; these weights are evaluated anew
    return copy_into_cache(cache, twin, config, f"the one pretrained in {twin} (same weights, data, recipe and seed)",
                           log, skip=(EVAL_FILE,))


def copy_shipped(task, cache: Path, log) -> bool:
    """Give `cache` the repository's shipped copy of this small model (runs/shipped.py), if it ships one and this
    machine's tokenizer builds the vocabulary it was trained with (otherwise the caller pretrains it, saying why).
    True where this call copied it."""
    entry = shipped_entry(cache)
    if entry is None:
        return False
    if not same_vocabulary(task, entry / "model"):
        log(f"not using the shipped small model {entry}: this machine's {task.tokenizer or 'default'} tokenizer "
            "numbers the vocabulary otherwise than the one it was trained with")
        return False
    config = read_json(entry / CONFIG)      # its `shipped_as` says whence
    return copy_into_cache(cache, entry, config, f"the one the repository ships in {entry} (the computation of "
                                                 f"{config.get('shipped_as')})", log)


def resolve_small(task, seed: int, small_dir: Path | None, device, log, progress: bool, pretrain):
    """The pretrained small model: from --small, from the cache, or trained now (and cached) by
    `pretrain(task, seed, cache, device, log, progress)`, called by one process under the cache entry's lock:
    runs/experiment.py's `pretrain_small`, a run of `scratch`. Given, not imported: pretraining the small model is
    itself a run, and a run calls this."""
    family = get_family(task.family)
    if small_dir is not None:
        small_dir = Path(small_dir)
        check_small_dir(task, small_dir)
        try:
            model = family.load(small_dir)
        except Exception as e:
            raise ValueError(f"--small {small_dir}: cannot load a {task.family} model from it "
                             f"({type(e).__name__}); expected an HF save_pretrained / timm export directory") from None
        spec = family.spec_of(model) if family.owns(model) else None
        if spec != task.small:
            raise ValueError(f"--small {small_dir} holds {spec.short() if spec else 'another model'}, but task "
                             f"{task.name} needs {task.small.short()}")
        return model, {**small_identity(task, seed, small_dir), "pretrain_flops": None}
    cache = small_cache_dir(task, seed)
    # how this run came by it, for its record (the source is "cache" in every case): a run that pretrained the small
    # model counts that pretraining's wall time in its own, one that found it there does not
    obtained = "found in the cache"
    with distributed.main_first():     # under torchrun every rank then sees the copy, or none
        if distributed.is_main() and not (cache / SUMMARY).exists():
            if copy_pretrained_for_another_task(task, seed, cache, log):
                obtained = "copied from another pair's pretraining"
            elif copy_shipped(task, cache, log):
                obtained = "shipped with the repository"
    if not (cache / SUMMARY).exists():
        # one process pretrains, any other run needing the same small model waits for it and then reads it
        lock = RunLock(cache, wait=True, on_wait=lambda who: log(f"waiting for {who}: it is pretraining the "
                                                                   f"small model in {cache}"))
        with (lock if distributed.is_main() else nullcontext()):
            if not (cache / SUMMARY).exists():
                log(f"no --small given: pretraining the small model first ({task.small.layers} layers, "
                    f"hidden {task.small.hidden}, {task.small_recipe.steps} steps) -> {cache}")
                pretrain(task, seed, cache, device, log, progress)
                obtained = "pretrained by this run"
    summary = read_json(cache / SUMMARY)
    check_cached_tokenizer(task, cache)
    model = family.load(cache / "model")
    # how the pretraining ended (step, FLOPs, units, final eval): a cache entry pretrained again, on another CPU,
    # can end a rounding away from the record the seed's other runs grew from, and only this tells the two apart
    ended = {k: summary[k] for k in SAME_RESULT if k in summary}
    return model, {"path": str(cache), "pretrain_flops": summary["flops"], "pretrain_wall": summary["wall"],
                   "pretrain_result": ended, "source": "cache", "obtained": obtained}


def check_cached_tokenizer(task, cache: Path) -> None:
    """Refuse a cached small model whose vocabulary is not the tokenizer's this run reads the data with: the cache is
    keyed by the tokenizer's name, and a trained tokenizer whose cache file was retrained since (a deleted cache, a
    user corpus) may number its tokens otherwise; the small model's embeddings would then be read against the wrong
    ids, silently. The export beside the weights holds the tokenizer it was trained with."""
    if not same_vocabulary(task, cache / "model"):
        raise ValueError(f"the cached small model {cache} was pretrained with another {task.tokenizer or 'default'} "
                         "vocabulary than the tokenizer this run reads the data with (the tokenizer cache was trained "
                         "again since): move the cache entry away to pretrain it again, or pass --small")


def same_vocabulary(task, model_dir: Path) -> bool:
    """Whether the tokenizer saved beside an exported small model numbers the vocabulary as the one this run reads
    the task's data with (True for image models and exports without a tokenizer)."""
    saved = Path(model_dir) / "tokenizer.json"
    if get_family(task.family).objective == "image" or not saved.exists():
        return True
    from transformers import PreTrainedTokenizerFast
    return PreTrainedTokenizerFast(tokenizer_file=str(saved)).get_vocab() == task.pretrain_data().tokenizer.get_vocab()
