"""GPU-instance ids, MIG-device order and UUIDs, checked against real nvidia-smi output.

Rule under test (``migscope.sim._ids``): ``gi_id = memory_slices // size - 1 + start // size``
(a per-profile base plus a position index). The recordings are in
``tests/fixtures/nvidia-smi/`` (verbatim copies of ``reference/samples/``).
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

from simhelpers import FIXTURES, mig_devices, simulate, started

from migscope.sim._ids import gi_id_for

SMI = FIXTURES / "nvidia-smi"
_LGI_ROW = re.compile(r"\|\s+0\s+MIG (\S+)\s+(\d+)\s+(\d+)\s+(\d+):(\d+)\s+\|")
_L_ROW = re.compile(r"MIG (\S+)\s+Device\s+(\d+): \(UUID: MIG-GPU-[0-9a-f-]+/(\d+)/(\d+)\)")


def _lgi(path: Path) -> list[tuple[str, int, int, int]]:
    """``(profile, profile id, GI id, start)`` rows of an ``nvidia-smi mig -lgi`` table."""
    return [
        (name, int(pid), int(gi), int(start))
        for name, pid, gi, start, _ in _LGI_ROW.findall(path.read_text())
    ]


def _enumerate(model: str, layout: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """``(profile, GI id)`` of each MIG device, in MIG-device index order."""
    instances = [{"profile": name, "start": start} for name, start in layout]
    _, nvml = started({"model": model, "mig": True, "instances": instances})
    gpu = nvml.nvmlDeviceGetHandleByIndex(0)
    return [
        (nvml.nvmlDeviceGetName(h).rsplit(" ", 1)[1], nvml.nvmlDeviceGetGpuInstanceId(h))
        for h in mig_devices(nvml, gpu)
    ]


def test_h100_pcie_3g_and_three_1g() -> None:
    """H100 PCIe after ``-cgi 9,19,19,19``: 3g.40gb @4 is GI 2, 1g.10gb @0,1,2 are GI 7-9,
    and ``nvidia-smi -L`` lists the 3g first (ascending GI id)."""
    rows = _lgi(SMI / "nvidia-smi-h100-pcie-80gb-lgi.txt")
    assert len(rows) == 4
    listed = _enumerate("H100-PCIE-80GB", [(name, start) for name, _, _, start in rows])
    assert listed == sorted(((name, gi) for name, _, gi, _ in rows), key=lambda r: r[1])
    order = re.findall(r"MIG (\S+)\s+Device", (SMI / "nvidia-smi-h100-pcie-80gb-L.txt").read_text())
    assert [name for name, _ in listed] == order


def test_a100_seven_1g() -> None:
    """A100-SXM4-40GB with seven 1g.5gb: GI 7..13 in device order 0..6 (``-L`` output)."""
    recorded = _L_ROW.findall((SMI / "nvidia-smi-a100-sxm4-40gb-L.txt").read_text())
    assert len(recorded) == 7
    listed = _enumerate("A100-40GB", [("1g.5gb", s) for s in range(7)])
    assert listed == [(name, int(gi)) for name, _, gi, _ in recorded]
    assert {ci for *_, ci in recorded} == {"0"}


def test_a100_3g_2g_1g() -> None:
    """A100-SXM4-40GB after ``-cgi 9,14,19``: GI 2, 3, 9 in ``-L`` order.

    ``-L`` shows no placements; NVIDIA's MIG user guide shows this layout as 3g @4:4,
    2g @0:2, 1g @2:1. Those are the only placements of the three profiles whose ids under
    the rule are 2, 3 and 9, and the simulator then lists them in the recorded order.
    """
    recorded = [
        (name, int(gi))
        for name, _, gi, _ in _L_ROW.findall(
            (SMI / "nvidia-smi-a100-sxm4-40gb-L-mixed.txt").read_text()
        )
    ]
    assert recorded == [("3g.20gb", 2), ("2g.10gb", 3), ("1g.5gb", 9)]
    matching = [
        (s3, s2, s1)
        for s3, s2, s1 in itertools.product((0, 4), (0, 2, 4), range(7))
        if (gi_id_for(8, s3, 4), gi_id_for(8, s2, 2), gi_id_for(8, s1, 1)) == (2, 3, 9)
    ]
    assert matching == [(4, 0, 2)]
    assert _enumerate("A100-40GB", [("3g.20gb", 4), ("2g.10gb", 0), ("1g.5gb", 2)]) == recorded


def test_a30_four_1g() -> None:
    """A30 (4 memory slices), four 1g.6gb at placements 0..3: GI 3..6 (``-lgi``)."""
    rows = _lgi(SMI / "nvidia-smi-a30-lgi.txt")
    assert [(gi, start) for _, _, gi, start in rows] == [(3, 0), (4, 1), (5, 2), (6, 3)]
    listed = _enumerate("A30-24GB", [(name, start) for name, _, _, start in rows])
    assert listed == [(name, gi) for name, _, gi, _ in rows]


def test_uuid_formats_and_seed_determinism() -> None:
    """GPU UUIDs are ``GPU-`` + 8-4-4-4-12 hex; MIG UUIDs are R470+ ``MIG-<uuid>`` with the
    version nibble 5 real ones show (``nvidia-smi-h100-pcie-80gb-L.txt``). Same seed, same
    UUIDs; another seed, other UUIDs."""
    spec = {"model": "H200", "mig": True, "instances": [{"profile": "7g.141gb"}]}

    def uuids(seed: int) -> list[str]:
        node = simulate(spec, seed=seed).node("node-a")
        return [node.gpus[0].uuid, *(i.uuid for i in node.instances())]

    first = uuids(1)
    assert re.fullmatch(
        r"GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", first[0]
    )
    assert re.fullmatch(
        r"MIG-[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", first[1]
    )
    real = re.findall(
        r"UUID: (MIG-[0-9a-f-]+)\)", (SMI / "nvidia-smi-h100-pcie-80gb-L.txt").read_text()
    )
    assert real
    assert all(u[18] == "5" == first[1][18] for u in real)
    assert uuids(1) == first
    assert set(uuids(2)).isdisjoint(first)


def test_scenario_uuid_and_bus_id_are_kept() -> None:
    """A UUID or bus id given in the scenario is what NVML reports."""
    uuid = "GPU-7cd6d4d6-9fa8-13be-3c42-09a1b2280a02"
    _, nvml = started({"model": "H100 PCIe", "uuid": uuid, "pci_bus_id": "00000000:3B:00.0"})
    gpu = nvml.nvmlDeviceGetHandleByUUID(uuid)
    assert nvml.nvmlDeviceGetPciInfo(gpu).busId == "00000000:3B:00.0"
    assert nvml.nvmlDeviceGetName(gpu) == "NVIDIA H100 PCIe"
    assert nvml.nvmlDeviceGetUUID(nvml.nvmlDeviceGetHandleByPciBusId("0000:3b:00.0")) == uuid
