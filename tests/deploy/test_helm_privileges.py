"""Issue 23: the exporter DaemonSet has exactly the privileges docs/install.md#privileges lists.

The table in docs/install.md ("## Privileges") is parsed like docs/applier.md's RBAC table
(tests/deploy/test_helm.py): each row's values are rendered through Helm and the exporter
container must carry exactly that user, those capabilities, privileged flag, privilege
escalation, ``NVIDIA_MIG_MONITOR_DEVICES`` and hostPath volumes, nothing more. The same holds
for the OpenShift SecurityContextConstraints the chart can create, which must admit the pod it
is made for and nothing it does not render.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from deploy.test_helm import (
    ROOT,
    exporter_container,
    one,
    pod_spec,
    render,
    render_raw,
    validate,
)

helm = pytest.importorskip("helm_python", reason="helm-python-sdk not installed (test extra)")

INSTALL = ROOT / "docs" / "install.md"
BASE_ENV = {"NODE_NAME", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES"}


def _set(values: dict[str, Any], dotted: str, text: str) -> None:
    node = values
    *parents, leaf = dotted.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[leaf] = {"true": True, "false": False}.get(text, text)


def documented_privileges() -> list[dict[str, Any]]:
    """The rows of docs/install.md's privileges table, as values and expected fields."""
    section = INSTALL.read_text().split("\n## Privileges\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 7 or cells[0] in ("values", "") or set(cells[0]) <= {"-"}:
            continue
        values: dict[str, Any] = {}
        for key, text in re.findall(r"`([A-Za-z.]+)=([^`]+)`", cells[0]):
            _set(values, key, text)
        assert values or cells[0] == "defaults", cells[0]
        if cells[2] == "all (privileged)":
            caps = None
        else:
            m = re.fullmatch(r"drop `ALL`(?:, add `(\w+)`)?", cells[2])
            assert m, cells[2]
            caps = {"drop": ["ALL"], **({"add": [m[1]]} if m[1] else {})}
        yes_no = {"yes": True, "no": False}
        env = None if cells[5] == "unset" else cells[5].strip("`")
        host = None if cells[6] == "none" else cells[6].strip("`")
        rows.append(
            {
                "label": cells[0],
                "values": values,
                "user": int(cells[1]),
                "capabilities": caps,
                "privileged": yes_no[cells[3]],
                "escalation": yes_no[cells[4]],
                "monitor": env,
                "hostPath": host,
            }
        )
    return rows


ROWS = documented_privileges()


def test_the_table_covers_every_combination_the_chart_offers() -> None:
    assert len(ROWS) == 5
    combos = {
        (
            r["values"].get("exporter", {}).get("migMonitor", {}).get("enabled", True),
            r["values"].get("exporter", {}).get("podAttribution", {}).get("enabled", True),
            r["values"].get("exporter", {}).get("privileged", False),
        )
        for r in ROWS
    }
    assert {(m, a, False) for m in (True, False) for a in (True, False)} <= combos
    assert (True, True, True) in combos


@pytest.mark.parametrize("row", ROWS, ids=[r["label"] for r in ROWS])
def test_the_daemonset_has_exactly_the_documented_privileges(row: dict[str, Any]) -> None:
    objs = render(row["values"])
    ds = one(objs, "DaemonSet", "exporter")
    validate(ds)  # the API server's own rules (Kubernetes OpenAPI, strict), every version
    c = exporter_container(objs)
    sc = c["securityContext"]
    expected = {
        "readOnlyRootFilesystem": True,
        "runAsUser": row["user"],
        "runAsGroup": row["user"],
        "runAsNonRoot": row["user"] != 0,
        "allowPrivilegeEscalation": row["escalation"],
    }
    if row["privileged"]:
        expected["privileged"] = True
    if row["capabilities"] is not None:
        expected["capabilities"] = row["capabilities"]
    assert sc == expected
    assert pod_spec(ds)["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    assert "hostNetwork" not in pod_spec(ds)
    assert "hostPID" not in pod_spec(ds)
    env = {e["name"]: e.get("value") for e in c["env"]}
    monitor = {"NVIDIA_MIG_MONITOR_DEVICES"} if row["monitor"] else set()
    assert set(env) == BASE_ENV | monitor
    assert env.get("NVIDIA_MIG_MONITOR_DEVICES") == row["monitor"]
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all"
    assert env["NVIDIA_DRIVER_CAPABILITIES"] == "utility"
    # the toolkit refuses NVIDIA_MIG_MONITOR_DEVICES without CAP_SYS_ADMIN in the bounding set
    if row["monitor"]:
        assert row["privileged"] or "SYS_ADMIN" in sc["capabilities"]["add"]
    volumes = pod_spec(ds)["volumes"]
    host = [v["hostPath"]["path"] for v in volumes if "hostPath" in v]
    assert host == ([row["hostPath"]] if row["hostPath"] else [])
    assert {v["name"] for v in volumes} == {"tmp"} | ({"pod-resources"} if host else set())
    # no device node or /dev from the host: the NVIDIA runtime injects them
    assert not [m for m in c["volumeMounts"] if m["mountPath"].startswith("/dev")]
    assert "resources" in c
    assert "nvidia.com/gpu" not in c["resources"].get("limits", {})


def test_the_values_yaml_and_readme_say_the_same() -> None:
    """The reason and the sources sit above the key in values.yaml; the README's security
    section names the same privileges."""
    values_text = (ROOT / "deploy" / "helm" / "migscope" / "values.yaml").read_text()
    note = values_text.split("  migMonitor:\n", 1)[0].rsplit("  # Privileges", 1)[1]
    for source in (
        "gen/nvml/nvml.h",
        "mig-user-guide/device-nodes-and-capabilities",
        "nvidia-container-toolkit",
        "dcgm-exporter@",
        "gpu-operator@",
        "Not yet run on a MIG-enabled GPU in a container",
    ):
        assert source in note.replace("\n  # ", ""), source
    readme = (ROOT / "deploy" / "helm" / "migscope" / "README.md").read_text()
    security = readme.split("## Security", 1)[1].split("\n## ", 1)[0]
    for fact in ("`SYS_ADMIN`", "NVIDIA_MIG_MONITOR_DEVICES=all", "UID 0", "#privileges"):
        assert fact in security, fact


def test_privileged_through_the_free_form_security_context_is_refused() -> None:
    with pytest.raises(Exception, match=r"set exporter\.privileged"):
        render_raw({"exporter": {"securityContext": {"privileged": True}}})
    # other fields still merge over the chart's
    c = exporter_container(render({"exporter": {"securityContext": {"privileged": False}}}))
    assert c["securityContext"]["privileged"] is False


def scc(values: dict[str, Any]) -> dict[str, Any] | None:
    found = [o for o in render(values) if o["kind"] == "SecurityContextConstraints"]
    assert len(found) <= 1
    return found[0] if found else None


def _admits(constraints: dict[str, Any], ds: dict[str, Any]) -> None:
    """What OpenShift's admission checks of a pod against an SCC, for the fields we render."""
    spec = pod_spec(ds)
    (c,) = spec["containers"]
    sc = c["securityContext"]
    assert constraints["runAsUser"] == {"type": "MustRunAs", "uid": sc["runAsUser"]}
    assert bool(sc.get("privileged")) == constraints["allowPrivilegedContainer"]
    assert sc["allowPrivilegeEscalation"] == constraints["allowPrivilegeEscalation"]
    added = set(sc.get("capabilities", {}).get("add", []))
    assert added == set(constraints["allowedCapabilities"] or [])
    kinds = {next(k for k in v if k != "name") for v in spec["volumes"]}
    assert kinds <= set(constraints["volumes"])
    assert ("hostPath" in kinds) == constraints["allowHostDirVolumePlugin"]
    assert ("hostPath" in constraints["volumes"]) == constraints["allowHostDirVolumePlugin"]
    assert constraints["readOnlyRootFilesystem"] is sc["readOnlyRootFilesystem"]
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert constraints["seccompProfiles"] == ["runtime/default"]
    for host in ("allowHostNetwork", "allowHostPID", "allowHostIPC", "allowHostPorts"):
        assert constraints[host] is False


@pytest.mark.parametrize("row", ROWS, ids=[r["label"] for r in ROWS])
def test_the_openshift_scc_admits_exactly_the_pod_it_is_made_for(row: dict[str, Any]) -> None:
    values: dict[str, Any] = {**row["values"]}
    values["exporter"] = {**values.get("exporter", {}), "openshift": {"createSCC": True}}
    constraints = scc(values)
    assert constraints is not None
    assert constraints["apiVersion"] == "security.openshift.io/v1"
    assert "namespace" not in constraints["metadata"]  # cluster-scoped
    objs = render(values)
    ds = one(objs, "DaemonSet", "exporter")
    _admits(constraints, ds)
    sa = one(objs, "ServiceAccount", "exporter")["metadata"]["name"]
    assert constraints["users"] == [f"system:serviceaccount:monitoring:{sa}"]
    assert constraints["groups"] == []
    annotations = ds["spec"]["template"]["metadata"]["annotations"]
    assert annotations["openshift.io/required-scc"] == constraints["metadata"]["name"]


def test_the_scc_is_off_by_default_and_the_check_can_fail() -> None:
    assert scc({}) is None
    template = one(render(), "DaemonSet", "exporter")["spec"]["template"]
    assert "openshift.io/required-scc" not in (template["metadata"].get("annotations") or {})
    objs = render({"exporter": {"openshift": {"createSCC": True}}})
    constraints = scc({"exporter": {"openshift": {"createSCC": True}}})
    assert constraints is not None
    ds = one(objs, "DaemonSet", "exporter")
    wider = {**constraints, "allowedCapabilities": ["SYS_ADMIN", "NET_ADMIN"]}
    with pytest.raises(AssertionError):
        _admits(wider, ds)
    no_host = {**constraints, "allowHostDirVolumePlugin": False}
    with pytest.raises(AssertionError):
        _admits(no_host, ds)


def test_the_table_check_can_fail() -> None:
    """A row that disagrees with the render (here: no SYS_ADMIN on the defaults) fails."""
    wrong = {**ROWS[0], "capabilities": {"drop": ["ALL"]}}
    with pytest.raises(AssertionError):
        test_the_daemonset_has_exactly_the_documented_privileges(wrong)
    wrong = {**ROWS[0], "monitor": None}
    with pytest.raises(AssertionError):
        test_the_daemonset_has_exactly_the_documented_privileges(wrong)
