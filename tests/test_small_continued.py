"""bench/small_continued.py: the no-growth control (the pair's small model trained on under the large recipe).
Its committed result recomputes from the committed records, and its task grows nothing."""
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.small_continued import compare, continued_task, run_dir  # noqa: E402
from tasks import get_task  # noqa: E402

RESULTS = sorted((ROOT / "bench" / "results").glob("small_continued*.json"))


def test_the_continued_task_trains_the_small_model_under_the_large_recipe():
    task = get_task("deit_s_b", "mini")
    cont = continued_task(task)
    assert cont.large == cont.small == task.small and cont.recipe == task.recipe
    assert cont.small_recipe == task.small_recipe          # the same cached small model as the growth runs
    assert run_dir(Path("r"), task, 1) == Path("r/deit_s_b_smallcont-mini/direct_copy-s1")


@pytest.mark.parametrize("result", RESULTS, ids=[r.stem for r in RESULTS])
def test_the_committed_result_recomputes_from_the_records(result):
    committed = json.loads(result.read_text())
    assert committed["rows"]
    for row in committed["rows"]:
        task = get_task(row["task"], committed["scale"])
        again = compare(task, row["seed"], ROOT / row["record"], ROOT / committed["records"])
        assert again == row
        assert again["reached"] == (again["saving_flops"] is not None)
