"""migscope's one Kubernetes API client: the only package that imports ``kubernetes``.

Everything else (the applier's workflow, the analyzer's pending pods) talks to the API
through :class:`Kube`, with objects as plain JSON dicts and errors it can act on
(:class:`Conflict`, :class:`NotFound`, :class:`TooManyRequests`). import-linter holds the
rule (``pyproject.toml``).

The names below are this distribution's front door: the only names other distributions and the
CLI import from it. Each loads its module on first use (PEP 562), so importing the package
costs nothing until a name is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from migscope.core import lazy_exports

if TYPE_CHECKING:
    from migscope.kube._client import (
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
    from migscope.kube._credentials import KubeConfigError, api_client

_HOME = {
    "ApiError": "_client",
    "Conflict": "_client",
    "DryRunWrite": "_client",
    "Kube": "_client",
    "KubeError": "_client",
    "NotFound": "_client",
    "ReadOnlyKube": "_client",
    "TooManyRequests": "_client",
    "now_rfc3339": "_client",
    "KubeConfigError": "_credentials",
    "api_client": "_credentials",
}
"""Each exported name's module (under ``migscope.kube``)."""

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


__getattr__, __dir__ = lazy_exports(__name__, _HOME)
