"""Record ``--dcgm-compat`` on a real GPU: the exporter's dcgm-exporter series from real NVML.

Read-only: NVML reads (the production ``NvmlBackend`` + ``Sampler``, two cycles one second
apart) and ``nvidia-smi --query-gpu`` for the figures to compare with; nothing on the GPU is
changed. Writes, to OUT_DIR:

- ``h200-dcgm-compat.prom``: the ``DCGM_FI_*`` part of one rendered exposition (GPU UUID masked);
- ``h200-dcgm-compat.json``: nvidia-smi's memory.used/free/reserved/total (MiB), pci.bus_id,
  driver and power beside the exposition's values, for docs/hardware/README.md.

Run from the repository root: ``PYTHONPATH=core/src:exporter/src python3
bench/h200_dcgm_compat.py OUT_DIR`` (``--dry-run`` uses the simulator instead of NVML).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from migscope.exporter._backends.nvml import NvmlBackend
from migscope.exporter._collector import SnapshotCollector
from migscope.exporter._dcgm_compat import DcgmExposition
from migscope.exporter._sampler import Sampler

MASK = "GPU-00000000-0000-0000-0000-000000000000"
SMI_FIELDS = (
    "index,pci.bus_id,driver_version,memory.total,memory.reserved,memory.used,memory.free,"
    "power.draw,mig.mode.current"
)


def mask(text: str) -> str:
    return re.sub(r"GPU-[0-9a-f-]{36}", MASK, text)


def nvidia_smi() -> list[dict[str, str]]:
    """nvidia-smi's own figures (MiB, W), one dict per GPU; empty without nvidia-smi."""
    try:
        done = subprocess.run(
            ["nvidia-smi", f"--query-gpu={SMI_FIELDS}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    names = SMI_FIELDS.split(",")
    return [
        dict(zip(names, (v.strip() for v in line.split(",")), strict=True))
        for line in done.stdout.splitlines()
        if line.strip()
    ]


def main(argv: list[str]) -> None:
    dry = "--dry-run" in argv
    args = [a for a in argv if a != "--dry-run"]
    out = Path(args[0] if args else ".")
    out.mkdir(parents=True, exist_ok=True)
    if dry:
        from migscope.sim import SimClock, Simulation

        scenario = {"seed": 1, "nodes": [{"name": "n", "gpus": [{"model": "H200", "mig": False}]}]}
        nvml: Any = Simulation.from_scenario(scenario, clock=SimClock(realtime=True)).node("n").nvml
    else:
        import pynvml

        nvml = pynvml
    backend = NvmlBackend(nvml, gpm_interval=1.0)
    sampler = Sampler(backend, interval=1.0)
    sampler.run_once()
    time.sleep(1.0)
    snap = sampler.run_once()
    smi = [] if dry else nvidia_smi()
    # A fixed host name: the lent machine's own is not published (the label's fallback to the
    # OS host name is tested in tests/exporter/test_dcgm_compat.py).
    exposition = DcgmExposition(hostname="h200-node")
    collector = SnapshotCollector(
        snapshot=lambda: snap, backend="nvml", version="bench", dcgm=exposition
    )
    text = collector.render_text().decode()
    backend.close()
    dcgm = text[text.index("# HELP DCGM_") :]
    (out / "h200-dcgm-compat.prom").write_text(mask(dcgm))
    readings = [
        {
            "index": g.index,
            "pci_bus_id": g.pci_bus_id,
            "mig_enabled": g.mig_enabled,
            "memory_total_bytes": g.memory_total_bytes,
            "memory_used_bytes": g.memory_used_bytes,
            "memory_reserved_bytes": g.memory_reserved_bytes,
            "power_watts": g.power_watts,
        }
        for g in snap.gpus
    ]
    report = {"driver": snap.driver_version, "readings": readings, "nvidia_smi": smi}
    (out / "h200-dcgm-compat.json").write_text(json.dumps(report, indent=1) + "\n")
    print(mask(dcgm))
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
