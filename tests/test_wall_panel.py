"""A wall-time panel compares runs made on one device and thread count (scratch's): a run made elsewhere is not
drawn, and the panel's title names it (issue 62 item 9: runs at one and two threads had shared an axis)."""
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from records import SCRATCH, write_run  # noqa: E402

from analysis import curves_frame, load_runs  # noqa: E402
from analysis.figures import Panel, draw_panel  # noqa: E402


def made_on(run_dir, device: str, threads: int) -> None:
    config = json.loads((run_dir / "config.json").read_text())
    config["environment"] = {"device_name": device, "threads": threads}
    (run_dir / "config.json").write_text(json.dumps(config))


def test_a_run_made_on_another_machine_is_named_not_drawn_on_the_wall_axis(tmp_path):
    made_on(write_run(tmp_path, "scratch", SCRATCH), "cpu-x", 1)
    made_on(write_run(tmp_path, "ligo", [(0, 0, 9.0), (1, 100, 5.0), (2, 200, 4.0)]), "cpu-x", 1)
    made_on(write_run(tmp_path, "stackbert", [(0, 0, 9.0), (1, 100, 6.0), (2, 300, 4.0)]), "cpu-x", 2)
    runs, _ = load_runs(tmp_path)
    curves = curves_frame(runs)
    drawn = {}
    for x in ("wall", "flops"):
        fig, ax = plt.subplots()
        draw_panel(ax, curves, Panel(("bert_small_base",), x), "mini")
        drawn[x] = ({line.get_label() for line in ax.lines}, ax.get_title())
        plt.close(fig)
    lines, title = drawn["wall"]
    assert "LiGO" in lines and "StackBERT" not in lines
    assert "not drawn (made on another device or thread count than scratch): StackBERT s0" in title
    lines, title = drawn["flops"]                 # FLOPs do not depend on the machine: every run is drawn
    assert {"LiGO", "StackBERT"} <= lines and "not drawn" not in title
