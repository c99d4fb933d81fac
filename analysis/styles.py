"""How a run label looks on every figure: its method's colour (the one the method declares, analysis/names.py) and,
for a variant (`ligo-warmup0`), a line style and marker of its own, fixed by the variant's name so that it looks the
same on every figure and in every analysis. Reference lines (scratch final, small model final, unigram) are black or
grey, drawn by the figures themselves."""
from __future__ import annotations

import zlib

from analysis import names
from analysis.tables import label_key, method_of

# One colour per method on every figure, as the method declares it (analysis/names.py: records carry it; COLORS for
# records made before). Methods are colours; reference lines (scratch final, small model final, unigram) are black or
# grey without markers. A variant (ligo-warmup0) keeps its method's colour and takes its own line style and marker.
METHOD_STYLE = ("-", "o")
VARIANT_STYLES = ["--", ":", "-.", (0, (5, 1, 1, 1, 1, 1))]
VARIANT_MARKERS = ["s", "^", "D", "v", "P", "X", "*"]


def color(label: str):
    """The colour of a label's method (analysis/names.py): fixed by the method alone, the same on every figure."""
    return names.color(method_of(label))


def line_styles(labels) -> dict[str, tuple]:
    """label -> (line style, marker): a method solid with dots; a variant one of 4 styles x 7 markers (28 looks),
    picked by the variant's own name (`-warmup0`, a hash), so that it looks the same on every figure, on every
    method (StackBERT and LiGO under warm-up 0 alike) and in every analysis, whatever other runs it holds (numbered
    over the labels present, every variant's look shifted when one run was added). Two variants of one method whose
    names pick the same look: the later in the paper's order takes the next free one (distinct up to 28), the one
    case where another run moves a look (LiGO's 17 variants of the committed records: two such pairs)."""
    styles, taken = {}, {}
    looks = len(VARIANT_STYLES) * len(VARIANT_MARKERS)    # 4 and 7 coprime: look i is (style i % 4, marker i % 7)
    for label in sorted(set(labels), key=label_key):
        head = method_of(label)
        if label == head:
            styles[label] = METHOD_STYLE
            continue
        used = taken.setdefault(head, set())
        i = zlib.crc32(label[len(head):].encode()) % looks      # crc32: the same on every run (hash() is salted)
        while i in used and len(used) < looks:
            i = (i + 1) % looks
        used.add(i)
        styles[label] = (VARIANT_STYLES[i % len(VARIANT_STYLES)], VARIANT_MARKERS[i % len(VARIANT_MARKERS)])
    return styles
