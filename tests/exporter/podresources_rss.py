"""What one large kubelet PodResources answer costs a serving exporter: peak RSS, exposition size.

Not a test (pytest does not collect it): a measurement quoted in docs/pod-attribution.md. It
starts the fake kubelet of ``tests/support/kubelet.py`` in this process and a real
``migscope exporter`` process (sim backend, 8 H100 x 7 slices, pods from the kubelet), lets the
exporter take one ``List`` answer of the chosen shape, scrapes ``/metrics`` and reads the
exporter's ``VmRSS``/``VmHWM`` from ``/proc``. Shapes, each filled to about ``--mib`` MiB on the
wire:

* ``one-device``: one container per pod, every one holding a replica of the same MIG slice
  (a device "listed by 100k containers");
* ``distinct-ids``: one container listing as many distinct GPU IDs as fit;
* ``crowded``: one container per pod, holding one of 300 GPU IDs in turn (many devices,
  each held by hundreds of containers: the most owners the caps let the exporter hold);
* ``small``: the node's 56 ordinary pods (the baseline).

Run: ``.venv/bin/python tests/exporter/podresources_rss.py --shape one-device --mib 15.9``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from support.kubelet import FakeKubelet, make_pod

from migscope.exporter._podresources import api_pb2

_MIG_RESOURCE = "nvidia.com/mig-1g.10gb"


def _scenario(directory: Path) -> Path:
    gpus = [
        {"model": "H100-80GB", "mig": True, "instances": [{"profile": "1g.10gb"}] * 7}
        for _ in range(8)
    ]
    path = directory / "node.yaml"
    path.write_text(yaml.safe_dump({"seed": 5, "nodes": [{"name": "n", "gpus": gpus}]}))
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _memory_mib(pid: int) -> dict[str, float]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = round(int(value.split()[0]) / 1024, 1)
    return out


def _get(port: int, path: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def _mig_uuids(text: str) -> list[str]:
    found = []
    for line in text.splitlines():
        if line.startswith("migscope_mig_info{"):
            found.append(line.split('mig_uuid="', 1)[1].split('"', 1)[0])
    return found


def _answer(shape: str, mib: float, migs: list[str]) -> list[api_pb2.PodResources]:
    budget = int(mib * 1024 * 1024)
    pods: list[api_pb2.PodResources] = []
    if shape == "small":
        return [
            make_pod(f"job-{i}", namespace="team", containers={"main": {_MIG_RESOURCE: [m]}})
            for i, m in enumerate(migs)
        ]
    if shape == "one-device":
        widest = {"main": {_MIG_RESOURCE: [f"{migs[0]}::999999"]}}
        one = make_pod("job-999999", namespace="team", containers=widest)
        count = budget // len(
            api_pb2.ListPodResourcesResponse(pod_resources=[one]).SerializeToString()
        )
        return [
            make_pod(
                f"job-{i}",
                namespace="team",
                containers={"main": {_MIG_RESOURCE: [f"{migs[0]}::{i}"]}},
            )
            for i in range(count)
        ]
    if shape == "crowded":
        widest = {"main": {"nvidia.com/gpu": [f"GPU-{uuid.UUID(int=0)}"]}}
        one = make_pod("job-999999", namespace="team", containers=widest)
        count = budget // len(
            api_pb2.ListPodResourcesResponse(pod_resources=[one]).SerializeToString()
        )
        return [
            make_pod(
                f"job-{i}",
                namespace="team",
                containers={"main": {"nvidia.com/gpu": [f"GPU-{uuid.UUID(int=i % 300)}"]}},
            )
            for i in range(count)
        ]
    if shape == "distinct-ids":
        count = budget // 43
        ids = [f"GPU-{uuid.UUID(int=i)}" for i in range(count)]
        pods.append(make_pod("hog", namespace="team", containers={"main": {"nvidia.com/gpu": ids}}))
        return pods
    raise SystemExit(f"unknown shape {shape}")


def measure(shape: str, mib: float, refreshes: int = 2) -> dict[str, Any]:
    """Serve one answer of ``shape`` to a fresh exporter; its memory and exposition size."""
    with tempfile.TemporaryDirectory() as tmp, FakeKubelet() as kubelet:
        port = _free_port()
        env = dict(
            os.environ,
            MIGSCOPE_EXPORTER_POD_SOURCE="kubelet",
            MIGSCOPE_EXPORTER_KUBELET_REFRESH="1",
            MIGSCOPE_EXPORTER_KUBELET_TIMEOUT="30",
        )
        cmd = [
            str(Path(sys.executable).with_name("migscope")),
            "exporter",
            "--backend",
            "sim",
            "--scenario",
            str(_scenario(Path(tmp))),
            "--listen",
            f"127.0.0.1:{port}",
            "--kubelet-socket",
            kubelet.socket_path,
            "--log-level",
            "warning",
        ]
        log = Path(tmp) / "exporter.log"
        with log.open("wb") as err:
            exporter = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err)
        try:
            deadline = time.monotonic() + 60
            text = b""
            while time.monotonic() < deadline:
                try:
                    status, text = _get(port, "/metrics")
                    if status == 200 and b"migscope_mig_info{" in text:
                        break
                except OSError:
                    pass
                time.sleep(0.2)
            migs = _mig_uuids(text.decode())
            idle = _memory_mib(exporter.pid)
            pods = _answer(shape, mib, migs)
            wire = len(api_pb2.ListPodResourcesResponse(pod_resources=pods).SerializeToString())
            start = kubelet.calls
            kubelet.set_pods(pods)
            kubelet.wait_for_calls(
                start + 1 + refreshes, timeout=300
            )  # whole ones after the switch
            sizes = [len(_get(port, "/metrics")[1]) for _ in range(3)]
            memory = _memory_mib(exporter.pid)
        finally:
            exporter.terminate()
            exporter.wait(timeout=30)
        lines = [line for line in log.read_text().splitlines() if "attribution" in line]
        return {
            "shape": shape,
            "answer_mib": round(wire / 2**20, 2),
            "pods": len(pods),
            "refreshes": refreshes,
            "rss_mib_before": idle,
            "rss_mib_after": memory,
            "exposition_bytes": max(sizes),
            "log": lines[:4],
        }


def main() -> None:
    """Parse the arguments and print one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--shape", choices=("one-device", "distinct-ids", "crowded", "small"), required=True
    )
    parser.add_argument("--mib", type=float, default=15.9, help="answer size on the wire")
    parser.add_argument("--refreshes", type=int, default=2, help="refreshes to wait for")
    args = parser.parse_args()
    print(json.dumps(measure(args.shape, args.mib, args.refreshes)))


if __name__ == "__main__":
    main()
