"""The figures README.md states for its main job are the measured ones: a number typed by hand drifts, so the test
reads them from the benchmark's result file (bench/perf/budgets.py --only readme) and finds them in README."""
import json
from pathlib import Path

from tasks.scales import DEFAULT_SCALE

ROOT = Path(__file__).resolve().parents[1]


def readme_measurement() -> tuple[dict, dict]:
    result = json.loads((ROOT / "bench" / "results" / "budgets-cpu.json").read_text())
    (row,) = [r for r in result["rows"] if r["measure"] == "readme"]
    return result, row


def test_the_measurement_is_of_the_job_as_readme_gives_it():
    result, row = readme_measurement()
    assert result["scale"] == DEFAULT_SCALE and result["seed"] == 0
    assert row["command"] == "python run.py --method ligo --task bert_small_base"
    assert row["command"] in (ROOT / "README.md").read_text()


def test_the_measurement_trained_what_the_readme_job_trains_now():
    """A registry change to the README job's task (its regime budget) makes the committed measurement another job's:
    the measured runs' steps are the task's, the grown run's and the small model's pretraining's."""
    from tasks import get_task
    _, row = readme_measurement()
    task = get_task("bert_small_base", DEFAULT_SCALE)
    # a run is "<task>-<scale>/<label>-s<seed>", or the small model's "cache/small/<entry>"
    steps = {"small" if r["run"].startswith("cache/small/") else r["run"].split("/")[-1].rsplit("-s", 1)[0]: r["steps"]
             for r in row["runs"]}
    assert steps == {"ligo": task.recipe.steps, "small": task.small_recipe.steps}, steps


def test_readme_states_the_measured_time_and_peak_memory():
    _, row = readme_measurement()
    readme = (ROOT / "README.md").read_text()
    minutes, gigabytes = round(row["seconds"] / 60), round(row["peak_rss_mb"] / 1024, 1)
    assert f"**{minutes} min**" in readme, f"README should state {minutes} min (bench/results/budgets-cpu.json)"
    assert f"**{gigabytes} GB**" in readme, f"README should state {gigabytes} GB (bench/results/budgets-cpu.json)"
    over = row["seconds"] > row["target_s"]
    assert ("more than the 30 minutes" in readme) == over, "README must say whether the 30-minute target is met"
