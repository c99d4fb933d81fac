"""What the machine is and can do: the dense bf16 peak that MFU is measured against (the trainer's progress line,
bench/perf/gpu_mfu.py; dense tensor-core figures from NVIDIA's data sheets, the 2:4-sparsity figures are twice these),
and the CPU's model name, which a run's record keeps beside the architecture."""
from __future__ import annotations

import platform
from pathlib import Path

import torch

PEAK_TFLOPS = (            # (substring of torch.cuda.get_device_name, dense bf16 TFLOP/s); first match wins
    ("H100 PCIe", 756.0),
    ("H100 NVL", 835.0),
    ("H100", 989.4),       # SXM5 ("NVIDIA H100 80GB HBM3")
    ("GH200", 989.4),
    ("H200", 989.4),       # SXM ("NVIDIA H200"); the H200 NVL is rated 835
    ("A100", 312.0),
)


def peak_tflops(name: str) -> float | None:
    """The dense bf16 peak of the card called `name`, or None for a card not in the table."""
    for key, value in PEAK_TFLOPS:
        if key.lower() in name.lower():
            return value
    return None


def device_peak_flops(device: torch.device) -> float | None:
    """FLOP/s of `device` at its dense bf16 peak; None on the CPU (no meaningful peak) or an unknown card."""
    if device.type != "cuda":
        return None
    peak = peak_tflops(torch.cuda.get_device_name(device))
    return peak * 1e12 if peak else None


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str | None:
    """The CPU's model name as Linux reports it ("AMD EPYC"), else platform.processor(), else None.
    platform.machine() ("x86_64") names only the architecture, so records made on two CPUs looked alike, though
    their kernels may round differently and run at another pace (LOG.md, 2026-12-05)."""
    try:
        for line in cpuinfo.read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and value.strip():
                return value.strip()
    except OSError:
        pass
    return platform.processor() or None
