"""A new method is one file (DESIGN.md §3, "Adding a method, today"): its class says how tables and figures show it
and which main comparisons run it, methods/__init__.py finds the file without an import line, and every record
carries its display name and colour to the analysis, which imports nothing from methods/. Records made before carry
none: analysis/names.py's fallback tables stand in, and must say what the methods declare."""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from analysis import names
from methods import METHODS, get_method
from methods.ligo import Ligo
from methods.registry import MAIN_COMPARISONS, register_method

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("models", "methods", "tasks", "runs", "analysis", "bench")
SHIPPED = {n: cls for n, cls in METHODS.items() if cls.__module__.startswith("methods.")}


def test_the_fallback_tables_say_what_the_methods_declare():
    assert {n: cls.display_name for n, cls in SHIPPED.items()} == {n: names.DISPLAY[n] for n in SHIPPED}
    assert {n: cls.color for n, cls in SHIPPED.items()} == names.COLORS
    assert {n: cls.table_order for n, cls in SHIPPED.items()} == {n: names.ORDER.index(n) for n in SHIPPED}
    assert set(names.DISPLAY) - set(SHIPPED) == {"small"}          # the small model's label: no method
    for attribute in ("display_name", "color", "table_order"):     # two methods never look alike
        values = [getattr(cls, attribute) for cls in SHIPPED.values()]
        assert len(set(values)) == len(values), attribute


def test_the_main_comparisons_are_built_from_the_declarations():
    from bench.sweeps.registry import SWEEPS, declared
    for sweep in MAIN_COMPARISONS:
        assert sorted(e.method for e in SWEEPS[sweep].entries("mini")) == sorted(
            n for n, cls in METHODS.items() if sweep in cls.sweeps)
    # the paper's methods in each, the later four in the Llama pair's alone, in the tables' row order
    paper = ("scratch", "stackbert", "interpolation", "mslt", "ki", "net2net", "bert2bert", "ligo", "ligo_copy")
    assert all(declared(s) == paper for s in MAIN_COMPARISONS if s != "llama")
    assert declared("llama") == paper + ("hypercloning", "g_stack", "lemon", "msg")


def test_a_subclass_inherits_no_name_colour_or_sweeps_and_a_sweep_must_be_a_main_comparison():
    @register_method("nan_ligo_variant")
    class Variant(Ligo):
        pass
    try:
        assert Variant.presentation() == {"name": "nan_ligo_variant", "color": None, "order": None}
        assert Variant.sweeps == () and Ligo.presentation()["name"] == "LiGO"
    finally:
        METHODS.pop("nan_ligo_variant", None)
    for sweeps, error in ((("fit_steps",), ValueError), ("bert", TypeError)):
        with pytest.raises(error, match="nan_odd_sweeps"):
            register_method("nan_odd_sweeps")(type("Odd", (Ligo,), {"sweeps": sweeps}))
        assert "nan_odd_sweeps" not in METHODS


def test_the_record_carries_the_display_and_no_comparison_reads_it():
    from runs.preflight import comparable_method
    described = get_method("ligo_copy").describe()
    assert described["display"] == {"name": "LiGO (copy start)", "color": "darkred", "order": 8}
    assert comparable_method(described) == comparable_method({**described, "display": {"name": "renamed"}})


def test_a_record_s_display_wins_over_the_fallback(tmp_path, monkeypatch):
    from records import SCRATCH, write_run

    from analysis import load_runs
    from analysis.styles import color
    from analysis.tables import display, label_key
    monkeypatch.setattr(names, "LEARNED", {})
    shows(write_run(tmp_path, "nan_shown", SCRATCH), {"name": "Shown", "color": "olivedrab", "order": 4.5})
    write_run(tmp_path, "ligo", SCRATCH)                           # made before methods declared it: the fallback
    runs, problems = load_runs(tmp_path)
    assert len(runs) == 2 and not problems
    assert (display("nan_shown-fit10"), color("nan_shown"), display("ligo"), color("ligo")) == \
           ("Shown (fit10)", "olivedrab", "LiGO", "tab:red")
    assert sorted(["net2net", "nan_shown", "ki"], key=label_key) == ["ki", "nan_shown", "net2net"]
    shows(write_run(tmp_path, "nan_badly_shown", SCRATCH), {"name": 3})
    _, problems = load_runs(tmp_path)
    assert [p.message for p in problems] == ["config.json method.display.name is a number, not a string or null"]


def shows(run: Path, display: dict) -> None:
    """Give a synthetic record's method a `display`, as records made now carry it."""
    config = json.loads((run / "config.json").read_text())
    config["method"]["display"] = display
    (run / "config.json").write_text(json.dumps(config))


def readme_snippet() -> str:
    readme = (ROOT / "README.md").read_text()
    return re.search(r"# methods/repeat_top.py\n(.*?)```", readme, re.S).group(1)


def test_a_method_in_one_new_file_is_listed_swept_and_tabled(tmp_path):
    """README's example as a file of its own in a copy of the repository (never in the real methods/: parallel test
    processes, and a crashed test would leave it there): `run.py --list` finds it, its sweep runs it, and the
    analysis names it as it declares, from its records alone."""
    name = "one_file_top"
    code = readme_snippet().replace("repeat_top", name)
    shown = re.search(r'display_name = "([^"]+)"', code).group(1)
    sweep = re.search(r"sweeps = \(\"(\w+)\",\)", code).group(1)
    repo = tmp_path / "repo"
    for package in PACKAGES:
        shutil.copytree(ROOT / package, repo / package,
                        ignore=shutil.ignore_patterns("__pycache__", "out", "results"))
    shutil.copy2(ROOT / "run.py", repo / "run.py")
    (repo / "methods" / f"{name}.py").write_text(code)
    assert "import_module" in (repo / "methods" / "__init__.py").read_text()      # no import line was added
    env = {**os.environ, "PYTHONPATH": str(repo), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}

    def run(*args):
        done = subprocess.run([sys.executable, *args], cwd=repo, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    assert re.search(rf"^  {name}\s+Depth: the top small layer repeated", run("run.py", "--list"), re.M)
    records = tmp_path / "records"
    # --methods refuses a method its sweep does not hold: the run is the membership
    run("-m", "bench.sweeps", sweep, "--scale", "tiny", "--seeds", "0", "--methods", "scratch", name,
        "--out", str(records))
    (pair,) = records.iterdir()
    assert (pair / f"{name}-s0" / "summary.json").exists()
    out = run("-m", "analysis", "--runs", str(records), "--out", str(tmp_path / "results"))
    assert f"{shown} " in out                                                    # the terminal's savings line
    table = (tmp_path / "results" / f"savings-{pair.name}.md").read_text()
    assert re.search(rf"^\| {re.escape(shown)} ", table, re.M), table
    assert not (ROOT / "methods" / f"{name}.py").exists()
