"""The applier on DRA nodes: pods holding MIG slices through ResourceClaims (issue 21).

A pod that holds a MIG device through a claim asks for nothing in ``resources.limits``: the
applier used to see no pod at risk, MIG Manager re-created the GPU under it, and the change
then waited for allocatable ``nvidia.com/mig-*`` a DRA node never shows. Here:

* tables over the real shapes in ``tests/fixtures/real/dra/`` (ResourceSlice entries, an
  allocated ResourceClaim from the driver's demo, every device name found in public sources);
* the applier end to end against the API test server, the MIG Manager simulation and the
  simulated DRA kubelet plugin (:mod:`support.kubeapi.dra_plugin`): static MIG through DRA
  (skip, drain, verify by ResourceSlices, the plugin restarted to re-discover), DynamicMIG
  nodes refused, a ``GPUCluster`` cluster refused, unreadable claims;
* a property: a slice held through a claim is never on a GPU changed without its pod named.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from support.kubeapi import KubeApiServer, Respond, config_map, node, pod
from support.kubeapi.dra_plugin import CLIENT_LABEL, DRIVER, DraPluginSim
from support.kubeapi.mig_manager import CONFIG_LABEL, STATE_LABEL, Knobs, MigManagerSim, SimGpu

from applier.cluster import (
    BALANCED,
    CONFIGMAP,
    EXISTING,
    NAMESPACE,
    NODES,
    TWO_3G,
    Cluster,
    cluster_policy,
    plan,
)
from migscope.applier._applier import DYNAMIC_MIG, ClusterRefused
from migscope.applier._dra import (
    DraRisk,
    claim_names,
    claimed_devices,
    dra_pods_at_risk,
    node_management,
    published_resources,
)
from migscope.applier._plan import GpuChange, NodeChange
from migscope.core._dra_names import profile_key
from migscope.kube import Kube

REAL = Path(__file__).parent.parent / "fixtures" / "real" / "dra"


def _docs(name: str) -> list[Any]:
    return [d for d in yaml.safe_load_all((REAL / name).read_text()) if d is not None]


# -- tables over real shapes ---------------------------------------------------------------------


def test_the_real_device_names_are_read_as_what_they_are() -> None:
    """Every name in the corpus: canonical names give the profile, legacy names (whose middle
    part the driver's own regex would misread as a profile "19") give a MIG device of an
    unknown profile, ``gpu-<minor>`` a whole GPU."""
    lines = (REAL / "device-names.tsv").read_text().splitlines()
    rows = list(csv.DictReader((x for x in lines if not x.startswith("#")), delimiter="\t"))
    assert rows
    for row in rows:
        claim = {
            "metadata": {"namespace": "ns", "name": "c"},
            "status": {
                "allocation": {
                    "devices": {"results": [{"driver": DRIVER, "pool": "n", "device": row["name"]}]}
                }
            },
        }
        (device,) = claimed_devices(claim, [])
        fmt = row["format"]
        if fmt == "canonical":
            assert (device.kind, device.profile) == ("mig", row["profile_part"]), row
        elif fmt == "legacy":
            assert (device.kind, device.profile) == ("mig", ""), row
        elif fmt == "full":
            assert device.kind == "gpu", row
        else:  # illustrative/dev strings no driver emits: unknown, never a guessed profile
            assert device.kind == "unknown" or device.profile == "", row


def test_a_real_static_mig_slice_entry_tells_its_profile() -> None:
    (devices,) = _docs("dra-driver-docs-resourceslice-device-mig-static.yaml")
    slices = [{"spec": {"driver": DRIVER, "pool": {"name": "n"}, "devices": devices}}]
    name = devices[0]["name"]  # the docs' illustrative gpu-0-mig-1g.5gb-0
    claim = {
        "metadata": {"namespace": "ns", "name": "c"},
        "status": {
            "allocation": {
                "devices": {"results": [{"driver": DRIVER, "pool": "n", "device": name}]}
            }
        },
    }
    (device,) = claimed_devices(claim, slices)
    assert (device.kind, device.profile, device.source) == ("mig", "1g5gb", "resourceslice")
    assert node_management(slices) == "static"
    assert published_resources(slices) == {"nvidia.com/mig-1g.5gb": 1}


def test_counters_and_abstract_devices_mean_dynamic_mig() -> None:
    """KEP-4815's partitionable-device shapes, the layout DynamicMIG publishes."""
    for name in (
        "kep4815-a100-mig-counterset-and-devices.yaml",
        "kep4815-partition-counter-and-device-slices.yaml",
    ):
        specs = [d.get("spec", d) for d in _docs(name)]
        slices = [{"spec": {**s, "driver": DRIVER}} for s in specs if isinstance(s, dict)]
        assert node_management(slices) == "dynamic", name


def test_the_real_gh200_claim_puts_its_pod_at_risk() -> None:
    """The driver's demo claim (``gpu-1-mig-19-4-1``: a 1g.12gb, by profile id only)."""
    claim, status = _docs("dra-driver-demo-gh200-claim-gpu-1-mig-19-4-1.yaml")
    holder = {
        "metadata": {"namespace": claim["metadata"]["namespace"], "name": "mig-1g12gb-pod"},
        "spec": {"containers": [{"name": "cuda-container"}]},
        "status": status["status"],
    }
    assert claim_names(holder) == [claim["metadata"]["name"]]
    claims = {(claim["metadata"]["namespace"], claim["metadata"]["name"]): claim}
    change = NodeChange(
        "kind-dra-1-worker",
        "c",
        gpus=(GpuChange(1, {"1g.12gb": 7}, {"3g.48gb": 2}),),
    )
    at_risk = dra_pods_at_risk(change, [holder], claims, []).pods
    assert list(at_risk) == ["extended-resource-mig-1g12gb/mig-1g12gb-pod"]
    unchanged = NodeChange("n", "c", gpus=(GpuChange(1, {"1g.12gb": 7}, {"1g.12gb": 7}),))
    assert dra_pods_at_risk(unchanged, [holder], claims, []).pods == {}


@pytest.mark.parametrize(
    ("profile", "key"),
    [("1g.18gb", "1g18gb"), ("1g.10gb+me", "1g10gb-me"), ("1g.24gb+me.all", "1g24gb-meall")],
)
def test_profile_key_is_the_drivers_spelling(profile: str, key: str) -> None:
    assert profile_key(profile) == key


# -- the applier on a simulated DRA cluster ------------------------------------------------------


@contextmanager
def dra_cluster(*, client_label: bool = False) -> Iterator[tuple[Cluster, DraPluginSim]]:
    """Two balanced H200 nodes whose MIG devices NVIDIA's DRA driver publishes (no device
    plugin: no nvidia.com/mig-* allocatable), MIG Manager under a ClusterPolicy."""
    with KubeApiServer() as api:
        api.create(cluster_policy(CONFIGMAP))
        api.create(config_map(CONFIGMAP, NAMESPACE, {"config.yaml": EXISTING}))
        labels = {CONFIG_LABEL: "all-balanced", STATE_LABEL: "success"}
        if client_label:
            labels[CLIENT_LABEL] = "true"
        for name in NODES:
            api.create(node(name, labels=labels, allocatable={"cpu": "64"}))
        gpus = {n: [SimGpu(mig_enabled=True, instances=BALANCED)] * 2 for n in NODES}
        knobs = {n: Knobs(device_plugin=False) for n in NODES}
        with (
            MigManagerSim(
                api, gpus, config_namespace=NAMESPACE, config_name=CONFIGMAP, knobs=knobs
            ) as mig,
            DraPluginSim(api, mig, NODES) as plugin,
        ):
            for name in NODES:
                mig.wait_until_seen(
                    name, api.get("v1", "Node", name)["metadata"]["resourceVersion"]
                )
            api.clear_requests()
            yield Cluster(api, mig, Kube(api.client(retries=False), timeout_s=5.0)), plugin


def _claim_holder(c: Cluster, device: str, *, name: str = "infer") -> None:
    """A pod holding ``device`` of gpu-a through a claim made from a template, as the
    scheduler and the kubelet leave them."""
    claim_name = f"{name}-gpu-x7k2p"
    c.api.create(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": claim_name, "namespace": "ml"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {}}]}},
        }
    )
    c.api.patch(
        "resource.k8s.io/v1",
        "ResourceClaim",
        claim_name,
        {
            "status": {
                "allocation": {
                    "devices": {
                        "results": [
                            {"request": "gpu", "driver": DRIVER, "pool": "gpu-a", "device": device}
                        ]
                    }
                },
                "reservedFor": [{"resource": "pods", "name": name, "uid": "u-1"}],
            }
        },
        namespace="ml",
        subresource="status",
    )
    holder = pod(name, "ml", node_name="gpu-a")
    holder["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "mig-2g"}]
    c.api.create(holder)
    c.api.patch(
        "v1",
        "Pod",
        name,
        {"status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": claim_name}]}},
        namespace="ml",
        subresource="status",
    )


def _device(plugin: DraPluginSim, node: str, gpu: int, profile: str) -> str:
    return next(
        d["name"]
        for d in plugin.devices(node)
        if d["name"].startswith(f"gpu-{gpu}-mig-{profile_key(profile)}-")
    )


def test_a_pod_holding_a_slice_through_a_claim_skips_the_node_without_drain() -> None:
    with dra_cluster() as (c, plugin):
        _claim_holder(c, _device(plugin, "gpu-a", 1, "2g.35gb"))
        (dry,) = c.applier(apply=False).run(plan()).outcomes
        assert dry.result == "skipped"
        assert "ml/infer" in dry.reason
        (out,) = c.applier().run(plan()).outcomes
        assert out.result == "skipped"
        assert "ml/infer" in out.reason
        assert c.labels()[CONFIG_LABEL] == "all-balanced"
        assert c.mig.recreated == []


def test_a_claim_on_a_profile_no_changed_gpu_has_is_not_at_risk() -> None:
    """GPU 1 goes balanced -> 3g x2; a 7g claim elsewhere does not stop it (on a table: the
    sim's GPUs hold no 7g, so the claim names a device of another profile)."""
    change = NodeChange(
        "gpu-a", "c", gpus=(GpuChange(0, BALANCED, BALANCED), GpuChange(1, BALANCED, TWO_3G))
    )
    claim = {
        "metadata": {"namespace": "ml", "name": "big"},
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"driver": DRIVER, "pool": "gpu-a", "device": "gpu-0-mig-7g141gb-0-0"}
                    ]
                }
            }
        },
    }
    holder = {
        "metadata": {"namespace": "ml", "name": "p"},
        "spec": {"resourceClaims": [{"name": "g", "resourceClaimName": "big"}]},
    }
    assert dra_pods_at_risk(change, [holder], {("ml", "big"): claim}, []).pods == {}


def test_drain_evicts_the_claim_holder_and_verifies_by_the_resource_slices() -> None:
    """Without the operator's client label nothing restarts the plugin: the applier does
    (once), and the change is verified by the slices the new plugin publishes."""
    with dra_cluster() as (c, plugin):
        _claim_holder(c, _device(plugin, "gpu-a", 1, "2g.35gb"))
        (out,) = c.applier(drain=True).run(plan()).outcomes
        assert out.result == "applied", out.reason
        assert c.api.list("v1", "Pod", namespace="ml") == []
        assert c.mig.gpus("gpu-a")[1].instances == TWO_3G
        slices = c.api.list("resource.k8s.io/v1", "ResourceSlice")
        mine = [s for s in slices if s["spec"]["nodeName"] == "gpu-a"]
        assert published_resources(mine) == {
            "nvidia.com/mig-1g.18gb": 2,
            "nvidia.com/mig-2g.35gb": 1,
            "nvidia.com/mig-3g.71gb": 3,
        }
        assert plugin.restarts["gpu-a"] == 2  # started, then restarted by the applier
        assert plugin.restarts["gpu-b"] == 1
        assert not c.node()["spec"].get("unschedulable")


def test_mig_manager_bouncing_the_plugin_needs_no_restart_from_us() -> None:
    with dra_cluster(client_label=True) as (c, plugin):
        (out,) = c.applier().run(plan()).outcomes
        assert out.result == "applied", out.reason
        assert plugin.restarts["gpu-a"] == 2  # MIG Manager's bounce, not an eviction
        evictions = [r for r in c.api.requests if r.path.endswith("/eviction")]
        assert evictions == []


def test_a_stale_slice_that_never_catches_up_fails_the_verification() -> None:
    """A plugin that cannot be restarted (its eviction refused) leaves the old slices: the
    change is not counted as verified."""
    with dra_cluster() as (c, _plugin):
        c.api.faults.add(Respond(403), method="POST", path=r"/eviction$")
        (out,) = c.applier().run(plan()).outcomes
        assert out.result == "failed"
        assert "its ResourceSlices publish" in out.reason


def _dynamic_slice(node_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node_name}-{DRIVER}-dyn"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": "gpu-0-mig-1g18gb-19-0",
                    "attributes": {"type": {"string": "mig"}, "profile": {"string": "1g.18gb"}},
                    "consumesCounters": [
                        {
                            "counterSet": "gpu-0-counter-set",
                            "counters": {"memory-slice-0": {"value": "1"}},
                        }
                    ],
                }
            ],
        },
    }


def test_a_dynamic_mig_node_is_never_relabelled() -> None:
    with dra_cluster() as (c, plugin):
        plugin.stop()
        c.api.delete("resource.k8s.io/v1", "ResourceSlice", plugin.slice_name("gpu-a"))
        c.api.create(_dynamic_slice("gpu-a"))
        before = c.api.resource_version
        c.api.clear_requests()
        (dry,) = c.applier(apply=False).run(plan()).outcomes
        assert dry.result == "skipped"
        assert dry.reason == DYNAMIC_MIG
        (out,) = c.applier().run(plan()).outcomes
        assert out.result == "skipped"
        assert out.reason == DYNAMIC_MIG
        node_writes = [r for r in c.writes() if "/nodes/" in r.path]
        assert node_writes == []
        assert c.labels()[CONFIG_LABEL] == "all-balanced"
        assert c.api.resource_version - before <= 3  # the Lease, an Event


def test_a_gpucluster_cluster_is_refused_in_one_line() -> None:
    with dra_cluster() as (c, _plugin):
        c.api.delete("nvidia.com/v1", "ClusterPolicy", "cluster-policy")
        c.api.create(
            {
                "apiVersion": "nvidia.com/v1alpha1",
                "kind": "GPUCluster",
                "metadata": {"name": "gpu-cluster"},
                "spec": {"draDriver": {"enabled": True}},
            }
        )
        report = c.applier(apply=False).run(plan())
        (out,) = report.outcomes
        assert out.result == "skipped"
        assert "GPUCluster gpu-cluster" in out.reason
        assert any(n.startswith("--apply would refuse: GPUCluster") for n in report.notes)
        with pytest.raises(ClusterRefused, match="without MIG Manager") as caught:
            c.applier().run(plan())
        assert "\n" not in str(caught.value)
        assert c.labels()[CONFIG_LABEL] == "all-balanced"


def test_claims_that_cannot_be_read_skip_the_node_naming_the_permission() -> None:
    with dra_cluster() as (c, plugin):
        _claim_holder(c, _device(plugin, "gpu-a", 1, "2g.35gb"))
        c.api.faults.add(Respond(403), method="GET", path=r"/resourceclaims/")
        (out,) = c.applier().run(plan()).outcomes
        assert out.result == "skipped"
        assert "get on resourceclaims" in out.reason
        assert c.labels()[CONFIG_LABEL] == "all-balanced"


# -- the property --------------------------------------------------------------------------------

_PROFILES = ("1g.18gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb", "1g.18gb+me")
_layout = st.dictionaries(st.sampled_from(_PROFILES), st.integers(0, 3), max_size=3)


@settings(max_examples=300, deadline=None)
@given(
    gpus=st.lists(
        st.tuples(_layout, _layout, st.booleans(), st.booleans()), min_size=1, max_size=4
    ),
    held=st.lists(
        st.tuples(st.integers(0, 3), st.sampled_from(_PROFILES), st.booleans()), max_size=6
    ),
)
def test_a_slice_held_through_a_claim_never_sits_on_a_changed_gpu_unnamed(
    gpus: list[tuple[dict[str, int], dict[str, int], bool, bool]],
    held: list[tuple[int, str, bool]],
) -> None:
    """Whatever the layouts: a pod whose claim holds a device of a profile on a GPU that the
    change re-creates is named (by device name, or by the slice's attributes)."""
    change = NodeChange(
        "n",
        "c",
        gpus=tuple(GpuChange(i, cur, new, cm, pm) for i, (cur, new, cm, pm) in enumerate(gpus)),
    )
    pods, claims, devices = [], {}, []
    for k, (gpu, profile, by_name) in enumerate(held):
        gpu %= len(gpus)
        cur = gpus[gpu][0]
        if not gpus[gpu][2] or not cur.get(profile):
            continue  # the device must exist on that GPU now
        device = f"gpu-{gpu}-mig-{profile_key(profile)}-{k}-{k}" if by_name else f"dev-{k}"
        devices.append(
            {
                "name": device,
                "attributes": {"type": {"string": "mig"}, "profile": {"string": profile}},
            }
        )
        claims[("ns", f"c{k}")] = {
            "metadata": {"namespace": "ns", "name": f"c{k}"},
            "status": {
                "allocation": {
                    "devices": {"results": [{"driver": DRIVER, "pool": "n", "device": device}]}
                }
            },
        }
        pods.append(
            {
                "metadata": {"namespace": "ns", "name": f"p{k}", "gpu": gpu},
                "spec": {"resourceClaims": [{"name": "g", "resourceClaimName": f"c{k}"}]},
            }
        )
    slices = [{"spec": {"driver": DRIVER, "pool": {"name": "n"}, "devices": devices}}]
    at_risk = dra_pods_at_risk(change, pods, claims, slices).pods
    changed = {g.index for g in change.changed_gpus}
    for p in pods:
        if p["metadata"]["gpu"] in changed:
            assert f"ns/{p['metadata']['name']}" in at_risk


# -- which GPU a claimed device is on (ResourceSlice parentUUID against the plan's GPU UUIDs) ---

U0, U1 = "GPU-0a0a0a0a-0000-4000-8000-000000000000", "GPU-1b1b1b1b-1111-4111-8111-111111111111"


def _slice_of(layouts: dict[str, dict[str, int]]) -> list[dict[str, Any]]:
    """One ResourceSlice of NVIDIA's driver publishing ``{GPU UUID: layout}``, a device per
    instance named ``d-<gpu>-<profile>-<k>`` with the attributes the driver gives a MIG device."""
    devices = [
        {
            "name": f"d-{g}-{profile_key(profile)}-{k}",
            "attributes": {
                "type": {"string": "mig"},
                "profile": {"string": profile},
                "parentUUID": {"string": uuid},
            },
        }
        for g, (uuid, layout) in enumerate(layouts.items())
        for profile, n in layout.items()
        for k in range(n)
    ]
    return [{"spec": {"driver": DRIVER, "pool": {"name": "n"}, "devices": devices}}]


def _holding(device: str) -> tuple[list[dict[str, Any]], dict[tuple[str, str], Any]]:
    claim = {
        "metadata": {"namespace": "ml", "name": "c"},
        "status": {
            "allocation": {
                "devices": {"results": [{"driver": DRIVER, "pool": "n", "device": device}]}
            }
        },
    }
    holder = {
        "metadata": {"namespace": "ml", "name": "p"},
        "spec": {"resourceClaims": [{"name": "g", "resourceClaimName": "c"}]},
    }
    return [holder], {("ml", "c"): claim}


def _change(u0: str = U0, u1: str = U1) -> NodeChange:
    """GPU 0 kept balanced, GPU 1 balanced -> 3g x2: 2g.35gb is destroyed (on GPU 1 only)."""
    return NodeChange(
        "n",
        "c",
        gpus=(
            GpuChange(0, BALANCED, BALANCED, uuid=u0),
            GpuChange(1, BALANCED, TWO_3G, uuid=u1),
        ),
    )


def test_a_claim_on_the_gpu_the_change_keeps_is_not_at_risk_by_its_gpu() -> None:
    """The chain of issue 21 named four holders of the kept GPU: the profile rule alone
    cannot tell GPUs apart. By UUID, only the changed GPU's holder is at risk."""
    slices = _slice_of({U0: BALANCED, U1: BALANCED})
    pods, claims = _holding("d-0-2g35gb-0")
    assert dra_pods_at_risk(_change(), pods, claims, slices) == DraRisk({}, frozenset())
    pods, claims = _holding("d-1-2g35gb-0")
    risk = dra_pods_at_risk(_change(), pods, claims, slices)
    (device,) = risk.pods["ml/p"]
    assert risk.on_changed_gpu == {"ml/p"}
    assert (device.gpu_uuid, device.gpu_source) == (U1, "resourceslice")


def test_a_holder_on_a_changed_gpus_uuid_is_seen_there_even_when_the_pairing_is_in_doubt() -> None:
    """The plan gives U1 to both GPUs: which one the device is on is unknown, so the profile
    rule decides it is at risk, and it is still marked as seen on a changed GPU's UUID, which
    keeps the applier's narrowing by the report's placement from dropping it."""
    pods, claims = _holding("d-1-2g35gb-0")
    risk = dra_pods_at_risk(_change(U1, U1), pods, claims, _slice_of({U0: BALANCED, U1: BALANCED}))
    assert list(risk.pods) == ["ml/p"]
    assert risk.on_changed_gpu == {"ml/p"}
    kept = NodeChange("n", "c", gpus=(GpuChange(0, BALANCED, TWO_3G, uuid=U0),))
    risk = dra_pods_at_risk(kept, pods, claims, _slice_of({U0: BALANCED, U1: BALANCED}))
    assert list(risk.pods) == ["ml/p"]  # the profile rule: 2g.35gb is destroyed on GPU 0
    assert risk.on_changed_gpu == frozenset()  # but its device is on U1, which is kept


def test_a_claim_on_a_changed_gpu_is_at_risk_whatever_its_profile() -> None:
    """1g.18gb is on both layouts of GPU 1, but MIG Manager re-creates every instance of a
    changed GPU: the profile rule would clear it (1g survives); the GPU rule does not."""
    change = NodeChange(
        "n",
        "c",
        gpus=(
            GpuChange(0, BALANCED, BALANCED, uuid=U0),
            GpuChange(1, BALANCED, {"1g.18gb": 2, "3g.71gb": 1, "2g.35gb": 0}, uuid=U1),
        ),
    )
    slices = _slice_of({U0: BALANCED, U1: BALANCED})
    pods, claims = _holding("d-1-1g18gb-0")
    assert "ml/p" in dra_pods_at_risk(change, pods, claims, slices).pods


@pytest.mark.parametrize(
    "why",
    ["plan-without-uuids", "kept-gpu-re-cut", "device-not-published", "uuid-case-and-unknown"],
)
def test_a_claim_the_gpu_rule_cannot_clear_keeps_the_profile_rule(why: str) -> None:
    """Where the slices and the plan do not both say the device is on a GPU the change keeps,
    as the plan has it now, the holder of a destroyed profile stays at risk."""
    change, layouts, device = _change(), {U0: BALANCED, U1: BALANCED}, "d-0-2g35gb-0"
    if why == "plan-without-uuids":
        change = _change("", "")
    elif why == "kept-gpu-re-cut":
        # someone re-cut GPU 0 since the plan: mig-parted would re-create it all the same
        layouts = {U0: {"2g.35gb": 3}, U1: BALANCED}
    elif why == "device-not-published":
        device = "gpu-0-mig-2g35gb-14-4"
    else:
        change = _change("GPU-ffffffff-ffff-4fff-8fff-ffffffffffff", U1)
    pods, claims = _holding(device)
    assert "ml/p" in dra_pods_at_risk(change, pods, claims, _slice_of(layouts)).pods
