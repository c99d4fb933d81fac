"""The house's one-way imports (DESIGN.md §1): models <- methods/tasks <- runs <- run.py, bench; analysis reads
only the run-record format; no module reaches itself through imports; bench imports the packages, not run.py.
Checked on the source, every import statement including the ones inside functions (cheap and exact): a lazy import
is still a dependency."""
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
    """analysis may import runs.record (the format's one reader), runs.atomic (the record's atomic writes, whose
    rule for a killed writer's leftovers the analysis's staging uses too) and runs.signals (how a program stops on
    a signal, shared with run.py and the sweeps), all stdlib only, and nothing else of runs/."""
    assert set(imports("analysis")) <= {"runs.record", "runs.atomic", "runs.signals"}, imports("analysis")


CHECKED = ("models", "methods", "tasks", "runs", "analysis", "bench")


def module_imports() -> dict[str, dict[str, int]]:
    """module -> {module of the project it imports: the line}, for every module of CHECKED, from every import
    statement (inside functions too; relative ones resolved). `from a.b import c` is an import of the module a.b.c
    where there is one, else of a.b; a package imported as the parent of the module named (`a` of `a.b`) is not
    counted, since Python finds a parent already importing (or imported) without running it again."""
    files = {}
    for layer in CHECKED:
        for path in (ROOT / layer).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = {}
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = (".".join(package.split(".")[:len(package.split(".")) - node.level + 1]
                                 + ([node.module] if node.module else [])) if node.level else node.module)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
            else:
                continue
            for target in targets:
                if target in files:
                    found.setdefault(target, node.lineno)
        graph[name] = found
    return graph


def import_cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (or a module importing itself), each as one
    cycle through it: [a, b, ..., a]."""
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(v):                         # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph[v]:
                cycles.append(one_cycle(graph, component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def one_cycle(graph, component: set[str]) -> list[str]:
    """A shortest path from the component's first module back to itself, inside the component."""
    start = min(component)
    paths, seen = [[start]], set()
    while paths:
        path = paths.pop(0)
        for w in sorted(graph[path[-1]]):
            if w == start:
                return path + [start]
            if w in component and w not in seen:
                seen.add(w)
                paths.append(path + [w])
    return [start]


def test_no_import_cycle():
    """No module of models/ methods/ tasks/ runs/ analysis/ bench/ reaches itself through imports, lazy ones included:
    a lazy import that closes a circle only hides it (the two modules cannot be understood, tested or moved
    apart), and a package's __init__ that imports modules importing it back is one too (DESIGN.md §1)."""
    graph = module_imports()
    cycles = import_cycles(graph)
    said = ["  " + " -> ".join(f"{a} (line {graph[a][b]})" for a, b in zip(c, c[1:])) + f" -> {c[-1]}"
            for c in cycles]
    assert not cycles, "import cycles:\n" + "\n".join(said)


def test_the_cycle_check_finds_a_lazy_cycle():
    """The check itself: a circle closed by an import inside a function, and one through a package, are found."""
    graph = {"a.x": {"a.y": 1}, "a.y": {"a.x": 9}, "b": {"b.s": 3}, "b.s": {"b": 1}, "c": {"a.x": 2}}
    assert sorted(import_cycles(graph)) == [["a.x", "a.y", "a.x"], ["b", "b.s", "b"]]


def test_bench_imports_packages_not_the_entry_script():
    """bench/ is a client of the packages, which the install (`pip install -e .`) makes importable: no bench file
    imports run.py (the command-line helpers every CLI shares are runs/cli.py's), and no bench script or test puts
    the repository on sys.path, so `python bench/X.py` and `python -m bench.X` import the same modules."""
    wrong = []
    for path in sorted((ROOT / "bench").glob("*.py")) + sorted((ROOT / "tests").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            where = f"{path.relative_to(ROOT).as_posix()}:{getattr(node, 'lineno', 0)}"
            if path.parent.name == "bench" and (
                    isinstance(node, ast.Import) and any(a.name == "run" for a in node.names)
                    or isinstance(node, ast.ImportFrom) and node.module == "run" and node.level == 0):
                wrong.append(f"{where} imports run.py")
            if (isinstance(node, ast.Attribute) and node.attr in ("insert", "append")
                    and isinstance(node.value, ast.Attribute) and node.value.attr == "path"
                    and isinstance(node.value.value, ast.Name) and node.value.value.id == "sys"):
                wrong.append(f"{where} edits sys.path")
    assert not wrong, wrong
