"""The one legend a figure carries, below its panels, and its caption: what a line and a band are (mean and min..max
over n seeds, n per line where it differs) and what each reference line is, for a reader without the code. Its
input is what analysis/figures.py drew: each line's seed count per panel, and the reference lines' names.
"""
from __future__ import annotations

import textwrap

UNIGRAM_LABEL = "unigram cross-entropy"     # the name of the reference line the caption explains as such


def seed_counts(seeds: dict[str, dict[str, int]]) -> list[int]:
    """Every drawn line's number of seeds, one entry per line and panel."""
    return [n for per_panel in seeds.values() for n in per_panel.values()]


def usual_seeds(seeds: dict[str, dict[str, int]]) -> int | None:
    counts = seed_counts(seeds)
    return max(sorted(set(counts)), key=counts.count) if counts else None


def seeds_mark(per_panel: dict[str, int], usual: int | None) -> str:
    """' [1]' after a line's name where its seeds are not the usual number; ' [1 in (a) (b); 2 in (c)]' where they
    differ between the figure's panels (one legend entry speaks for every panel)."""
    counts = sorted(set(per_panel.values()))
    if counts == [usual]:
        return ""
    if len(counts) == 1:
        return f" [{counts[0]}]"
    return " [" + "; ".join(f"{n} in " + " ".join(t for t, m in per_panel.items() if m == n) for n in counts) + "]"


def caption(seeds: dict[str, dict[str, int]], references: set[str]) -> str:
    """What the lines and bands are, for a reader without the code: n seeds (per line where it differs)."""
    counts = sorted(set(seed_counts(seeds)))
    if not counts:
        return ""
    n = usual_seeds(seeds)                                   # the usual number of seeds
    if counts == [1]:
        text = "Each line is one seed (no band)."
    elif len(counts) == 1:
        text = f"Line: mean over {n} seeds; band: min–max over the {n} seeds."
    else:
        usual = "one seed (no band)" if n == 1 else f"{n} seeds"
        text = (f"Line: mean over the seeds; band: min–max over them: {usual}, or the number in [brackets] after "
                "a name (one seed: no band).")
    refs = {"scratch final": "solid black: scratch's final value (seed mean), the target of the savings",
            "small model final": "dotted: the small model's final value",
            UNIGRAM_LABEL: "dash-dot: the unigram cross-entropy (a model that knows only token frequencies)"}
    named = [say for key, say in refs.items() if any(r.startswith(key) for r in references)]
    return text + (" Reference lines: " + "; ".join(named) + "." if named else "")


def draw_legend(fig, seeds: dict[str, dict[str, int]], width: float) -> tuple[int, int]:
    """One legend for the figure, below the panels (never over a curve), its title the caption: each name once,
    the method lines first, then the reference lines; a line's seed count in brackets where it is not the usual
    one. Returns its rows of names and of caption."""
    handles = {}
    for ax in fig.axes:
        for h, name in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(name, h)
    if not handles:
        return 0, 0
    usual = usual_seeds(seeds)
    names = sorted(handles, key=lambda name: name not in seeds)          # stable: drawing order within each
    shown = [name + seeds_mark(seeds[name], usual) if name in seeds else name for name in names]
    fontsize = 7
    column = max(map(len, shown)) * fontsize * 0.55 + 36                 # points: text and the line sample
    ncol = max(1, min(len(shown), int(width * 72 // column)))
    rows = -(-len(shown) // ncol)
    text = textwrap.fill(caption(seeds, set(handles) - set(seeds)), width=int(width * 72 * 0.9 / (fontsize * 0.6)),
                         break_on_hyphens=False)
    fig.legend([handles[n] for n in names], shown, loc="outside lower center", ncol=-(-len(shown) // rows),
               fontsize=fontsize, frameon=False, handlelength=3.5, title=text, title_fontsize=fontsize + 0.5,
               alignment="left")
    return rows, text.count("\n") + 1
