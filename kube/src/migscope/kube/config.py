"""Where the credentials come from: a kubeconfig file, the pod's service account, or the default.

One function so that ``analyze --pending-pods`` and ``apply`` find a cluster the same way and
fail with the same one line.
"""

from __future__ import annotations

import os

from kubernetes import client, config

from migscope.core.errors import one_line
from migscope.kube.client import KubeError

__all__ = ["KubeConfigError", "api_client"]


class KubeConfigError(KubeError):
    """No usable Kubernetes configuration (the message says what was tried)."""


def api_client(kubeconfig: str | None = None, *, context: str | None = None) -> client.ApiClient:
    """A ``kubernetes.client.ApiClient``: the given kubeconfig, else in-cluster, else the default.

    Raises:
        KubeConfigError: no usable configuration (one line saying what was tried).
    """
    if kubeconfig is not None:
        if not os.path.exists(kubeconfig):
            raise KubeConfigError(f"{kubeconfig}: no such kubeconfig file")
        try:
            from_file: client.ApiClient = config.new_client_from_config(
                config_file=kubeconfig, context=context
            )
        except (config.ConfigException, ValueError, OSError) as exc:
            raise KubeConfigError(f"{kubeconfig}: {one_line(exc)}") from exc
        return from_file
    try:
        config.load_incluster_config()
        return client.ApiClient()
    except config.ConfigException:
        pass
    try:
        default: client.ApiClient = config.new_client_from_config(context=context)
    except (config.ConfigException, ValueError, OSError) as exc:
        raise KubeConfigError(
            f"no Kubernetes credentials (not in a cluster, no usable kubeconfig: {one_line(exc)})"
        ) from exc
    return default
