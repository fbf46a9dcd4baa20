"""Where the credentials come from: a kubeconfig file, the pod's service account, or the default.

One function so that ``analyze --pending-pods`` and ``apply`` find a cluster the same way and
fail with the same one line. A token that cannot go into an HTTP header (a newline inside, as
when two lines were pasted) is refused here, by where it came from: the HTTP library's own
error quotes the header, token included.
"""

from __future__ import annotations

import os

from kubernetes import client, config

from migscope.core.errors import one_line
from migscope.kube.client import KubeError

__all__ = ["KubeConfigError", "api_client"]


class KubeConfigError(KubeError):
    """No usable Kubernetes configuration (the message says what was tried)."""


def _token_problem(api: client.ApiClient) -> str | None:
    """What makes a configured token unsendable (not the token itself), or None."""
    for value in (api.configuration.api_key or {}).values():
        if not isinstance(value, str):
            continue
        if "\n" in value or "\r" in value:
            return "the user's token contains a newline"
        if any(not (" " <= c <= "~") for c in value):
            return "the user's token contains a control or non-ASCII character"
    return None


def _checked(api: client.ApiClient, source: str) -> client.ApiClient:
    problem = _token_problem(api)
    if problem is not None:
        raise KubeConfigError(f"{source}: {problem}")
    return api


def api_client(kubeconfig: str | None = None, *, context: str | None = None) -> client.ApiClient:
    """A ``kubernetes.client.ApiClient``: the given kubeconfig, else in-cluster, else the default.

    Raises:
        KubeConfigError: no usable configuration (one line saying what was tried), or a token
            that cannot be sent (said without the token).
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
        return _checked(from_file, kubeconfig)
    try:
        config.load_incluster_config()
        return _checked(client.ApiClient(), "the pod's service account")
    except config.ConfigException:
        pass
    try:
        default: client.ApiClient = config.new_client_from_config(context=context)
    except (config.ConfigException, ValueError, OSError) as exc:
        raise KubeConfigError(
            f"no Kubernetes credentials (not in a cluster, no usable kubeconfig: {one_line(exc)})"
        ) from exc
    return _checked(default, "the default kubeconfig")
