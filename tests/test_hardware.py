"""What a record says of the machine it ran on (runs/hardware.py, runs/experiment.py environment)."""
import platform

import torch

from runs.experiment import environment
from runs.hardware import cpu_model

CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 7B13
flags\t\t: fpu vme

processor\t: 1
model name\t: AMD EPYC 7B13
"""


def test_cpu_model_is_linux_model_name(tmp_path):
    (tmp_path / "cpuinfo").write_text(CPUINFO)
    assert cpu_model(tmp_path / "cpuinfo") == "AMD EPYC 7B13"


def test_cpu_model_falls_back_where_linux_does_not_say(tmp_path, monkeypatch):
    """No /proc/cpuinfo (macOS, Windows) or one without a model name (some ARM kernels): the platform's processor
    string, and None rather than an empty name where that is empty too."""
    (tmp_path / "cpuinfo").write_text("processor\t: 0\nBogoMIPS\t: 50.00\n")
    monkeypatch.setattr(platform, "processor", lambda: "arm")
    assert cpu_model(tmp_path / "cpuinfo") == "arm"
    assert cpu_model(tmp_path / "absent") == "arm"
    monkeypatch.setattr(platform, "processor", lambda: "")
    assert cpu_model(tmp_path / "absent") is None


def test_a_records_environment_names_the_cpu_beside_the_architecture():
    env = environment(torch.device("cpu"))
    assert env["cpu"] == cpu_model()
    assert env["device_name"] and env["threads"] == torch.get_num_threads()
