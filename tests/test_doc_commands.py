"""The commands the documents give name scripts and modules that exist: bench/ was split by purpose
(sweeps/, experiments/, perf/, the fault probe beside the tests), and a command that names a moved file fails only
when a user types it. The run.py, sweep, probe and control commands go further: each is parsed by its program's own
parser and checked against the registries and the committed records (`refusal`), since a method renamed or a
default scale changed leaves a command that runs, and does something else."""
import functools
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ["README.md", "REPRODUCE.md", "DESIGN.md", "bench/README.md", "records/README.md"]
SCRIPT = re.compile(r"\bpython3? (?:-\S+ )*((?:bench|tests|analysis|runs)/[\w/]+\.(?:py|sh))")
BASH = re.compile(r"\bbash ((?:bench|\.ci)/[\w/]+(?:\.sh)?)")
MODULE = re.compile(r"\bpython3? -m ((?:bench|tests|analysis)(?:\.\w+)*)")


def commands(doc: str) -> list[tuple[str, str]]:
    text = (ROOT / doc).read_text()
    return ([("file", m) for m in SCRIPT.findall(text) + BASH.findall(text)]
            + [("module", m) for m in MODULE.findall(text)])


@pytest.mark.parametrize("doc", DOCS)
def test_every_command_names_a_script_or_module_that_exists(doc):
    found = commands(doc)
    missing = sorted({name for kind, name in found
                      if (kind == "file" and not (ROOT / name).is_file())
                      or (kind == "module" and importlib.util.find_spec(name) is None)})
    assert not missing, f"{doc} names what is not there: {missing}"


def test_the_documents_give_commands_to_check():
    """The patterns above match the documents' commands (an empty match would pass every document)."""
    found = {name for doc in DOCS for _, name in commands(doc)}
    assert {"bench/device_call.sh", "bench.sweeps", "bench/perf/budgets.py", "analysis"} <= found, found


LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)\s]*)?\)")


def test_every_relative_link_in_a_document_names_a_file_that_exists():
    """A Markdown link in any document of the tree (README, REPRODUCE, the results' tables and verdicts) to a path of
    the repository: a link to a result not yet generated reads as a finding that is not there."""
    docs = [p for p in ROOT.rglob("*.md")
            if not any(part.startswith(".") or part in ("node_modules", "runs") for part in p.relative_to(ROOT).parts)]
    links = [(doc, target) for doc in docs for target in LINK.findall(doc.read_text())
             if not target.startswith(("http:", "https:", "mailto:"))]
    assert len(links) > 50, "the link pattern matches the documents' links"
    broken = sorted(f"{doc.relative_to(ROOT)}: {target}" for doc, target in links if not (doc.parent / target).exists())
    assert not broken, broken


# The documents' run.py, sweep, probe and control commands, as a user copies them: from a fenced block, an indented
# block, or an inline `code` span (which may wrap across lines); a line ending in a backslash goes on.
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
SPAN = re.compile(r"`([^`]+)`")
PROGRAM = re.compile(r"""(['"]?)\bpython3? (?:-m bench\.sweeps|run\.py|-m bench\.experiments\.regime_probe|"""
                     r"""bench/experiments/small_continued\.py)(?![\w.])""")
# A placeholder the reader fills in (`--method M`, `--out R`, `<pair>`, `steps=S`, `...`): left out with its flag.
PLACEHOLDER = re.compile(r"\.\.\.|[<>]|^[A-Z][A-Z_0-9]*$|^[\w.]+=[A-Z]$")


def code_texts(text: str) -> list[str]:
    fenced = [line for block in FENCE.findall(text) for line in block.replace("\\\n", " ").splitlines()[1:-1]]
    rest = FENCE.sub("", text)
    indented = [line.strip() for line in rest.replace("\\\n", " ").splitlines()      # a code block's lines
                if line.startswith("    ") and "`" not in line and PROGRAM.search(line)]
    return fenced + indented + [" ".join(span.split()) for span in SPAN.findall(rest)]


def documented_commands(doc: str) -> list[str]:
    """Each command from its program to where the shell or the prose ends it (&&, ;, |, a comment, a redirect, a
    closing quote where the command was quoted, as in a device call's list)."""
    found = []
    for code in code_texts((ROOT / doc).read_text()):
        for m in PROGRAM.finditer(code):
            command = code[m.end(1):]
            if m.group(1) or "`" in command:     # quoted, or a span inside a code block (DESIGN's tree)
                command = re.split("[`" + m.group(1) + "]", command)[0]
            found.append(re.split(r"&&|;|\||\s#\s|\s>\s|\s2>", command)[0].strip())
    return found


def argv_of(command: str) -> tuple[str, list[str]]:
    import shlex
    tokens = shlex.split(command)
    program, words = (tokens[2], tokens[3:]) if tokens[1] == "-m" else (tokens[1], tokens[2:])
    argv: list[str] = []
    for word in words:
        if PLACEHOLDER.search(word):
            if argv and argv[-1].startswith("--"):
                argv.pop()                      # the flag whose value the reader fills in
            continue
        argv.append(word)
    return program, argv


@functools.cache
def methods_the_documents_write() -> set[str]:
    """Methods a document's own code registers (README's repeat_top): its commands run once a user has added them."""
    return {name for doc in DOCS for block in FENCE.findall((ROOT / doc).read_text())
            for name in re.findall(r"@register_method\(\"(\w+)\"\)", block)}


@functools.cache
def relabelled_from(folder: Path) -> dict[str, str]:
    """The run directories of a committed task folder renamed by bench/sweeps/relabel.py: old name -> new."""
    import json
    renamed = {}
    for config in folder.glob("*/config.json"):
        for move in json.loads(config.read_text()).get("relabelled", []):
            renamed[move["from"]] = move["to"]
    return renamed


def folders_not_held(root: str, folders: set[str]) -> str | None:
    """Where a command writes into a committed records root: None if the root holds one of the task folders it plans
    (a mini command without --scale mini plans regime's, which a mini root does not hold)."""
    if not (ROOT / root).is_dir() or any((ROOT / root / folder).is_dir() for folder in folders):
        return None
    return f"writes {', '.join(sorted(folders))}, which {root} does not hold (another scale?)"


def refusal(command: str) -> str | None:
    """Why the command as written would be refused or would do what the document does not mean; None if it stands:
    it parses as its program's command line, names sweeps, methods, run labels, tasks and --set keys that exist at
    its scale, and, where it writes into a committed records root, plans runs of the task folders that root holds
    (a command missing `--scale mini` writes regime-scale runs beside mini's)."""
    import contextlib
    import io
    program, argv = argv_of(command)
    from bench.experiments import regime_probe, small_continued
    from bench.sweeps import cli as sweeps
    import run
    parser = {"bench.sweeps": sweeps, "run.py": run, "bench.experiments.regime_probe": regime_probe,
              "bench/experiments/small_continued.py": small_continued}[program].parser()
    try:
        with contextlib.redirect_stderr(io.StringIO()) as said:
            args = parser.parse_args(argv)
    except SystemExit:
        return said.getvalue().strip()
    from runs.settings import split_eval_settings, split_item
    try:
        settings = tuple(split_item(item) for item in split_eval_settings(args.settings, evaluate_only=False)[0])
        if program in ("bench.experiments.regime_probe", "bench/experiments/small_continued.py"):
            from tasks import get_task
            names = [small_continued.task_seeds(entry, [])[0] for entry in getattr(args, "tasks", None) or []]
            for name in names + ([args.task] if getattr(args, "task", None) else []):
                small_continued.check_settings(get_task(name, args.scale), settings)
            if names and args.runs:                                      # the controls' root
                return folders_not_held(args.runs, {f"{name}_smallcont-{args.scale}" for name in names})
            return None
        if program == "bench.sweeps":
            if args.list or not args.names:
                return None
            from bench.sweeps.registry import plan
            todo = plan(args.names, args.scale, args.seeds or [0], args.methods, args.runs, args.tasks)
            for entry in {entry for entry, _ in todo}:
                try:
                    sweeps.build(entry, args.scale, settings)
                except LookupError:             # an entry whose method is not written: the sweep says so itself
                    pass
            if args.out and not args.dry_run and (ROOT / args.out).is_dir():
                root = ROOT / args.out
                if (why := folders_not_held(args.out, {f"{entry.task}-{args.scale}" for entry, _ in todo})):
                    return why
                for entry, seed in todo if args.runs or args.methods else ():   # the runs it names, as made
                    folder, run = f"{entry.task}-{args.scale}", f"{entry.name}-s{seed}"
                    if not (root / folder / run).exists() and run in relabelled_from(root / folder):
                        return (f"makes {folder}/{run}, a record since relabelled "
                                f"{relabelled_from(root / folder)[run]} (the command predates the rename)")
        elif not (args.list or args.evaluate) and args.method and args.task:
            from methods import METHODS, get_method
            from models.family import unknown
            from runs.settings import route
            from tasks import get_task
            if args.method in methods_the_documents_write():    # README's example of adding a method
                get_task(args.task, scale=args.scale)
                return None
            if args.method not in METHODS:
                return unknown("method", args.method, METHODS)
            task, options, _ = route(get_task(args.task, scale=args.scale), METHODS[args.method], settings)
            get_method(args.method, task=task, **options)
    except (KeyError, ValueError, TypeError) as e:
        return f"{type(e).__name__}: {e}"
    return None


def test_the_documents_give_run_and_sweep_commands_to_check():
    """The extraction finds the commands (an empty list would pass every document), one of them quoted and wrapped."""
    found = {doc: documented_commands(doc) for doc in DOCS}
    assert "python run.py --method ligo --task bert_small_base" in found["README.md"]
    assert sum(map(len, found.values())) > 80, {doc: len(c) for doc, c in found.items()}
    assert any(c.startswith("python3 -m bench.sweeps") and c.endswith("--prune") for c in found["bench/README.md"])
    programs = {argv_of(c)[0] for commands in found.values() for c in commands}
    assert programs == {"run.py", "bench.sweeps", "bench.experiments.regime_probe",
                        "bench/experiments/small_continued.py"}, programs


def test_refusal_catches_what_a_user_would_hit():
    """The check itself: each kind of drift it is there for is named."""
    assert refusal("python -m bench.sweeps recipes --runs ligo_official --seeds 0 --out records/mini") \
        and "ligo_official" in refusal("python -m bench.sweeps recipes --runs ligo_official --seeds 0 --out x")
    assert "does not hold" in refusal("python -m bench.sweeps gpt2 --seeds 0 1 --out records/mini --prune")
    # deit-weak's copy-start records were ligo-s* before the rename: `--methods ligo` there now means another method
    assert "relabelled ligo_copy-s0" in refusal("python -m bench.sweeps deit --scale mini --methods ligo --seeds 0 "
                                                "--out records/deit-weak/x2")
    assert refusal("python -m bench.sweeps gpt2 --scale mini --seeds 0 1 --out records/mini --prune") is None
    assert "no_such_key" in refusal("python run.py --method ligo --task bert_small_base --set no_such_key=1")
    assert refusal("python run.py --method ligo --task bert_small_base --frobnicate") is not None
    assert refusal("python run.py --method M --task bert_small_large --steps 0") is None    # M: the reader's
    assert "does not hold" in refusal("python bench/experiments/small_continued.py --tasks deit_s_b:0,1 --runs "
                                      "records/regime-control --train-only")          # regime's controls, at mini
    assert "no_such_field" in refusal("python -m bench.experiments.regime_probe bert_small_base --scale regime "
                                      "--set small.no_such_field=3 --out x")


@pytest.mark.parametrize("doc", DOCS)
def test_every_run_and_sweep_command_of_a_document_stands(doc):
    """A command a document gives is code users run: names renamed since (a method, a run label), a scale the
    default no longer is, or a --set key that went are caught here, not by the user who types it."""
    bad = [f"{command}\n    -> {why}" for command in documented_commands(doc) if (why := refusal(command))]
    assert not bad, f"{doc}:\n" + "\n".join(bad)
