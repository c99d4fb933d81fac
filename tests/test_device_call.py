"""bench/device_call.sh, the one command a lent GPU machine runs: commands side by side under one time limit, and
back only what they wrote under records/ and bench/results/, without weights. Run on a copy of the script in a
temporary repository, so that nothing lands in this one."""
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "device_call.sh"


@pytest.fixture
def repo(tmp_path):
    (tmp_path / "bench").mkdir()
    shutil.copy(SCRIPT, tmp_path / "bench" / "device_call.sh")
    (tmp_path / "records" / "old").mkdir(parents=True)
    (tmp_path / "records" / "old" / "summary.json").write_text("{}")        # there before the call: not sent back
    (tmp_path / "out").mkdir()
    return tmp_path


def call(repo, *args):
    return subprocess.run(["bash", str(repo / "bench" / "device_call.sh"), *args], capture_output=True, text=True,
                          env={"OUT": str(repo / "out"), "PATH": "/usr/bin:/bin"}, timeout=60)


def test_sends_back_what_the_commands_wrote_without_weights_and_stops_them_at_the_limit(repo):
    done = call(repo, "2", "mkdir -p records/new/model && echo '{}' > records/new/summary.json"
                " && echo w > records/new/w.safetensors && echo c > records/new/model/config.json"
                " && echo r > records/new/.lock", "sleep 60")
    assert done.returncode == 1, done.stderr                          # one command was stopped: not a clean call
    assert "command 2 exited 124 (stopped at the limit)" in done.stdout
    with tarfile.open(repo / "out" / "written.tgz") as tar:
        assert tar.getnames() == ["records/new/summary.json"]
    assert (repo / "out" / "logs" / "1.cmd").read_text().startswith("mkdir -p records/new")


@pytest.mark.parametrize("args,needle", [(["abc", "true"], "SECONDS must be a positive whole number, got 'abc'"),
                                         (["0", "true"], "got '0'"), (["10"], "no command to run")])
def test_bad_input_is_one_line_and_writes_nothing(repo, args, needle):
    done = call(repo, *args)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and needle in done.stderr, done.stderr
    assert not any((repo / "out").iterdir())
