"""Put a named layout into the mig-parted ConfigMap MIG Manager reads, losing nothing.

MIG Manager resolves ``nvidia.com/mig.config=<name>`` in *one* config file: the ConfigMap
the ClusterPolicy names (``spec.migManager.config.name``), or, when it names none, a config
it generates or the operator's default. Writing our layouts anywhere else would make every
relabel end in ``failed``. So the target is found first (:func:`find_target`), and when the
ClusterPolicy points at no custom ConfigMap the applier says so and prints the patch instead
of relabelling.

The write is a read-merge-replace conditional on the ``resourceVersion`` (another writer in
between gets us a 409: read and merge again), and the merge never drops or rewrites a config
it did not add (:func:`migscope.core._migparted.merge_configs`): a name that exists with
other entries is a conflict to report, not to overwrite.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from migscope.core import (
    ConfigConflictError,
    ConfigError,
    MigPartedConfig,
    UserError,
    emit_config,
    merge_configs,
    parse_config,
)
from migscope.kube import ApiError, Conflict, Kube

HEADER = (
    "Managed in part by migscope: configs named migscope-* were added by `migscope apply`;\n"
    "every other config is kept as it was."
)


class ConfigMapError(UserError):
    """The ConfigMap cannot take the config (unreadable, a name clash, the ClusterPolicy)."""


@dataclass(frozen=True)
class ConfigTarget:
    """Where the named configs go.

    Attributes:
        namespace: ConfigMap namespace.
        name: ConfigMap name.
        key: Key holding the YAML.
        policy: The ClusterPolicy's name, if one was found.
        policy_points_here: Whether that ClusterPolicy makes MIG Manager read this ConfigMap.
        patch: The ``kubectl`` command that makes it so, when it does not.
    """

    namespace: str
    name: str
    key: str
    policy: str | None
    policy_points_here: bool
    patch: str | None = None


def find_target(kube: Kube, *, namespace: str, name: str | None, key: str) -> ConfigTarget:
    """Work out which ConfigMap MIG Manager reads, and whether ``name`` (if given) is it."""
    policies = kube.cluster_policies()
    policy = policies[0] if policies else None
    configured = (
        ((policy.get("spec") or {}).get("migManager") or {}).get("config") or {}
        if policy is not None
        else {}
    )
    read_by_manager = configured.get("name") or None
    chosen = name or read_by_manager or "migscope-mig-parted-config"
    policy_name = (policy.get("metadata") or {}).get("name") if policy is not None else None
    points_here = read_by_manager == chosen
    patch = None
    if policy is not None and not points_here:
        body = {"spec": {"migManager": {"config": {"name": chosen, "default": "all-disabled"}}}}
        patch = (
            f"kubectl patch clusterpolicies.nvidia.com {policy_name} --type merge "
            f"-p '{json.dumps(body, separators=(',', ':'))}'"
        )
    return ConfigTarget(namespace, chosen, key, policy_name, points_here, patch)


def _parse(cm: dict[str, Any], target: ConfigTarget) -> MigPartedConfig | None:
    text = (cm.get("data") or {}).get(target.key)
    if not text:
        return None
    try:
        return parse_config(text)
    except ConfigError as exc:
        raise ConfigMapError(
            f"configmap {target.namespace}/{target.name} key {target.key} is not a valid "
            f"mig-parted config ({exc}); fix it before applying"
        ) from exc


def ensure_config(
    kube: Kube, target: ConfigTarget, config: MigPartedConfig, *, attempts: int = 5
) -> str:
    """Make the ConfigMap hold ``config``'s named configs; returns what happened.

    ``"present"`` (already there, nothing written), ``"added"`` or ``"created"``.

    Raises:
        ConfigMapError: a name exists with different entries, the YAML there is invalid,
            or other writers kept winning for ``attempts`` rounds.
    """
    for _ in range(attempts):
        cm = kube.get_configmap(target.namespace, target.name)
        if cm is None:
            body = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": target.name,
                    "namespace": target.namespace,
                    "labels": {"app.kubernetes.io/managed-by": "migscope"},
                },
                "data": {target.key: emit_config(config, header=HEADER)},
            }
            try:
                kube.create_configmap(target.namespace, body)
            except Conflict:
                continue  # created by someone else meanwhile: merge into theirs
            return "created"
        existing = _parse(cm, target)
        try:
            merged = config if existing is None else merge_configs(existing, config)
        except ConfigConflictError as exc:
            raise ConfigMapError(
                f"configmap {target.namespace}/{target.name}: {exc}; migscope never "
                "overwrites a config it did not write"
            ) from exc
        if existing is not None and merged == existing:
            return "present"
        data = dict(cm.get("data") or {})
        data[target.key] = emit_config(merged, header=HEADER)
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                **{k: v for k, v in cm["metadata"].items() if k != "managedFields"},
            },
            "data": data,
        }
        if "binaryData" in cm:
            body["binaryData"] = cm["binaryData"]
        try:
            kube.replace_configmap(target.namespace, body)
        except Conflict:
            continue
        return "added"
    raise ConfigMapError(
        f"configmap {target.namespace}/{target.name}: still changing under us after "
        f"{attempts} attempts"
    )


def config_present(kube: Kube, target: ConfigTarget, name: str) -> bool:
    """Whether the ConfigMap already holds config ``name`` (for the dry run)."""
    try:
        cm = kube.get_configmap(target.namespace, target.name)
    except ApiError:
        return False
    if cm is None:
        return False
    existing = _parse(cm, target)
    return existing is not None and name in existing.mig_configs
