"""Figures in the paper's style: eval loss (vision: accuracy) against FLOPs and wall time, one line per method
(mean over seeds, band = min..max over seeds), a solid line at scratch's final value (mean over seeds; each
method seed's saving is against its own scratch seed) and a dotted line at the small model's final value where
its pretraining record is present (as in Figure 2). Text panels also draw the unigram cross-entropy of the eval
tokens (config reference.unigram_ce), the loss of a model that learned word frequencies only. Labels that are
one computation (analysis/identical.py) are one line, named "StackBERT = Net2Net".

Read without the code: a method has one colour on every figure (the one it declares), its variants (ligo-warmup0)
that colour with their own line style and marker; one legend per figure, below the panels, its title a caption
saying what line and band are and what each reference line is (analysis/legend.py);
the y-limits come from the method curves, a reference line far from them is written at the axis edge instead; panel
titles give the shapes the records trained (config.json task.small -> task.large, "BERT 2L/128 → 4L/192"), the
figure titles the paper's names as the paper's.

`PAPER_FIGURES` maps each of the paper's figures to its panels: tasks, x axis, and which run labels to draw
(labels are run-directory names without -s<seed>, as bench/sweeps/cli.py writes them). `curve_figure` draws any
task at any scale, so runs nobody planned for are still plotted. Matplotlib runs on the Agg backend: no display.
"""
from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)
import pandas as pd  # noqa: E402

from analysis.frames import one_machine  # noqa: E402
from analysis.identical import merge  # noqa: E402
from analysis.legend import UNIGRAM_LABEL, draw_legend  # noqa: E402
from analysis.savings import mean_curve, scratch_target, target_metric  # noqa: E402
from analysis.styles import METHOD_STYLE, color, line_styles  # noqa: E402
from analysis.tables import display, is_variant, label_key  # noqa: E402

MAIN = None   # labels=None: every label without a variant suffix (the main comparison, not ablation variants)


@dataclass(frozen=True)
class Panel:
    tasks: tuple[str, ...]
    x: str = "flops"                      # "flops" | "wall"
    labels: tuple[str, ...] | None = MAIN
    title: str = ""


def both_starts(*suffixes: str) -> tuple[str, ...]:
    """LiGO's variant runs for each of its starts (`ligo-layerdrop`, `ligo_copy-layerdrop`): a panel draws the labels
    its records have, so a variant run from one start only shows with that start."""
    return tuple(f"{start}{suffix}" for start in ("ligo", "ligo_copy") for suffix in suffixes)


# Panel titles say what a panel shows; draw_panel appends the shapes the records trained (task.small -> task.large
# in config.json), as a paper name (BERT-Small) is wrong at mini and tiny scale. The figure titles keep the paper's
# names, saying they are the paper's.
PAPER_FIGURES: dict[str, tuple[str, list[Panel]]] = {
    "figure2": ("BERT growth (paper: (a-b) BERT-Small→BERT-Base, (c) BERT-{Small, Base}→BERT-Large)", [
        Panel(("bert_small_base",), "flops", title="(a)"),
        Panel(("bert_small_base",), "wall", title="(b)"),
        Panel(("bert_small_large", "bert_base_large"), "flops", ("scratch", "ligo", "ligo_copy"), "(c)")]),
    "figure3": ("RoBERTa and GPT-2 (paper: RoBERTa-Small→RoBERTa-Base, GPT2-Base→GPT2-Medium)", [
        Panel(("roberta_small_base",), "flops", title="(a)"),
        Panel(("roberta_small_base",), "wall", title="(b)"),
        Panel(("gpt2_base_medium",), "flops", title="(c)")]),
    "figure4": ("DeiT: accuracy vs FLOPs and wall time (paper: DeiT-S→DeiT-B)", [
        Panel(("deit_s_b",), "flops", title="(a)"),
        Panel(("deit_s_b",), "wall", title="(b)")]),
    "figure5": ("LiGO with orthogonal efficient-training strategies (paper: BERT-Small→BERT-Base)", [
        Panel(("bert_small_base",), "flops", ("scratch",) + both_starts("", "-layerdrop"), "(a) LiGO w/ layer dropping,"),
        Panel(("bert_small_base",), "flops", ("scratch",) + both_starts("", "-tokendrop"), "(b) LiGO w/ token dropping,"),
        Panel(("bert_small_base",), "flops", ("scratch", "bert2bert", "bert2bert-staged") + both_starts("", "-staged"),
              "(c) LiGO w/ staged training,")]),
    "figure6": ("Depth-only and width-only growth "
                "(paper: BERT(6, 768)→BERT(12, 768), BERT(12, 512)→BERT(12, 768))", [
        Panel(("bert_depth_only",), "flops", title="(a) depth only:"),
        Panel(("bert_width_only",), "flops", title="(b) width only:")]),
    "figure7": ("Grown from a briefly trained small model (paper: BERT-Small→BERT-Base)", [
        Panel(("bert_small_base",), "flops", ("scratch",) + both_starts("", "-smallshort"), "(a)"),
        Panel(("bert_small_base",), "wall", ("scratch",) + both_starts("", "-smallshort"), "(b)")]),
    "figure8": ("CaiT: accuracy vs FLOPs and wall time (paper: CaiT-XS→CaiT-S)", [
        Panel(("cait_xs_s",), "flops", title="(a)"),
        Panel(("cait_xs_s",), "wall", title="(b)")]),
}
XLABEL = {"flops": "FLOPs", "wall": "wall time (s)"}
YLABEL = {"eval_loss": "validation loss (log perplexity)", "eval_acc": "validation accuracy"}
FAMILY_NAMES = {"bert": "BERT", "roberta": "RoBERTa", "gpt2": "GPT-2", "llama": "LLaMA", "vit": "ViT", "cait": "CaiT"}


def spec_text(spec) -> tuple[str, str] | None:
    """('BERT', '4L/192') from a record's task.small / task.large (family, layers, hidden); None if it lacks them."""
    if not isinstance(spec, dict) or not all(type(spec.get(k)) is int for k in ("layers", "hidden")):   # not bool
        return None
    family = spec.get("family")
    return FAMILY_NAMES.get(family, str(family or "?")), f"{spec['layers']}L/{spec['hidden']}"


def pair(curves: pd.DataFrame, task: str, scale: str) -> tuple | None:
    """(family, small shape, large family, large shape) a task's records trained, from their config.json
    (task.small / task.large); None where no record says (older records) or records disagree."""
    cur = curves[(curves["task"] == task) & (curves["scale"] == scale) & (curves["role"] == "large")]
    pairs = set()
    for small, large in zip(cur.get("small_spec", ()), cur.get("large_spec", ())):
        small, large = spec_text(small), spec_text(large)
        if small and large:
            pairs.add((*small, *large))
    return pairs.pop() if len(pairs) == 1 else None


def shapes(curves: pd.DataFrame, tasks: tuple[str, ...], scale: str) -> str:
    """'BERT 2L/128 → 4L/192'; tasks growing into one model as the paper names them, 'BERT {2L/128, 4L/192} →
    8L/256'; the task's name where its records do not say."""
    pairs = [pair(curves, task, scale) for task in tasks]
    if None not in pairs and len(pairs) > 1 and len({(p[0], p[2], p[3]) for p in pairs}) == 1:
        family, _, large_family, large = pairs[0]
        to = large if family == large_family else f"{large_family} {large}"
        return f"{family} {{{', '.join(p[1] for p in pairs)}}} → {to}"
    return "; ".join(task if p is None else f"{p[0]} {p[1]} → {p[3] if p[0] == p[2] else f'{p[2]} {p[3]}'}"
                     for task, p in zip(tasks, pairs))


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


def draw_panel(ax, curves: pd.DataFrame, panel: Panel, scale: str, styles: dict | None = None,
               seeds: dict | None = None) -> bool:
    """Draw one panel; False if there was nothing to draw (the axis then says so). In a panel of several tasks
    a run one task recorded as another's twin is one line, named after both, and a reference line (scratch
    final, unigram) both tasks share is drawn once. `styles`: label -> (line style, marker), line_styles of the
    whole figure's labels; `seeds` is filled with each line's name -> {panel: its number of seeds there} (the
    caption's n: one name can have other seeds on another panel, as a method run on one pair at more seeds).
    The legend is the figure's (panels_figure), outside the axes."""
    styles = styles if styles is not None else line_styles(curves.loc[curves["role"] == "large", "label"])
    seeds = seeds if seeds is not None else {}
    drawn, multi = False, len(panel.tasks) > 1
    keys, shared = _computations(curves, panel, scale)
    seen: set = set()                 # (label, computation key) and reference lines already drawn
    values, references = [], []       # what sets the y-limits; (value, name) of the horizontal lines
    unigrams = {}
    for task in panel.tasks:
        value = _unigram(curves[(curves["task"] == task) & (curves["scale"] == scale)], "eval_loss")
        unigrams[task] = None if value is None else round(value, 9)
    left_out: dict[str, list[int]] = {}   # a wall-time panel's runs made on another machine than scratch's
    for i, task in enumerate(panel.tasks):
        cur = curves[(curves["task"] == task) & (curves["scale"] == scale)]
        if cur.empty:
            continue
        if panel.x == "wall":
            cur, gone = one_machine(cur)
            for label, seed in gone:
                left_out.setdefault(display(label), []).append(seed)
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
            style, marker = styles.get(label, METHOD_STYLE)
            if i > 0:                   # the panel's second task: dashed, squares (its name says which task)
                style, marker = "--", "s"
            ax.plot(m[panel.x], m[metric] * scale_y, linestyle=style, color=color(label), label=name, lw=1.6,
                    marker=marker, ms=3)
            n_seeds = int(g["seed"].nunique())
            # the panel as its title names it ("(a)"), or by its tasks where it has no title
            seeds.setdefault(name, {})[panel.title.split()[0] if panel.title else " + ".join(panel.tasks)] = n_seeds
            if n_seeds > 1:
                band = g.groupby("step")[metric].agg(["min", "max"]).loc[m["step"]]
                ax.fill_between(m[panel.x].to_numpy(), band["min"].to_numpy() * scale_y,
                                band["max"].to_numpy() * scale_y, color=color(label), alpha=0.15, lw=0)
            # the untrained step-0 value (scratch: about ln(vocab)) would squash every curve into a line, as
            # the paper's figures also start after the first drop
            trained = g.loc[g["step"] > 0, metric].dropna()
            values.append((trained if len(trained) else g[metric].dropna()) * scale_y)
            # scratch alone is only the reference: a panel counts as drawn when some method is on it
            drawn |= label != "scratch"
        target, _ = scratch_target(cur, metric)
        scratch_key = ("scratch final", keys.get((task, "scratch")))
        if target == target and scratch_key not in seen:
            seen.add(scratch_key)
            owners = shared.get(keys.get((task, "scratch")), [task])
            name = f"scratch final ({', '.join(owners)})" if multi else "scratch final (seed mean)"
            ax.axhline(target * scale_y, color="black", lw=1.0, ls="-" if i == 0 else "-.", label=name)
            references.append((target * scale_y, name))
        small = cur[(cur["role"] == "small") & (cur["label"] == "small")].dropna(subset=[metric])
        if not small.empty:
            finals = small.sort_values("step").groupby("seed")[metric].last()
            name = "small model final" + (f" ({task})" if multi else "")
            ax.axhline(finals.mean() * scale_y, color="dimgray", lw=1.0, ls=":" if i == 0 else (0, (1, 3)),
                       label=name)
            references.append((finals.mean() * scale_y, name))
        unigram = unigrams[task]
        if unigram is not None and ("unigram", unigram) not in seen:
            seen.add(("unigram", unigram))       # one eval set and tokenizer: the tasks' unigram lines coincide
            owners = [t for t in panel.tasks if unigrams[t] == unigram]
            name = UNIGRAM_LABEL + (f" ({', '.join(owners)})" if multi else "")
            ax.axhline(unigram, color="dimgray", lw=1.0, ls=(0, (6, 2, 1, 2)), label=name)
            references.append((unigram, name))
    ax.set_xlabel(XLABEL[panel.x])
    title = " ".join(t for t in (panel.title, shapes(curves, panel.tasks, scale)) if t)
    if panel.x == "wall" and left_out:
        title += "\n" + not_drawn_note(left_out, ax.figure.get_figwidth() / len(ax.figure.axes))
    ax.set_title(title, fontsize=9 if not left_out else 7)
    ax.grid(alpha=0.3)
    if drawn:
        ax.set_ylabel(YLABEL[metric] + (" (%)" if metric == "eval_acc" else ""))
        _zoom(ax, values, references)
    else:
        # scratch may be drawn as the reference: then say what is missing, not that nothing ran
        ax.text(0.5, 0.5, "no growth runs yet" if ax.lines else "no runs", ha="center", va="center",
                transform=ax.transAxes, color="gray")
    return drawn


def not_drawn_note(left_out: dict[str, list[int]], panel_width: float) -> str:
    """What a wall-time panel leaves out, a method's seeds together, wrapped to the panel's width (inches; ~17
    characters an inch at 7 pt): as one line it ran across the neighbouring panels' titles (14 runs of BERT's
    regime comparison, made on one thread against scratch's two)."""
    runs = "; ".join(f"{name} " + " ".join(f"s{seed}" for seed in sorted(seeds)) for name, seeds in left_out.items())
    return textwrap.fill(f"not drawn (made on another device or thread count than scratch): {runs}",
                         max(30, int(panel_width * 17)), break_on_hyphens=False)


def _unigram(cur: pd.DataFrame, metric: str) -> float | None:
    """The unigram cross-entropy of a text task's eval tokens, from its large runs' records (one eval set and
    tokenizer per task, so one value); None for vision or records made before it was logged."""
    vals = cur.loc[cur["role"] == "large", "unigram_ce"].dropna() if "unigram_ce" in cur else ()
    return float(vals.mean()) if metric == "eval_loss" and len(vals) else None


NEAR = 0.25     # a reference line within this share of the curves' span beyond them is drawn inside the axes


def _zoom(ax, values: list[pd.Series], references: list[tuple[float, str]]) -> None:
    """Y-limits from the method curves (`values`, all seeds, untrained step 0 left out) and the reference lines
    near them; a reference line further away (the unigram cross-entropy far above a trained model's loss) is
    left off the axes and its value written at the edge it lies beyond, so it cannot squash the curves."""
    vals = pd.concat(values) if values else pd.Series(dtype=float)
    if not len(vals):
        return
    lo, hi = float(vals.min()), float(vals.max())
    span = hi - lo or 1.0
    near = [v for v, _ in references if lo - NEAR * span <= v <= hi + NEAR * span]
    lo, hi = min([lo, *near]), max([hi, *near])
    pad = 0.05 * (hi - lo or 1.0)
    ax.set_ylim(lo - pad, hi + pad)
    above = [(v, n) for v, n in references if v > hi + pad]
    below = [(v, n) for v, n in references if v < lo - pad]
    for j, (v, name) in enumerate(sorted(above, reverse=True)):
        ax.annotate(f"↑ {name}: {v:.3g} (above the axis)", xy=(1, 1), xycoords="axes fraction",
                    xytext=(-3, -3 - 9 * j), textcoords="offset points", ha="right", va="top", fontsize=6.5,
                    color="dimgray", bbox={"fc": "white", "ec": "none", "alpha": 0.8, "pad": 1})
    for j, (v, name) in enumerate(sorted(below)):
        ax.annotate(f"↓ {name}: {v:.3g} (below the axis)", xy=(0, 0), xycoords="axes fraction",
                    xytext=(3, 3 + 9 * j), textcoords="offset points", ha="left", va="bottom", fontsize=6.5,
                    color="dimgray", bbox={"fc": "white", "ec": "none", "alpha": 0.8, "pad": 1})


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


def panels_figure(curves: pd.DataFrame, panels: list[Panel], scale: str, title: str = "",
                  panel_size: tuple[float, float] = (4.2, 3.4)):
    """A row of panels with one legend below them, captioned; returns (figure, whether any panel had data).
    Colours are the methods' (color), line styles and markers the variants' (line_styles, over every label of
    `curves`, so a variant looks the same on every figure of one analysis)."""
    width, height = panel_size[0] * len(panels), panel_size[1]
    fig, axes = plt.subplots(1, len(panels), figsize=(width, height), squeeze=False, layout="constrained")
    styles = line_styles(curves.loc[curves["role"] == "large", "label"])
    seeds: dict[str, dict[str, int]] = {}
    any_drawn = False
    for ax, panel in zip(axes[0], panels):
        any_drawn |= draw_panel(ax, curves, panel, scale, styles, seeds)
    rows, lines = draw_legend(fig, seeds, width) if any_drawn else (0, 0)
    title_lines = 0
    if title:
        # wrapped to the figure's width (about 12 characters an inch at 10 pt): a long paper title was cut at both
        # edges of a two-panel figure
        text = textwrap.fill(f"{title} [{scale} scale]", max(30, int(width * 12)))
        fig.suptitle(text, fontsize=10)
        title_lines = text.count("\n")
    fig.set_size_inches(width, height + 0.15 * rows + 0.14 * lines + 0.17 * title_lines)  # room for legend, title
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
    every = tuple(sorted(labels + tuple(variants), key=label_key))     # each variant after its method
    panels = [Panel((task,), "flops", every, "(a)"), Panel((task,), "wall", every, "(b)")]
    fig, drawn = panels_figure(curves, panels, scale, f"{task}: every run, against FLOPs and wall time",
                               panel_size=(5.2, 4.0))
    if not drawn:
        plt.close(fig)
        return []
    return save(fig, out / f"curves-{task}-{scale}", formats)
