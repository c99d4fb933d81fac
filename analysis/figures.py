"""Figures in the paper's style: eval loss (vision: accuracy) against FLOPs and wall time, one line per method
(mean over seeds, band = min..max over seeds), a solid line at scratch's final value (mean over seeds; each
method seed's saving is against its own scratch seed) and a dotted line at the small model's final value where
its pretraining record is present (as in Figure 2). Text panels also draw the unigram cross-entropy of the eval
tokens (config reference.unigram_ce), the loss of a model that learned word frequencies only. Labels that are
one computation (analysis/identical.py) are one line, named "StackBERT = Net2Net".

`PAPER_FIGURES` maps each of the paper's figures to its panels: tasks, x axis, and which run labels to draw
(labels are run-directory names without -s<seed>, as bench/sweeps.py writes them). `curve_figure` draws any
task at any scale, so runs nobody planned for are still plotted. Matplotlib runs on the Agg backend: no display.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)
import pandas as pd  # noqa: E402

from analysis.identical import merge  # noqa: E402
from analysis.savings import mean_curve, scratch_target, target_metric  # noqa: E402
from analysis.tables import display, is_variant, label_key, method_of  # noqa: E402

MAIN = None   # labels=None: every label without a variant suffix (the main comparison, not ablation variants)


@dataclass(frozen=True)
class Panel:
    tasks: tuple[str, ...]
    x: str = "flops"                      # "flops" | "wall"
    labels: tuple[str, ...] | None = MAIN
    title: str = ""


PAPER_FIGURES: dict[str, tuple[str, list[Panel]]] = {
    "figure2": ("BERT: (a-b) BERT-Small→BERT-Base vs FLOPs and wall time; (c) BERT-{Small, Base}→BERT-Large", [
        Panel(("bert_small_base",), "flops", title="(a) BERT-Small→BERT-Base"),
        Panel(("bert_small_base",), "wall", title="(b) BERT-Small→BERT-Base"),
        Panel(("bert_small_large", "bert_base_large"), "flops", ("scratch", "ligo"),
              "(c) BERT-{Small, Base}→BERT-Large")]),
    "figure3": ("RoBERTa and GPT-2", [
        Panel(("roberta_small_base",), "flops", title="(a) RoBERTa-Small→RoBERTa-Base"),
        Panel(("roberta_small_base",), "wall", title="(b) RoBERTa-Small→RoBERTa-Base"),
        Panel(("gpt2_base_medium",), "flops", title="(c) GPT2-Base→GPT2-Medium")]),
    "figure4": ("DeiT-S→DeiT-B: accuracy vs FLOPs and wall time", [
        Panel(("deit_s_b",), "flops", title="(a) DeiT-S→DeiT-B"),
        Panel(("deit_s_b",), "wall", title="(b) DeiT-S→DeiT-B")]),
    "figure5": ("LiGO with orthogonal efficient-training strategies (BERT-Small→BERT-Base)", [
        Panel(("bert_small_base",), "flops", ("scratch", "ligo", "ligo-layerdrop"), "(a) LiGO w/ layer dropping"),
        Panel(("bert_small_base",), "flops", ("scratch", "ligo", "ligo-tokendrop"), "(b) LiGO w/ token dropping"),
        Panel(("bert_small_base",), "flops", ("scratch", "bert2bert", "bert2bert-staged", "ligo", "ligo-staged"),
              "(c) LiGO w/ staged training")]),
    "figure6": ("Depth-only and width-only growth", [
        Panel(("bert_depth_only",), "flops", title="(a) BERT(6, 768)→BERT(12, 768)"),
        Panel(("bert_width_only",), "flops", title="(b) BERT(12, 512)→BERT(12, 768)")]),
    "figure7": ("BERT-Base grown from a briefly trained BERT-Small", [
        Panel(("bert_small_base",), "flops", ("scratch", "ligo", "ligo-smallshort"), "(a) BERT-Small→BERT-Base"),
        Panel(("bert_small_base",), "wall", ("scratch", "ligo", "ligo-smallshort"), "(b) BERT-Small→BERT-Base")]),
    "figure8": ("CaiT-XS→CaiT-S: accuracy vs FLOPs and wall time", [
        Panel(("cait_xs_s",), "flops", title="(a) CaiT-XS→CaiT-S"),
        Panel(("cait_xs_s",), "wall", title="(b) CaiT-XS→CaiT-S")]),
}
XLABEL = {"flops": "FLOPs", "wall": "wall time (s)"}
UNIGRAM_LABEL = "unigram cross-entropy"
YLABEL = {"eval_loss": "validation loss (log perplexity)", "eval_acc": "validation accuracy"}


# one colour per method (LiGO red, as it is the subject); a variant (ligo-fit500) keeps its method's colour
# and takes a dashed or dotted line instead
COLORS = {"scratch": "tab:blue", "stackbert": "tab:orange", "interpolation": "tab:olive", "mslt": "tab:green",
          "ki": "tab:purple", "net2net": "tab:brown", "bert2bert": "tab:pink", "ligo": "tab:red", "ligo_official": "magenta",
          "direct_copy": "tab:gray", "hypercloning": "teal", "g_stack": "gold", "lemon": "navy", "msg": "darkviolet"}
VARIANT_STYLES = ["--", ":", "-.", (0, (5, 1, 1, 1, 1, 1))]


def color(label: str):
    head = method_of(label)
    return COLORS.get(head) or plt.get_cmap("tab10")((sum(map(ord, head)) % 7) + 3)


def line_style(label: str, labels: list[str]):
    """Solid for a method, then dashed, dotted... for its variants, in the order they are drawn."""
    head = method_of(label)
    siblings = [lab for lab in labels if method_of(lab) == head and lab != head]
    return "-" if label == head else VARIANT_STYLES[siblings.index(label) % len(VARIANT_STYLES)]


def _labels(curves: pd.DataFrame, wanted: tuple[str, ...] | None) -> list[str]:
    have = set(curves.loc[curves["role"] == "large", "label"])
    if wanted is None:
        wanted = tuple(sorted((lab for lab in have if not is_variant(lab)), key=label_key))
    return [lab for lab in wanted if lab in have]


def _computation_key(g: pd.DataFrame) -> tuple:
    """The computations a label's runs are, seed by seed (their fingerprint, else their curve digest): two tasks'
    labels with one key are one curve (a sweep's twin record of another task's run)."""
    def identity(run) -> str | None:
        fingerprint = run.get("computation")
        return fingerprint if isinstance(fingerprint, str) and fingerprint else run.get("curve")
    return tuple((int(r["seed"]), identity(r)) for _, r in g.drop_duplicates("seed").sort_values("seed").iterrows())


def _computations(curves: pd.DataFrame, panel: Panel, scale: str) -> tuple[dict, dict]:
    """(task, label) -> (label, computation key), and (label, computation key) -> the panel's tasks that ran it:
    a multi-task panel draws each computation once, naming those tasks."""
    keys, tasks = {}, {}
    for task in panel.tasks:
        cur = curves[(curves["task"] == task) & (curves["scale"] == scale) & (curves["role"] == "large")]
        for label, g in cur.groupby("label"):
            keys[task, label] = (label, _computation_key(g))
            tasks.setdefault(keys[task, label], []).append(task)
    return keys, tasks


def draw_panel(ax, curves: pd.DataFrame, panel: Panel, scale: str) -> bool:
    """Draw one panel; False if there was nothing to draw (the axis then says so). In a panel of several tasks
    a run one task recorded as another's twin is one line, named after both, and a reference line (scratch
    final, unigram) both tasks share is drawn once."""
    drawn, multi = False, len(panel.tasks) > 1
    keys, shared = _computations(curves, panel, scale)
    seen: set = set()                 # (label, computation key) and reference lines already drawn
    unigrams = {}
    for task in panel.tasks:
        value = _unigram(curves[(curves["task"] == task) & (curves["scale"] == scale)], "eval_loss")
        unigrams[task] = None if value is None else round(value, 9)
    for i, task in enumerate(panel.tasks):
        cur = curves[(curves["task"] == task) & (curves["scale"] == scale)]
        if cur.empty:
            continue
        metric = target_metric(cur)
        scale_y = 100.0 if metric == "eval_acc" else 1.0
        labels, merged = _labels(cur, panel.labels), merge(cur)
        for label in labels:
            group = [lab for lab in labels if lab in merged.group(label)]
            if group[0] != label:       # one computation, one line: drawn under its first label
                continue
            g = cur[(cur["role"] == "large") & (cur["label"] == label)]
            key = keys[task, label]
            if key in seen:             # another task of the panel already drew this very computation
                continue
            seen.add(key)
            m = mean_curve(g, metric)
            name = " = ".join(map(display, group)) + (f" ({', '.join(shared[key])})" if multi else "")
            style = line_style(label, labels) if i == 0 else "--"
            ax.plot(m[panel.x], m[metric] * scale_y, linestyle=style, color=color(label), label=name, lw=1.6,
                    marker="o", ms=2.5)
            if g["seed"].nunique() > 1:
                band = g.groupby("step")[metric].agg(["min", "max"]).loc[m["step"]]
                ax.fill_between(m[panel.x].to_numpy(), band["min"].to_numpy() * scale_y,
                                band["max"].to_numpy() * scale_y, color=color(label), alpha=0.15, lw=0)
            # scratch alone is only the reference: a panel counts as drawn when some method is on it
            drawn |= label != "scratch"
        target, _ = scratch_target(cur, metric)
        scratch_key = ("scratch final", keys.get((task, "scratch")))
        if target == target and scratch_key not in seen:
            seen.add(scratch_key)
            owners = shared.get(keys.get((task, "scratch")), [task])
            ax.axhline(target * scale_y, color="black", lw=1.0, ls="-" if i == 0 else "-.",
                       label=f"scratch final ({', '.join(owners)})" if multi else "scratch final (seed mean)")
        small = cur[(cur["role"] == "small") & (cur["label"] == "small")].dropna(subset=[metric])
        if not small.empty:
            finals = small.sort_values("step").groupby("seed")[metric].last()
            ax.axhline(finals.mean() * scale_y, color="gray", lw=1.0, ls=":" if i == 0 else (0, (1, 3)),
                       label="small model final" + (f" ({task})" if multi else ""))
        unigram = unigrams[task]
        if unigram is not None and ("unigram", unigram) not in seen:
            seen.add(("unigram", unigram))       # one eval set and tokenizer: the tasks' unigram lines coincide
            owners = [t for t in panel.tasks if unigrams[t] == unigram]
            ax.axhline(unigram, color="tab:cyan", lw=1.0, ls="--",
                       label=UNIGRAM_LABEL + (f" ({', '.join(owners)})" if multi else ""))
    ax.set_xlabel(XLABEL[panel.x])
    ax.set_title(panel.title or ", ".join(panel.tasks), fontsize=9)
    ax.grid(alpha=0.3)
    if drawn:
        ax.set_ylabel(YLABEL[metric] + (" (%)" if metric == "eval_acc" else ""))
        _zoom(ax, curves, panel, scale)
        ax.legend(fontsize=6, loc="best")
    else:
        # scratch may be drawn as the reference: then say what is missing, not that nothing ran
        ax.text(0.5, 0.5, "no growth runs yet" if ax.lines else "no runs", ha="center", va="center",
                transform=ax.transAxes, color="gray")
    return drawn


def _unigram(cur: pd.DataFrame, metric: str) -> float | None:
    """The unigram cross-entropy of a text task's eval tokens, from its large runs' records (one eval set and
    tokenizer per task, so one value); None for vision or records made before it was logged."""
    vals = cur.loc[cur["role"] == "large", "unigram_ce"].dropna() if "unigram_ce" in cur else ()
    return float(vals.mean()) if metric == "eval_loss" and len(vals) else None


def _zoom(ax, curves: pd.DataFrame, panel: Panel, scale: str) -> None:
    """Keep the informative range: the untrained step-0 loss of scratch (about ln(vocab)) would otherwise
    squash every curve into a line, as the paper's figures also start after the first drop. The unigram line
    stays inside it: it is the reference the curves are read against."""
    cur = curves[curves["task"].isin(panel.tasks) & (curves["scale"] == scale) & (curves["step"] > 0)]
    metric = target_metric(cur)
    vals = cur[metric].dropna() * (100.0 if metric == "eval_acc" else 1.0)
    unigram = _unigram(cur, metric)
    vals = pd.concat([vals, pd.Series([unigram], dtype=float)]) if unigram is not None else vals
    if len(vals):
        lo, hi = vals.min(), vals.max()
        pad = 0.05 * (hi - lo or 1.0)
        ax.set_ylim(lo - pad, hi + pad)


def save(fig, path: Path, formats=("png", "pdf")) -> list[Path]:
    path.parent.mkdir(parents=True, exist_ok=True)
    out = []
    for ext in formats:
        p = path.with_suffix(f".{ext}")
        # no creation date in PDFs: regenerating unchanged records leaves the committed files unchanged
        fig.savefig(p, dpi=150, metadata={"CreationDate": None} if ext == "pdf" else None)
        out.append(p)
    plt.close(fig)
    return out


def panels_figure(curves: pd.DataFrame, panels: list[Panel], scale: str, title: str = ""):
    """A row of panels; returns (figure, whether any panel had data)."""
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.4), squeeze=False)
    any_drawn = False
    for ax, panel in zip(axes[0], panels):
        any_drawn |= draw_panel(ax, curves, panel, scale)
    if title:
        fig.suptitle(f"{title} [{scale} scale]", fontsize=10)
    fig.tight_layout()
    return fig, any_drawn


def has_data(curves: pd.DataFrame, panel: Panel, scale: str) -> bool:
    """Whether the panel has what it is about (checked before any drawing: cheap): one of its variant labels
    (e.g. ligo-layerdrop) where it names some, else any method other than scratch. Figures 5 and 7 are thus
    not drawn from the main comparison's runs alone."""
    cur = curves[curves["task"].isin(panel.tasks) & (curves["scale"] == scale) & (curves["role"] == "large")]
    have = _labels(cur, panel.labels)
    variants = [lab for lab in panel.labels or () if is_variant(lab)]
    return any(lab in variants for lab in have) if variants else any(lab != "scratch" for lab in have)


def paper_figure(curves: pd.DataFrame, name: str, scale: str, out: Path, formats=("png", "pdf")) -> list[Path]:
    """One of the paper's figures at `scale`, written as out/<name>-<scale>.<ext>; [] when it has no runs."""
    title, panels = PAPER_FIGURES[name]
    if not any(has_data(curves, p, scale) for p in panels):
        return []
    fig, drawn = panels_figure(curves, panels, scale, f"Figure {name.removeprefix('figure')}: {title}")
    if not drawn:
        plt.close(fig)
        return []
    return save(fig, out / f"{name}-{scale}", formats)


def curve_figure(curves: pd.DataFrame, task: str, scale: str, out: Path, formats=("png", "pdf")) -> list[Path]:
    """Every label of one task against FLOPs and wall time (variants included): out/curves-<task>-<scale>."""
    labels = tuple(_labels(curves[(curves["task"] == task) & (curves["scale"] == scale)], None))
    variants = sorted(set(curves.loc[(curves["task"] == task) & (curves["scale"] == scale)
                                     & (curves["role"] == "large"), "label"]) - set(labels), key=label_key)
    panels = [Panel((task,), "flops", labels + tuple(variants), f"{task} vs FLOPs"),
              Panel((task,), "wall", labels + tuple(variants), f"{task} vs wall time")]
    fig, drawn = panels_figure(curves, panels, scale)
    if not drawn:
        plt.close(fig)
        return []
    return save(fig, out / f"curves-{task}-{scale}", formats)
