"""Every `DESIGN.md §N` citation in the project's code and docs names a section that DESIGN.md has, and where it
quotes a passage (`DESIGN.md §N, "Passage"` or `DESIGN §N "Passage"`) that section says it: a renumbering or a
rewritten section cannot leave a citation pointing at nothing. Read from the source text (cheap and exact)."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DESIGN = ROOT / "DESIGN.md"
# not the project's own prose: environments, version control, generated tables, committed records
SKIPPED = {"records", "results"}
SECTION = re.compile(r"^## (\d+)\. ", re.MULTILINE)
# DESIGN.md or DESIGN, then § and the number (a line break and a comment's # allowed in between), then optionally a
# passage the section must hold, in double quotes or backticks
CITATION = re.compile(r"DESIGN(?:\.md)?[\s#]*§\s*(\d+)(?:,?[\s#]*(?:\"([^\"\n]+)\"|`([^`\n]+)`))?")


def sections() -> dict[int, str]:
    """Section number -> its text (heading to the next heading), whitespace and emphasis normalised."""
    text = DESIGN.read_text()
    heads = list(SECTION.finditer(text))
    return {int(m.group(1)): " ".join(text[m.start():(heads[i + 1].start() if i + 1 < len(heads) else len(text))]
                                      .replace("*", "").split())
            for i, m in enumerate(heads)}


def project_files():
    for path in sorted(ROOT.rglob("*")):
        parts = path.relative_to(ROOT).parts
        if (path.suffix in (".py", ".md") and path.is_file() and parts[0] not in SKIPPED
                and not any(p.startswith(".") or p.endswith(".egg-info") for p in parts)):
            yield path


def citations() -> list[tuple[str, int, str | None]]:
    """(file:line, section number, quoted passage or None) for every citation."""
    found = []
    for path in project_files():
        text = path.read_text(errors="replace")
        for m in CITATION.finditer(text):
            where = f"{path.relative_to(ROOT).as_posix()}:{text.count(chr(10), 0, m.start()) + 1}"
            found.append((where, int(m.group(1)), m.group(2) or m.group(3)))
    return found


def test_design_sections_are_numbered_in_order():
    assert list(sections()) == list(range(1, len(sections()) + 1)), list(sections())


def test_every_citation_names_a_section_that_exists():
    found, have = citations(), sections()
    assert len(found) > 10, "the citation pattern finds (almost) nothing: is it still the one the code uses?"
    dangling = [f"{where}: §{n}" for where, n, _ in found if n not in have]
    assert not dangling, f"DESIGN.md has sections {sorted(have)}; cited: {dangling}"


def test_a_quoted_passage_is_in_the_section_cited():
    have = sections()
    missing = [f"{where}: §{n} {quote!r}" for where, n, quote in citations()
               if quote and n in have and " ".join(quote.split()).lower() not in have[n].lower()]
    assert not missing, missing


def test_the_house_style_names_every_module_past_its_size():
    """DESIGN.md §7 lists the modules past its 400 lines (test files aside): a module that grows past them, or one
    split below them, changes the list, so the design doc never claims a house smaller, or larger, than it is."""
    limit = 400
    long_modules = {path.relative_to(ROOT).as_posix() for path in project_files()
                    if path.suffix == ".py" and path.relative_to(ROOT).parts[0] != "tests"
                    and len(path.read_text().splitlines()) > limit}
    listed = re.search(r"The modules past 400 lines now \(.*?\): (.+?)\. Split", sections()[7], re.S)
    assert listed, "DESIGN.md §7 no longer lists the modules past 400 lines"
    named = " ".join(listed.group(1).split())
    assert (set() if named == "none" else set(named.split(", "))) == long_modules
