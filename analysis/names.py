"""How the tables and figures show a method: its name, colour and row, as its records say.

A method declares them on its class (GrowthMethod.display_name, color, table_order; DESIGN.md §3) and every run
record carries them to the analysis, which imports nothing from methods/ (DESIGN.md §1): config.json's
`method.display` = {"name", "color", "order"}. analysis/load.py `learn`s them as it reads each record. Records made
before methods declared them carry none: for those, the tables below, which hold what the methods declare now
(tests/test_new_method.py checks they agree). A method neither learned nor listed prints as its registered name,
after the listed ones, in a colour picked by its name.
"""
from __future__ import annotations

import math

# the fallback: display names in the paper's row order (ORDER), figure colours (LiGO red, as it is the subject; its
# copy start in LiGO's family). "small" is no method: the label of the small model's pretraining record.
DISPLAY = {"scratch": "Scratch", "stackbert": "StackBERT", "interpolation": "Interpolation", "mslt": "MSLT",
           "ki": "KI", "net2net": "Net2Net", "bert2bert": "bert2BERT", "ligo": "LiGO", "ligo_copy": "LiGO (copy start)",
           "direct_copy": "Direct copy",
           "hypercloning": "HyperCloning", "g_stack": "G_stack", "lemon": "LEMON", "msg": "MSG",
           "small": "Small (scratch)"}
ORDER = list(DISPLAY)
COLORS = {"scratch": "tab:blue", "stackbert": "tab:orange", "interpolation": "tab:olive", "mslt": "tab:green",
          "ki": "tab:purple", "net2net": "tab:brown", "bert2bert": "tab:pink", "ligo": "tab:red",
          "ligo_copy": "darkred", "direct_copy": "tab:gray", "hypercloning": "teal", "g_stack": "goldenrod",
          "lemon": "navy", "msg": "tab:cyan"}
OTHER_COLORS = ["#637939", "#8c6d31", "#7b4173", "#393b79", "#e7969c", "#9c9ede"]   # methods without one (tab20b)

# method name -> what its records declare ({"name", "color", "order"}), learned as records are read
LEARNED: dict[str, dict] = {}


def learn(method: dict) -> None:
    """Remember how a record's method is shown (its config.json `method`), where the record says; the parts of the
    wrong JSON type are left to the fallback (analysis/load.py refuses such a record before it gets here)."""
    shown = method.get("display") if isinstance(method, dict) else None
    if not isinstance(shown, dict) or not isinstance(method.get("name"), str):
        return
    kept = {}
    if isinstance(shown.get("name"), str) and shown["name"]:
        kept["name"] = shown["name"]
    if isinstance(shown.get("color"), str) and shown["color"]:
        kept["color"] = shown["color"]
    order = shown.get("order")
    if order is None or (isinstance(order, (int, float)) and not isinstance(order, bool) and math.isfinite(order)):
        kept["order"] = order
    LEARNED[method["name"]] = kept


def name(method: str) -> str | None:
    """A method's display name (or the small model's), None where neither its records nor the fallback has one."""
    return LEARNED.get(method, {}).get("name") or DISPLAY.get(method)


def color(method: str) -> str:
    """A method's colour, the same on every figure: declared, else the fallback's, else picked by its name."""
    return (LEARNED.get(method, {}).get("color") or COLORS.get(method)
            or OTHER_COLORS[sum(map(ord, method)) % len(OTHER_COLORS)])


def rank(method: str) -> float:
    """A method's place among the rows: declared (None: after the listed ones), else its place in ORDER."""
    learned = LEARNED.get(method, {})
    if "order" in learned:
        return len(ORDER) if learned["order"] is None else learned["order"]
    return ORDER.index(method) if method in ORDER else len(ORDER)
