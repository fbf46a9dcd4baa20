"""``--simulate``'s cost per slice-week and peak memory: the per-sample path against the arrays.

Run ``python bench/simulate_bench.py [--nodes 10 50 200] [--mode source analyze]``.

The fleet of N nodes cycles through the nodes of the built-in scenarios ``fleet-mixed`` (two
H100 nodes, one A100 node, a re-partition on day 3) and ``h200-node`` (one HGX H200 node), each
copy renamed and its re-partition with it, so every workload pattern (idle, constant,
periodic, bursty, trace) and a re-partition scale with N. For each N, each mode and each path,
a **child process** builds the simulation, then times one week at 60 s:

* ``source``: iterating the slices, which is what the simulated source adds to an analysis;
* ``analyze``: the slices through :func:`migscope.analyzer._pipeline.analyze` (statistics,
  verdicts, plans), which is ``migscope analyze --simulate`` less writing the reports.

Paths: ``old`` is the per-sample reference (``tests/support/sim_reference.py``, the source as
it was before it evaluated whole arrays); ``new`` is
:func:`migscope.analyzer._intake.simulation.simulate_slices`. A slice-week is 10,080 samples
(a slice ended or started by a re-partition counts for the part of the week it lived).
Memory is the child's ``VmHWM`` (peak RSS), and ``base`` its ``VmHWM`` once the simulation is
built, before the week is sampled. Times are printed, never asserted.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
STEP = 60.0
WEEK = 7 * 86400.0
TEMPLATES = ("fleet-mixed", "h200-node")


def fleet_tree(nodes: int) -> dict[str, Any]:
    """A scenario of ``nodes`` nodes: the built-in scenarios' nodes in turn, renamed."""
    from migscope.sim import BUILTIN_SCENARIOS
    from migscope.sim._scenario import read_scenario_yaml

    trees = [read_scenario_yaml(BUILTIN_SCENARIOS[name])[0] for name in TEMPLATES]
    fleet = {k: v for k, v in trees[0].items() if k not in ("nodes", "faults")}
    fleet["description"] = f"{nodes} nodes cycled from {', '.join(TEMPLATES)}"
    fleet["nodes"], fleet["faults"] = [], []
    templates = [(tree, node) for tree in trees for node in tree["nodes"]]
    for k in range(nodes):
        tree, node = templates[k % len(templates)]
        copied = copy.deepcopy(node)
        copied["name"] = f"{node['name']}-{k:05d}"
        fleet["nodes"].append(copied)
        for fault in tree.get("faults") or []:
            if fault.get("node") == node["name"]:
                fleet["faults"].append({**copy.deepcopy(fault), "node": copied["name"]})
    return fleet


def vm_kib(field: str) -> float:
    """This process's ``/proc/self/status`` memory field (``VmHWM``) in KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return float(line.split()[1])
    return float("nan")


def child(nodes: int, mode: str, path: str) -> dict[str, Any]:
    """Build the fleet, then time one week of ``path`` in ``mode`` (runs in the child)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from support.sim_reference import reference_slices

    from migscope.analyzer._intake.base import local_stats
    from migscope.analyzer._intake.simulation import simulate_slices, simulation_window
    from migscope.analyzer._intake.stats_local import SliceSeries
    from migscope.analyzer._pipeline import analyze
    from migscope.sim import Simulation

    started = time.perf_counter()
    sim = Simulation.from_scenario(fleet_tree(nodes))
    build_s = time.perf_counter() - started
    base_kib = vm_kib("VmHWM")
    make = reference_slices if path == "old" else simulate_slices
    counted = {"slices": 0, "samples": 0}

    def counting(slices: Iterable[SliceSeries]) -> Iterator[SliceSeries]:
        for series in slices:
            counted["slices"] += 1
            counted["samples"] += len(series.activity) if series.activity is not None else 0
            yield series

    started = time.perf_counter()
    slices = counting(make(sim, window_s=WEEK, step_s=STEP))
    if mode == "analyze":
        window = simulation_window(sim, window_s=WEEK)
        result = analyze(local_stats(slices, window, STEP), window=window)
        assert len(result.slices) == counted["slices"]
    else:
        for _ in slices:
            pass
    seconds = time.perf_counter() - started
    slice_weeks = counted["samples"] / (WEEK / STEP)
    return {
        "nodes": nodes,
        "mode": mode,
        "path": path,
        "slices": counted["slices"],
        "slice_weeks": slice_weeks,
        "seconds": seconds,
        "s_per_slice_week": seconds / slice_weeks,
        "build_s": build_s,
        "rss_base_mib": base_kib / 1024,
        "rss_peak_mib": vm_kib("VmHWM") / 1024,
    }


def measure(nodes: int, mode: str, path: str) -> dict[str, Any]:
    """One child's measurement."""
    done = subprocess.run(
        [sys.executable, __file__, "--child", str(nodes), mode, path],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[10, 50, 200])
    parser.add_argument("--mode", nargs="+", choices=["source", "analyze"], default=["source"])
    parser.add_argument("--json", type=Path, help="also write every measurement here")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        nodes, mode, path = args.child
        print(json.dumps(child(int(nodes), mode, path)))
        return
    header = (
        f"{'nodes':>5} {'slices':>6} {'sl-wk':>7} {'mode':>7}  {'old s/sl-wk':>11} "
        f"{'new s/sl-wk':>11} {'ratio':>6}  {'old s':>7} {'new s':>6}  "
        f"{'base MiB':>8} {'old peak':>8} {'new peak':>8}"
    )
    print(header)
    print("-" * len(header))
    rows = []
    for nodes in args.nodes:
        for mode in args.mode:
            old, new = measure(nodes, mode, "old"), measure(nodes, mode, "new")
            assert (old["slices"], old["slice_weeks"]) == (new["slices"], new["slice_weeks"])
            ratio = old["s_per_slice_week"] / new["s_per_slice_week"]
            rows.append({"old": old, "new": new, "ratio": ratio})
            print(
                f"{nodes:>5} {new['slices']:>6} {new['slice_weeks']:>7.1f} {mode:>7}  "
                f"{old['s_per_slice_week']:>11.5f} {new['s_per_slice_week']:>11.5f} "
                f"{ratio:>5.0f}x  {old['seconds']:>7.1f} {new['seconds']:>6.2f}  "
                f"{new['rss_base_mib']:>8.1f} {old['rss_peak_mib']:>8.1f} "
                f"{new['rss_peak_mib']:>8.1f}",
                flush=True,
            )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
