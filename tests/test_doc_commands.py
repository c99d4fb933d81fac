"""The commands the documents give name scripts and modules that exist: bench/ was split by purpose
(sweeps/, experiments/, perf/, the fault probe beside the tests), and a command that names a moved file fails only
when a user types it."""
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
