"""A committed benchmark figure names the command that made it, typed as a user types it again from the
repository's root (bench/result_file.py)."""
import importlib.machinery
import json
import sys
import types

from bench.result_file import REPO, write_result


def main_module(spec_name=None):
    module = types.ModuleType("__main__")
    module.__spec__ = importlib.machinery.ModuleSpec(spec_name, None) if spec_name else None
    return module


def written_command(monkeypatch, tmp_path, main, argv):
    monkeypatch.setitem(sys.modules, "__main__", main)
    monkeypatch.setattr(sys, "argv", argv)
    return json.loads(write_result(tmp_path / "r.json", {"rows": []}).read_text())["command"]


def test_a_module_run_with_dash_m_is_recorded_as_such_not_as_its_files_absolute_path(monkeypatch, tmp_path):
    argv = [str(REPO / "bench" / "experiments" / "regime_probe.py"), "--table", "records/probes/bert-2x"]
    command = written_command(monkeypatch, tmp_path, main_module("bench.experiments.regime_probe"), argv)
    assert command == "python -m bench.experiments.regime_probe --table records/probes/bert-2x"


def test_a_package_run_with_dash_m_is_recorded_by_the_package_name(monkeypatch, tmp_path):
    argv = [str(REPO / "analysis" / "__main__.py"), "--runs", "records/regime"]
    assert written_command(monkeypatch, tmp_path, main_module("analysis.__main__"), argv) == \
        "python -m analysis --runs records/regime"


def test_a_script_in_the_repository_is_recorded_by_its_path_from_the_root(monkeypatch, tmp_path):
    argv = [str(REPO / "bench" / "perf" / "budgets.py"), "--only", "readme"]
    assert written_command(monkeypatch, tmp_path, main_module(), argv) == \
        "python bench/perf/budgets.py --only readme"
