"""What each sweep runs: the (task, method, label, settings) entries behind every table and figure of the paper and
the runs that explain the comparisons (REPRODUCE's causes), and `plan`, which turns sweep names and seeds into the runs to make. bench/sweeps/cli.py
runs a plan (resuming, pruning, recording twins); this module only says what is in it, and imports nothing heavy
(torch is imported only by the entries that need a task's recipe, when they are planned).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

SMALL_LABEL = "small"       # the small model's pretraining record beside a sweep's runs: small-s<seed>


@dataclass(frozen=True)
class Entry:
    task: str
    method: str
    label: str = ""                     # run directory name before -s<seed>; default: the method's name
    settings: tuple = ()                # ((key, value), ...): method options or recipe fields, as run.py --set
    small_steps_frac: float | None = None   # pretrain the small model for this fraction of its steps (Figure 7)

    @property
    def name(self) -> str:
        return self.label or self.method

    @property
    def small_label(self) -> str:
        """The directory label of the small model's record beside the run (a variant's own when it shortens it)."""
        return SMALL_LABEL if self.small_steps_frac is None else f"{SMALL_LABEL}-{self.name}"


@dataclass(frozen=True)
class Sweep:
    name: str
    covers: str                         # the paper's tables and figures it feeds
    entries: Callable[[str], list[Entry]]   # scale -> entries (some sweeps differ by scale, e.g. fit steps)


def methods(task: str, names) -> list[Entry]:
    return [Entry(task, m) for m in names]


def declared(sweep: str) -> tuple[str, ...]:
    """The methods that declare `sweep` (a main comparison: GrowthMethod.sweeps, methods/registry.py
    MAIN_COMPARISONS), in the tables' row order (table_order, then name): a method joins from its own file."""
    from methods import METHODS     # (imports torch: only when such a sweep is planned)
    return tuple(sorted((n for n, cls in METHODS.items() if sweep in cls.sweeps),
                        key=lambda n: (METHODS[n].table_order is None, METHODS[n].table_order or 0, n)))


def fit_steps_entries(scale: str, starts=("ligo", "ligo_copy")) -> list[Entry]:
    # paper Table 3: 100 (the default), 500, 1000, 10000 fit steps against 400K training steps, i.e. 1x, 5x, 10x
    # and 100x the default. At mini scale the default is 20 steps of a 1,600-step run (about 1.5% of its FLOPs,
    # where the paper's 100 are 0.03%): 10 (half), 100 (5x) and 200 (10x); 100x would
    # cost more than the whole run. The default run is the plain label shared with the main comparison. Each LiGO
    # start has its own table (analysis/tables.py fit_steps_table).
    steps = (500, 1000, 10000) if scale == "paper" else (10, 100, 200)
    return [Entry("bert_small_base", "scratch")] + [
        e for start in starts for e in [Entry("bert_small_base", start)] + [
            Entry("bert_small_base", start, f"{start}-fit{n}", (("fit_steps", n),)) for n in steps]]


# Orthogonal strategies (DESIGN.md §4, paper App. B.3; runs/strategies.py): `True` is the paper's setting
# (layer dropping capped at 0.1, 15% of tokens set aside, the sub-network trained for 50K of 400K steps).
# bert2BERT's own two-stage pretraining keeps its grown upper blocks (staged_grow=keep). Each LiGO start with each.
ORTHOGONAL = [Entry("bert_small_base", "scratch")] + [
    e for start in ("ligo", "ligo_copy") for e in (
        Entry("bert_small_base", start),
        Entry("bert_small_base", start, f"{start}-layerdrop", (("layer_drop", True),)),
        Entry("bert_small_base", start, f"{start}-tokendrop", (("token_drop", True),)))] + [
    Entry("bert_small_base", "bert2bert"),
    Entry("bert_small_base", "bert2bert", "bert2bert-staged", (("staged", True), ("staged_grow", "keep")))] + [
    Entry("bert_small_base", start, f"{start}-staged", (("staged", True),)) for start in ("ligo", "ligo_copy")]

# LEMON's own recipe for the grown model (Wang et al. 2024, "optimized learning rate scheduler"): the maximum lr
# kept, a faster decay, i.e. a shorter schedule, and the saving it reports is the training it cut (56.7% on ViT).
# lemon-decay trains the large model for the remaining 43.3% of the task's steps, its lr decay ending there; the
# savings table then says whether that still reaches scratch's final accuracy on this pair.
LEMON_VIT_SAVING = 0.567


def lemon_entries(scale: str) -> list[Entry]:
    from tasks.registry import get_task     # (imports torch: only when this sweep is planned)
    steps = max(1, round(get_task("deit_s_b", scale).recipe.steps * (1 - LEMON_VIT_SAVING)))
    return methods("deit_s_b", ("scratch", "lemon")) + [
        Entry("deit_s_b", "lemon", "lemon-decay", (("steps", steps),))]


# The runs that tell apart the candidate causes of a start leading or not (REPRODUCE.md, the verdict's causes):
# the grown model's recipe (tasks/grown_recipes.py), LiGO as its authors started it (ligo) against its copy start
# (ligo_copy), and copy symmetry (models/twins.py, logged at every evaluation). Evaluated every 50 steps so that the first 200, where the
# weight-copying starts meet, are visible; eval_every only says when to log (runs/record.py LOGGING_FIELDS), so these
# records stand beside the 200-step ones of the same labels as the same computation.
DENSE_EVAL = (("eval_every", 50),)
SYMMETRY_BREAK = 0.1          # ligo_copy's fit_noise for "copies perturbed": copies start ~10% apart


def recipe_entries(task: str, methods_: tuple[str, ...], presets: tuple[str, ...]) -> list[Entry]:
    """scratch (the task's recipe) and every method under every grown-recipe preset, labelled method-preset
    (`same` keeps the plain method name, the label the main comparison uses)."""
    out = [Entry(task, "scratch", settings=DENSE_EVAL)]
    for m in methods_:
        for name in presets:
            label = m if name == "same" else f"{m}-{name}"
            out.append(Entry(task, m, label, (("grown_recipe", name),) * (name != "same") + DENSE_EVAL))
    return out


def symmetry_entries(task: str) -> list[Entry]:
    """LiGO's copy start at its task default, with its copies kept (`ligo_copy-copies`: fit_noise 0, the Net2Net
    start) and with them broken (`ligo_copy-noise0.1`) first (the copy start's family default rests on them; one of
    the two is the default's setting, and the sweep records it as that run's twin instead of training it again), then
    LiGO as its authors started it and its parts (its random rows alone, all of it but its literal tying: its lead
    over the copy start split as official_start splits it on BERT; with B's pseudo-inverse a linear map reads its
    input back, but a new unit averaged from old ones is not their average after a nonlinearity, so no random-row
    start keeps the small model's function), then the other starts."""
    return [Entry(task, m, settings=DENSE_EVAL) for m in ("scratch", "ligo_copy")] + [
        Entry(task, "ligo_copy", "ligo_copy-copies", (("fit_noise", 0.0),) + DENSE_EVAL),
        Entry(task, "ligo_copy", f"ligo_copy-noise{SYMMETRY_BREAK}", (("fit_noise", SYMMETRY_BREAK),) + DENSE_EVAL),
        Entry(task, "ligo", settings=DENSE_EVAL)] + \
        official_start_parts(task, DENSE_EVAL) + [
        Entry(task, m, settings=DENSE_EVAL) for m in ("net2net", "bert2bert", "direct_copy")]


def official_start_parts(task: str, settings: tuple = ()) -> list[Entry]:
    """LiGO's start taken apart (official_start_entries says why): all of it but its tying (`ligo-pinv`), and the
    copy start with LiGO's random width rows alone (`ligo_copy-random`)."""
    return [Entry(task, "ligo", "ligo-pinv", (("tying", "pinv"),) + settings),
            Entry(task, "ligo_copy", "ligo_copy-random", (("width_init", "random"),) + settings)]


def official_start_entries(task: str) -> list[Entry]:
    """Why LiGO as its authors started it (methods/ligo.py) leads where its copy start (methods/ligo_copy.py) does
    not: the two starts with the steps between them. `ligo_copy-random` is the copy start (one-hot stacking,
    pseudo-inverse tying, its fit) with LiGO's random width rows; `ligo-pinv` is LiGO's start but for its tying, which
    divides the consuming side as Net2Net does (B's pseudo-inverse). ligo_copy -> ligo_copy-random -> ligo-pinv -> ligo
    adds the rows, then the depth init, order and fit, then the literal tying. (LiGO's start with Net2Net's copies as
    rows is left out: under the literal tying copies double every copied input, a start above scratch's loss that
    measures the broken function, not the rows.) All evaluated every 50 steps, so their plain labels are the recipes
    sweep's runs (same computation)."""
    return [Entry(task, m, settings=DENSE_EVAL) for m in ("scratch", "ligo_copy", "ligo")] + \
        official_start_parts(task, DENSE_EVAL)


def start_causes_entries(task: str) -> list[Entry]:
    """What makes the start matter where the pair is in the regime (BERT-Small->Base at 6,400 steps with its small
    model pretrained as long: the regime scale; REPRODUCE.md cause 6): there LiGO as its authors started
    it and bert2BERT lead and the copying starts tie, apart only after step 1,600, while Net2Net's FFN copies stay
    twins to the end. LiGO's start taken apart as `official_start` does (its random rows alone; all but its
    tying), and the copying starts with their copies perturbed: if the late split is the twins', these two rise to
    the leaders. Evaluated at the task's interval (the question is the end of a long run, not its first steps), so
    these labels are not the dense-eval runs of records/mini (a separate root)."""
    return official_start_parts(task) + [
        Entry(task, "net2net", "net2net-noise0.5", (("noise", 0.5),)),
        Entry(task, "ligo_copy", f"ligo_copy-noise{SYMMETRY_BREAK}", (("fit_noise", SYMMETRY_BREAK),))]


# Does LiGO's learning add to its initialisation? LiGO as its authors ran it fits its operator at an lr that only
# ramps to 1% of its peak (methods/ligo.py), so its fit barely moves the operator. The ablation: no fit at all
# (`ligo-nofit`, the initial operator), the authors' fit (`ligo`, the default), a fit of as many steps whose lr moves
# the operator (`ligo-movingfit`: no warm-up, 2e-4 decaying to 0), and a long one (`ligo-longfit`: 5x the steps,
# Table 3's 5x, at that lr). Its FLOPs are charged as every fit's are.
LONG_FIT = 5


def learning_entries(scale: str, tasks=("bert_small_base", "roberta_small_base", "gpt2_base_medium", "deit_s_b")
                     ) -> list[Entry]:
    from methods.ligo import LigoConfig
    from tasks.registry import get_task     # (imports torch: only when this sweep is planned)
    out = []
    for task in tasks:
        steps = dict(get_task(task, scale).method_defaults).get("fit_steps", LigoConfig.fit_steps)
        out += [Entry(task, "scratch"), Entry(task, "ligo"),
                Entry(task, "ligo", "ligo-nofit", (("fit_steps", 0),)),
                Entry(task, "ligo", "ligo-movingfit", (("fit_warmup_steps", 0),)),
                Entry(task, "ligo", "ligo-longfit", (("fit_steps", LONG_FIT * steps), ("fit_warmup_steps", 0)))]
    return out


# The headline comparison's starts beyond the paper's tables (issue 61): direct copy (Figure 6(b)'s width baseline:
# new units random) and LEMON (lossless, copies not twins), on each pair of the regime comparison where the method
# takes the pair (its check_pair: LEMON refuses depth growth of a post-norm family, BERT's).
HEADLINE_PAIRS = ("bert_small_base", "gpt2_base_medium", "deit_s_b")
EXTRA_STARTS = ("direct_copy", "lemon")


def extra_start_entries(scale: str) -> list[Entry]:
    from methods.registry import refusal     # (imports torch: only when this sweep is planned)
    from tasks.registry import get_task
    out = []
    for name in HEADLINE_PAIRS:
        task = get_task(name, scale)
        out += methods(name, ("scratch",) + tuple(m for m in EXTRA_STARTS if refusal(m, task) is None))
    return out


SWEEPS: dict[str, Sweep] = {s.name: s for s in [
    Sweep("bert", "Table 1, Figure 2(a-b), Table 5, Table 6 savings columns",
          lambda scale: methods("bert_small_base", declared("bert"))),
    Sweep("bert_large", "Figure 2(c)",
          lambda scale: methods("bert_small_large", ("scratch", "ligo", "ligo_copy"))
          + methods("bert_base_large", ("scratch", "ligo", "ligo_copy"))),
    Sweep("roberta", "Figure 3(a-b)", lambda scale: methods("roberta_small_base", declared("roberta"))),
    Sweep("gpt2", "Figure 3(c)", lambda scale: methods("gpt2_base_medium", declared("gpt2"))),
    Sweep("deit", "Table 2, Figure 4", lambda scale: methods("deit_s_b", declared("deit"))),
    Sweep("cait", "Figure 8 (App. C.2)", lambda scale: methods("cait_xs_s", declared("cait"))),
    Sweep("orthogonal", "Figure 5", lambda scale: ORTHOGONAL),
    # on this pair LiGO's start is its depth init, literal tying and fit, with no width to grow
    Sweep("depth_only", "Figure 6(a)",
          lambda scale: methods("bert_depth_only", ("scratch", "stackbert", "interpolation", "mslt", "ligo",
                                                    "ligo_copy"))),
    # net2net-noise0.5 asks why direct copy leads at mini: FPI with its new copies perturbed (noise 0.5 of each
    # tensor's std) starts as far from the small model's function as direct copy does (eval loss 5.250 against
    # 5.223 at seed 0; FPI 5.169) but keeps FPI's structure, so it separates "the new units are twins" from
    # "the grown model starts off the small model's function"
    Sweep("width_only", "Figure 6(b): direct copy, FPI (= net2net), AKI (= bert2bert), LiGO and its copy start; FPI "
          "with noise",
          lambda scale: methods("bert_width_only", ("scratch", "direct_copy", "net2net", "bert2bert", "ligo",
                                                    "ligo_copy"))
          + [Entry("bert_width_only", "net2net", "net2net-noise0.5", (("noise", 0.5),))]),
    Sweep("small_briefly", "Figure 7 (App. C.1): small model pretrained 50K of 220K steps",
          lambda scale: methods("bert_small_base", ("scratch", "ligo", "ligo_copy"))
          + [Entry("bert_small_base", start, f"{start}-smallshort", small_steps_frac=50 / 220)
             for start in ("ligo", "ligo_copy")]),
    Sweep("fit_steps", "Table 3", fit_steps_entries),
    # Table 5's "LiGO init" row: the grown model with no further pretraining (steps=0: fit, grow, export), so
    # that --eval fine-tunes it downstream like the other rows
    Sweep("ligo_init", "Table 5 (with --eval: every row fine-tuned downstream)",
          lambda scale: methods("bert_small_base", ("scratch", "ligo", "ligo_copy"))
          + [Entry("bert_small_base", start, f"{start}-init", (("steps", 0),)) for start in ("ligo", "ligo_copy")]),
    Sweep("gpt2_xl", "App. C.5 (GPT2-Medium -> GPT2-1.5B)",
          lambda scale: methods("gpt2_medium_xl", ("scratch", "ligo", "ligo_copy"))),
    Sweep("llama", "not in the paper: a Llama-style pair (GQA, SwiGLU, RMSNorm, rotary) with every method, "
          "HyperCloning, G_stack, LEMON and MSG included",
          lambda scale: methods("llama_small_base", declared("llama"))),
    Sweep("recipes", "E1: the grown model's recipe on BERT-Small->Base: LiGO, its copy start, StackBERT, "
          "bert2BERT under same / warmup0 / paper_lr / warmup0_paper_lr",
          lambda scale: recipe_entries("bert_small_base", ("ligo", "ligo_copy", "stackbert", "bert2bert"),
                                       ("same", "warmup0", "paper_lr", "warmup0_paper_lr"))),
    Sweep("recipes_llama", "E2: the grown model's recipe on the Llama-style pair (no dropout): LEMON, "
          "LiGO, its copy start, StackBERT under same / warmup0 / paper_lr",
          lambda scale: recipe_entries("llama_small_base", ("lemon", "ligo", "ligo_copy", "stackbert"),
                                       ("same", "warmup0", "paper_lr"))),
    Sweep("recipes_deit", "the grown model's recipe on DeiT (no dropout, CPU-sized): Net2Net, bert2BERT, "
          "LEMON, LiGO, its copy start under same / warmup0 / lr_tenth",
          lambda scale: recipe_entries("deit_s_b", ("net2net", "bert2bert", "lemon", "ligo", "ligo_copy"),
                                       ("same", "warmup0", "lr_tenth"))),
    Sweep("symmetry", "E3: copy symmetry on the width-only BERT pair and DeiT (no dropout): Net2Net, "
          "direct copy, bert2BERT, LiGO's copy start with its copies kept and perturbed, LiGO",
          lambda scale: symmetry_entries("deit_s_b") + symmetry_entries("bert_width_only")),
    Sweep("official_start", "why LiGO as its authors started it leads on BERT-Small->Base: its copy "
          "start with LiGO's random width rows, then LiGO's start but for its literal tying",
          lambda scale: official_start_entries("bert_small_base")),
    Sweep("start_causes", "why the start decides in BERT-Small->Base's regime run (with --set steps=6400 "
          "--set small_recipe.steps=6400): LiGO's start taken apart, copying starts with their copies perturbed",
          lambda scale: start_causes_entries("bert_small_base")),
    Sweep("learning", "whether LiGO's learning adds to its initialisation (no fit, the authors' fit, a fit "
          "whose lr moves the operator, a 5x longer one) on BERT-Small->Base, RoBERTa-Small->Base, GPT2-Base->Medium "
          "and DeiT-S->B",
          learning_entries),
    Sweep("lemon", "not in the paper: LEMON's ViT claim (56.7% saved with its faster-decaying schedule) on the "
          "DeiT pair, with the task's schedule and with 43.3% of its steps", lemon_entries),
    Sweep("extra_starts", "not in the paper's tables: direct copy and LEMON on the headline's pairs (BERT, GPT-2, "
          "DeiT) where each takes the pair", extra_start_entries),
]}
# the committed mini-scale comparison: BERT with every method, a GPT-2 and a vision comparison
SWEEPS["mini"] = Sweep("mini", "the three main comparisons (bert + gpt2 + deit: Tables 1-2, Figures 2(a-b), 3(c), 4)",
                       lambda scale: [e for n in ("bert", "gpt2", "deit") for e in SWEEPS[n].entries(scale)])
BEYOND_PAPER = ("llama", "lemon", "recipes_llama", "recipes_deit", "learning", "extra_starts")     # not the paper's: `all` leaves them out
SWEEPS["all"] = Sweep("all", "every table and figure",
                      lambda scale: [e for s in list(SWEEPS.values()) if s.name not in ("mini", "all") + BEYOND_PAPER
                                     for e in s.entries(scale)])


def plan(names: list[str], scale: str, seeds: list[int], only: list[str] | None = None,
         labels: list[str] | None = None, tasks: list[str] | None = None) -> list[tuple[Entry, int]]:
    """(entry, seed) pairs of the named sweeps, without repeats (sweeps share runs, e.g. scratch); `only`: these
    methods, `labels`: these runs (their directory labels, e.g. ligo-warmup0), `tasks`: these pairs (a sweep over
    two, e.g. symmetry's DeiT and width-only BERT), in the sweeps' order."""
    seen, out = set(), []
    for name in names:
        if name not in SWEEPS:
            from models.family import unknown     # (imports torch: only when there is something to say)
            raise KeyError(unknown("sweep", name, SWEEPS))
    entries = [e for name in names for e in SWEEPS[name].entries(scale)]
    for what, given, used in (("method", only, {e.method for e in entries}),
                              ("run label", labels, {e.name for e in entries}),
                              ("task", tasks, {e.task for e in entries})):
        for item in given or []:      # a typo must not silently select nothing
            if item not in used:
                from models.family import unknown
                raise KeyError(unknown(what, item, used) + f" (in sweeps {', '.join(names)})")
    for name in names:
        for e in SWEEPS[name].entries(scale):
            for seed in seeds:
                key = (e.task, e.name, seed)
                if key not in seen and (not only or e.method in only) and (not labels or e.name in labels) \
                        and (not tasks or e.task in tasks):
                    seen.add(key)
                    out.append((e, seed))
    return out
