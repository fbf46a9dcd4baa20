"""Layout planner benchmark: the exact MILP against greedy first-fit and static all-balanced.

Demand comes from the Alibaba GPU trace v2023 (``bench/data/alibaba-v2023-openb-gpu-requests.csv``,
aggregated from ``openb_pod_list_default.csv``; provenance in the file): every GPU-sharing pod
maps to the smallest H200 profile whose compute share covers its ``gpu_milli`` and every
whole-GPU pod to 7g per GPU (``migscope.analyzer._plan.demand_mix``). The mix is scaled to
``--fill`` of each pool's compute slices. Two mixes: ``openb`` (all GPU pods: mostly whole
GPUs) and ``openb-sharing`` (only the pods that share a GPU: the MIG-shaped part).

Pools of 100, 1,000 and 10,000 H200s in nodes of 8, with a realistic current state: each node
uniformly configured (MIG Manager applies one config per node) as all-1g, all-balanced,
2×3g, 4g+3g, 7g or MIG disabled, and a share of the instances (0, 10%) held by busy pods
(kept in place). A stress scenario (``-scatter``) gives every GPU any of the 127 valid
layouts at random with 10% of instances busy: ~1,000 GPU classes at 10,000 GPUs. Demand =
the busy instances (the analyzer counts busy slices as demand) plus the mix scaled so that
the total is ``--fill`` of the pool's compute slices. Scenario labels read
``mix@busy-share[-scatter]``.

Per size and method it reports wall time (target for the MILP: <= 5 s at 10,000 GPUs), GPUs
used against the bin-packing lower bound (target: within 1%), changed GPUs, stranded compute
slices and unmet demand. ``milp`` is the default lexicographic objective (coverage, then
fewest changes, then fewest stranded slices); ``milp-consol`` uses ``Weights.consolidating``
(coverage, then fewest stranded slices, then fewest changes), which shows how close the
solver gets to the bound when it may re-partition freely (in-use instances still stay).
Two bounds: ``LB``, the bin-packing bound of the demand alone (configuration LP), and
``LBpool``, the LP relaxation of the planner's model on this pool, which also counts the GPUs
that in-use instances pin (a busy GPU is used whatever else it holds). Baselines: ``greedy``
(first-fit decreasing) and ``static`` (all-balanced everywhere). No assertions: benchmarks
never gate CI.

Run: ``.venv/bin/python bench/solver_bench.py [--sizes 100,1000,10000] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from migscope.analyzer._plan import (
    GpuState,
    Instance,
    LowerBound,
    Plan,
    RequestCount,
    Weights,
    demand_from_requests,
    greedy_first_fit,
    lower_bound,
    plan_layouts,
    scale_demand,
    static_layout,
)
from migscope.core._catalogue import find_model
from migscope.core._layout import is_valid, valid_layouts

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "bench" / "data" / "alibaba-v2023-openb-gpu-requests.csv"
MODEL = find_model("H200-141GB")
GPUS_PER_NODE = 8

# Current node configurations and their share of nodes.
NODE_LAYOUTS: list[tuple[float, dict[str, int] | None]] = [
    (0.25, {"1g.18gb": 7}),
    (0.25, {"3g.71gb": 1, "2g.35gb": 1, "1g.18gb": 2}),
    (0.15, {"3g.71gb": 2}),
    (0.10, {"4g.71gb": 1, "3g.71gb": 1}),
    (0.15, {"7g.141gb": 1}),
    (0.10, None),  # MIG disabled
]


def load_requests(path: Path = DATA) -> list[RequestCount]:
    with path.open() as handle:
        rows = csv.DictReader(line for line in handle if not line.startswith("#"))
        return [RequestCount(int(r["num_gpu"]), int(r["gpu_milli"]), int(r["pods"])) for r in rows]


def mixes() -> dict[str, dict[str, int]]:
    requests = load_requests()
    sharing = [r for r in requests if r.num_gpu == 1 and r.gpu_milli < 1000]
    return {
        "openb": demand_from_requests(MODEL, requests),
        "openb-sharing": demand_from_requests(MODEL, sharing),
    }


def build_pool(size: int, *, busy: float, seed: int, scatter: bool = False) -> list[GpuState]:
    """Nodes of 8 GPUs; each node uniformly set from NODE_LAYOUTS, or, with ``scatter``,
    every GPU set to any valid layout at random (a stress case: ~1,000 classes at 10,000)."""
    rng = random.Random(seed)
    weights = [w for w, _ in NODE_LAYOUTS]
    every = valid_layouts(MODEL)
    gpus: list[GpuState] = []
    for node_no in range((size + GPUS_PER_NODE - 1) // GPUS_PER_NODE):
        (_, node_layout) = rng.choices(NODE_LAYOUTS, weights=weights)[0]
        node = f"gpu-node-{node_no:05d}"
        for index in range(min(GPUS_PER_NODE, size - len(gpus))):
            layout = rng.choice(every).as_dict() if scatter else node_layout
            if layout is None:
                gpus.append(GpuState(node, index, (), mig_enabled=False))
                continue
            placed = is_valid(MODEL, layout).placements
            instances = tuple(
                Instance(p.profile.name, p.start, rng.random() < busy) for p in placed
            )
            gpus.append(GpuState(node, index, instances))
    return gpus


def demand_for(pool: list[GpuState], mix: dict[str, int], *, fill: float) -> dict[str, int]:
    """Busy instances (they are demand already) plus the mix, ``fill`` of the pool in all."""
    busy = Counter(i.profile for g in pool for i in g.instances if i.in_use)
    capacity = MODEL.compute_slices * len(pool)
    taken = sum(MODEL.profile(p).compute_slices * n for p, n in busy.items()) / capacity
    extra = scale_demand(MODEL, mix, gpus=len(pool), fill=max(0.0, fill - taken))
    return {p: busy.get(p, 0) + extra.get(p, 0) for p in sorted(set(extra) | set(busy))}


def consolidating(pool: list[GpuState]) -> Weights:
    busy = sum(any(i.in_use for i in g.instances) for g in pool)
    return Weights.consolidating(
        gpus=len(pool), busy_gpus=busy, compute_slices=MODEL.compute_slices
    )


def _over(used: int, bound: int) -> float | None:
    return round(100.0 * (used - bound) / bound, 2) if bound else None


def row(size: int, mix: str, method: str, plan: Plan, bound: LowerBound) -> dict[str, Any]:
    used = plan.gpus_used
    pool_bound = bound.pool_gpus if bound.pool_gpus is not None else bound.gpus
    return {
        "gpus": size,
        "mix": mix,
        "method": method,
        "wall_s": round(plan.solve.wall_s, 3),
        "status": plan.solve.status,
        "gap": plan.solve.gap,
        "classes": plan.solve.classes,
        "variables": plan.solve.variables,
        "gpus_used": used,
        "lower_bound": bound.gpus,
        "over_bound_pct": _over(used, bound.gpus),
        "pool_bound": pool_bound,
        "over_pool_bound_pct": _over(used, pool_bound),
        "gpus_changed": plan.gpus_changed,
        "gpus_disruptive": plan.gpus_disruptive,
        "nodes_changed": plan.nodes_changed,
        "stranded_compute_slices": plan.stranded_compute_slices,
        "unmet": plan.unmet_total,
        "objective": plan.objective,
    }


# (mix, busy share of instances, scattered layouts) per scenario.
SCENARIOS: list[tuple[str, float, bool]] = [
    ("openb", 0.0, False),
    ("openb", 0.1, False),
    ("openb-sharing", 0.0, False),
    ("openb-sharing", 0.1, False),
    ("openb-sharing", 0.1, True),
]


def run(sizes: list[int], *, fill: float, seed: int, limit: float) -> dict[str, Any]:
    results: list[dict[str, Any]] = []
    bounds: dict[str, Any] = {}
    all_mixes = mixes()
    for mix_name, share, scatter in SCENARIOS:
        label = f"{mix_name}@{share:g}{'-scatter' if scatter else ''}"
        for size in sizes:
            pool = build_pool(size, busy=share, seed=seed, scatter=scatter)
            demand = demand_for(pool, all_mixes[mix_name], fill=fill)
            began = time.perf_counter()
            bound = lower_bound(MODEL, demand, gpus=pool)
            bounds[f"{label}/{size}"] = {
                **bound.as_dict(),
                "demand": demand,
                "wall_s": round(time.perf_counter() - began, 3),
            }
            for method in METHODS:
                plan = plan_for(method, pool, demand, limit)
                results.append(row(size, label, method, plan, bound))
                print(_line(results[-1]), file=sys.stderr, flush=True)
    return {
        "model": MODEL.key,
        "fill": fill,
        "seed": seed,
        "time_limit_s": limit,
        "scenarios": [{"mix": m, "busy": b, "scatter": s} for m, b, s in SCENARIOS],
        "bounds": bounds,
        "results": results,
    }


METHODS = ("milp", "milp-consol", "greedy", "static")


def plan_for(method: str, pool: list[GpuState], demand: dict[str, int], limit: float) -> Plan:
    if method == "milp":
        return plan_layouts(MODEL, pool, demand, time_limit_s=limit)
    if method == "milp-consol":
        weights = consolidating(pool)
        return plan_layouts(MODEL, pool, demand, time_limit_s=limit, weights=weights)
    if method == "greedy":
        return greedy_first_fit(MODEL, pool, demand)
    return static_layout(MODEL, pool, demand)


HEAD = (
    f"{'scenario':<24}{'gpus':>6} {'method':<12}{'wall s':>8} {'status':<11}{'gap':>8}"
    f"{'used':>7}{'LB':>7}{'+LB%':>7}{'LBpool':>7}{'+LBp%':>7}"
    f"{'changed':>9}{'disrupt':>8}{'stranded':>9}{'unmet':>7}"
)


def _line(r: dict[str, Any]) -> str:
    gap = "-" if r["gap"] is None else f"{r['gap']:.1e}"
    over = "-" if r["over_bound_pct"] is None else f"{r['over_bound_pct']:.1f}"
    over_pool = "-" if r["over_pool_bound_pct"] is None else f"{r['over_pool_bound_pct']:.1f}"
    return (
        f"{r['mix']:<24}{r['gpus']:>6} {r['method']:<12}{r['wall_s']:>8.3f} {r['status']:<11}"
        f"{gap:>8}{r['gpus_used']:>7}{r['lower_bound']:>7}{over:>7}{r['pool_bound']:>7}"
        f"{over_pool:>7}{r['gpus_changed']:>9}"
        f"{r['gpus_disruptive']:>8}{r['stranded_compute_slices']:>9}{r['unmet']:>7}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--fill", type=float, default=0.7, help="demand / pool compute slices")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--time-limit", type=float, default=5.0)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(HEAD, file=sys.stderr)
    report = run(sizes, fill=args.fill, seed=args.seed, limit=args.time_limit)
    print("\n" + HEAD)
    for r in report["results"]:
        print(_line(r))
    text = json.dumps(report, indent=2, sort_keys=True)
    if args.json:
        args.json.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
