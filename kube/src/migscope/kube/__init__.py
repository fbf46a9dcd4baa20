"""migscope's one Kubernetes API client: the only package that imports ``kubernetes``.

Everything else (the applier's workflow, the analyzer's pending pods) talks to the API
through :class:`Kube`, with objects as plain JSON dicts and errors it can act on
(:class:`Conflict`, :class:`NotFound`, :class:`TooManyRequests`). import-linter holds the
rule (``pyproject.toml``).
"""

from migscope.kube.client import (
    ApiError,
    Conflict,
    DryRunWrite,
    Kube,
    KubeError,
    NotFound,
    ReadOnlyKube,
    TooManyRequests,
    now_rfc3339,
)
from migscope.kube.config import KubeConfigError, api_client

__all__ = [
    "ApiError",
    "Conflict",
    "DryRunWrite",
    "Kube",
    "KubeConfigError",
    "KubeError",
    "NotFound",
    "ReadOnlyKube",
    "TooManyRequests",
    "api_client",
    "now_rfc3339",
]
