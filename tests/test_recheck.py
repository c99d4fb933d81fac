"""analysis/recheck.py: a results folder is compared with what the command its Markdown names writes today, on
synthetic records in the real format: unchanged, it is the same (the verdict's link into REPRODUCE.md, relative to
--out and escaped in LaTeX, is not a difference: an underscore in the path once made it one); a table edited by
hand, or a file the command no longer writes, is named, exit 1; a folder that names no analysis command is refused
in one line, exit 2; the checked folder is never written."""
import signal
import subprocess
import sys
import time

import pytest

from analysis import recheck
from analysis.__main__ import main as analysis
from records import SCRATCH, write_run


def results(tmp_path):
    runs, out = tmp_path / "records", tmp_path / "results" / "x"
    for seed in (0, 1):
        write_run(runs, "scratch", SCRATCH, seed=seed)
        write_run(runs, "ligo", [(0, 10, 7.0), (2, 200, 4.0), (4, 400, 3.8)], seed=seed)       # saves 50%
    assert analysis(["--runs", str(runs), "--out", str(out), "--formats", "png"]) == 0
    return out


def snapshot(folder):
    return {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_a_folder_is_what_its_command_writes_and_a_stale_file_is_named(tmp_path, capsys):
    out = results(tmp_path)
    capsys.readouterr()
    verdict = next(out.glob("verdict-*.md"))
    assert "REPRODUCE.md#" in verdict.read_text()          # the link that moves with --out is there to normalise
    beside = sorted(out.parent.iterdir())
    assert recheck.main([str(out)]) == 0
    assert capsys.readouterr().out.strip() == f"{out}: what its command writes today"
    assert sorted(out.parent.iterdir()) == beside            # the regenerated sibling is gone

    lines = verdict.read_text().splitlines()
    row = next(i for i, li in enumerate(lines) if "LiGO" in li)
    lines[row] = lines[row].replace("LiGO", "LiGO (edited)", 1)
    verdict.write_text("\n".join(lines) + "\n")
    (out / "old-table.csv").write_text("method,saving\nligo,0.5\n")
    before = snapshot(out)
    assert recheck.main([str(out)]) == 1
    said = capsys.readouterr().out
    assert f"{verdict.name}: differs from line {row + 1}" in said
    assert "old-table.csv: committed, but its command no longer writes it" in said
    assert "2 file(s) differ" in said and "1 of 1 folder(s) stale" in said
    assert snapshot(out) == before


@pytest.mark.parametrize("written, said", [
    (None, "says which command wrote it"),
    ("Written by `python tools/make_tables.py --out {out}`.", "not an analysis command"),
    ("Written by `python -m analysis --runs r --out elsewhere`.", "not into this folder"),
])
def test_a_folder_naming_no_analysis_command_is_refused_in_one_line(written, said, tmp_path, capsys):
    out = tmp_path / "results" / "y"
    out.mkdir(parents=True)
    (out / "report.md").write_text("# A report\n\n" + (written.format(out=out) + "\n" if written else ""))
    before = snapshot(out)
    with pytest.raises(SystemExit) as exit_:
        recheck.main([str(out)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert said in err and len(err.splitlines()) == 1
    assert snapshot(out) == before


def test_a_killed_recheck_leaves_nothing_beside_the_checked_folder(tmp_path):
    """`kill` (SIGTERM) in the middle of the regenerating command: the command is killed and neither the hidden
    sibling nor the analysis's staging folder is left beside the checked folder (both once were)."""
    out = results(tmp_path)
    beside = sorted(out.parent.iterdir())
    check = subprocess.Popen([sys.executable, "-m", "analysis.recheck", str(out)], cwd=recheck.ROOT,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while sorted(out.parent.iterdir()) == beside and check.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)            # until the command has begun writing beside the folder
    assert check.poll() is None, "the recheck ended before it could be killed mid-command"
    check.send_signal(signal.SIGTERM)
    assert check.wait(timeout=60) == 128 + signal.SIGTERM
    assert sorted(out.parent.iterdir()) == beside
