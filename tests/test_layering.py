"""The house's one-way imports (DESIGN.md §1): models <- methods/tasks <- runs <- run.py, bench; analysis reads
only the run-record format. Checked on the source, every import statement including the ones inside functions
(cheap and exact): a lazy import is still a dependency."""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"models", "methods", "tasks", "runs", "analysis", "bench", "run"}
# what each layer may import of the others (methods share tasks' seeding helper, tasks.data.derive_seed)
ALLOWED = {"models": set(), "tasks": {"models"}, "methods": {"models", "tasks"},
           "runs": {"models", "tasks", "methods"}, "analysis": {"runs"}}


def imports(layer: str) -> dict[str, set[str]]:
    """module imported -> the files of `layer` that import it, for imports of the project's other packages."""
    found: dict[str, set[str]] = {}
    for path in (ROOT / layer).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            for name in names:
                if name.split(".")[0] in PACKAGES - {layer}:
                    found.setdefault(name, set()).add(path.relative_to(ROOT).as_posix())
    return found


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_layers_import_one_way(layer):
    wrong = {name: files for name, files in imports(layer).items() if name.split(".")[0] not in ALLOWED[layer]}
    assert not wrong, f"{layer}/ imports a layer above it: {wrong}"


def test_analysis_reads_only_the_record_format():
    """analysis may import runs.record (the format's one reader, stdlib only) and runs.signals (how a program stops
    on a signal, stdlib only, shared with run.py and the sweeps) and nothing else of runs/."""
    assert set(imports("analysis")) <= {"runs.record", "runs.signals"}, imports("analysis")
