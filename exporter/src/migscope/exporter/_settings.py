"""Exporter settings: flags over environment over a config file over defaults.

Zero configuration must work (``migscope exporter`` on a GPU node with the kubelet socket at
its usual place), and every setting can also come from an environment variable
(``MIGSCOPE_EXPORTER_<NAME>``, for the DaemonSet) or a YAML file (``--config``, for a
ConfigMap). Unknown keys — in the file or as a ``MIGSCOPE_EXPORTER_`` variable — are errors,
reported in one line naming the key and the source.

The three sources are merged here and validated by one strict pydantic model. pydantic-settings
would do the merging, but importing it costs ~17 MiB of RSS (it pulls in asyncio and pydantic's
dataclass machinery), a quarter of the exporter's 60 MiB budget, for ~30 lines of work.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator

from migscope.core import (
    BUILTIN_WORDING,
    UserError,
    YamlProblem,
    describe_error,
    load_strict,
    parse_duration,
)

DEFAULT_KUBELET_SOCKET = Path("/var/lib/kubelet/pod-resources/kubelet.sock")
ENV_PREFIX = "MIGSCOPE_EXPORTER_"

_WORDING = {
    # Pydantic's own text for every error type: what `--interval 0.01` has always said
    # ("Input should be greater than or equal to 0.1"), placed by the one formatter.
    **{kind: "{msg}" for kind in BUILTIN_WORDING},
    "extra_forbidden": "unknown setting",
    "value_error": "{error}",  # a validator's own message (a bad duration), without "Value error, "
}


class SettingsError(UserError, ValueError):
    """Settings that cannot be used; the message is one line naming the key and source."""


def _seconds(value: object) -> object:
    """A duration written as text (``500ms``, ``10s``, ``1.5``) in seconds; numbers pass."""
    return parse_duration(value) if isinstance(value, str) else value


Seconds = Annotated[float, BeforeValidator(_seconds)]
"""Seconds, given as a number or as a duration (flags, environment and the config file alike)."""


class ExporterSettings(BaseModel):
    """Everything ``migscope exporter`` can be told; see docs/exporter.md for each key."""

    model_config = ConfigDict(extra="forbid", validate_default=True, frozen=True)

    backend: Literal["nvml", "dcgm", "sim"] = "nvml"
    scenario: str | None = Field(
        default=None, description="Scenario file or built-in name for --backend sim."
    )
    node: str | None = Field(
        default=None, description="Scenario node to simulate (default: $NODE_NAME or the first)."
    )
    listen: str = ":9400"
    web_config: Path | None = None
    interval: Seconds = Field(default=1.0, ge=0.1, le=60.0)
    gpm_interval: Seconds = Field(default=10.0, ge=0.1, le=600.0)
    gpm_refresh: Seconds = Field(
        # 2 s, not every cycle: one nvmlGpmMetricsGet per GPU or slice costs ~1.9 ms of CPU on
        # an H200 (docs/exporter.md#performance), the largest part of an idle exporter's CPU;
        # every 2 s halves it, and the activity counters stay exact, fresh within 2 s.
        default=2.0,
        ge=0.0,
        le=600.0,
        description="Seconds between GPM activity computations; 0: every sampling cycle; "
        "at most gpm_interval.",
    )
    energy_interval: Seconds = Field(default=30.0, ge=1.0)
    enumerate_interval: Seconds = Field(default=10.0, ge=1.0)
    idle_power_watts: float | None = Field(default=None, ge=0.0)
    pod_attribution: bool = True
    pod_source: Literal["auto", "kubelet", "scenario"] = Field(
        default="auto",
        description="Who says which pod holds a device: the kubelet, or (sim) the scenario.",
    )
    kubelet_socket: Path = DEFAULT_KUBELET_SOCKET
    kubelet_refresh: Seconds = Field(default=10.0, ge=0.5)
    kubelet_timeout: Seconds = Field(default=2.0, gt=0.0)
    dcgm_compat: bool = False
    dcgm_counters: Path | None = Field(
        default=None,
        description="dcgm-exporter collectors CSV (-f) choosing the --dcgm-compat families; "
        "unset: dcgm-exporter's etc/default-counters.csv.",
    )
    dcgm_host_label: Literal["Hostname", "hostname", "none"] = Field(
        default="Hostname",
        description="Host label of --dcgm-compat series: Hostname (dcgm-exporter <= 4.8.2), "
        "hostname (4.8.3+) or none (dcgm-exporter -n).",
    )
    dcgm_host: str | None = Field(
        default=None, description="nv-hostengine host[:port]; unset runs DCGM embedded."
    )
    dcgm_bindings: Path | None = Field(
        default=None, description="Directory of DCGM's Python bindings (dcgm_agent.py, ...)."
    )
    max_concurrent_scrapes: int = Field(default=4, ge=1, le=64)
    hostname: str = Field(default_factory=lambda: _default_hostname(os.environ))
    log_level: Literal["debug", "info", "warning", "error"] = "info"

    @field_validator("listen")
    @classmethod
    def _listen(cls, value: str) -> str:
        host, sep, port = value.rpartition(":")
        if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise ValueError(f"expected [host]:port such as :9400, got {value!r}")
        del host
        return value


def _default_hostname(environ: Mapping[str, str]) -> str:
    """``$NODE_NAME``, else the OS host name: what dcgm-exporter's ``Hostname`` label says.

    dcgm-exporter's ``hostname.GetHostname`` (internal/pkg/hostname, NVIDIA/dcgm-exporter
    d5e5f51) reads ``NODE_NAME`` and falls back to ``os.Hostname()``; in a pod without
    ``NODE_NAME`` that is the pod's name.
    """
    return environ.get("NODE_NAME") or socket.gethostname()


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        # The one strict loader: size, depth and alias limits, and no silent duplicate keys.
        data = load_strict(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SettingsError(f"config {path}: cannot read: {exc.strerror or exc}") from exc
    except YamlProblem as exc:
        where = f":{exc.line}" if exc.line is not None else ""
        raise SettingsError(f"config {path}{where}: {exc.problem}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise SettingsError(f"config {path}: expected a mapping of settings")
    return {str(k).replace("-", "_"): v for k, v in data.items()}


def _from_env(environ: Mapping[str, str]) -> dict[str, str]:
    return {
        key[len(ENV_PREFIX) :].lower(): value
        for key, value in environ.items()
        if key.startswith(ENV_PREFIX)
    }


def load_settings(
    *,
    config_file: Path | None = None,
    overrides: dict[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> ExporterSettings:
    """Settings from ``overrides`` (flags), the environment and ``config_file``.

    Raises:
        SettingsError: an unknown key or invalid value, as one line naming where it came from.
    """
    flags = {k: v for k, v in (overrides or {}).items() if v is not None}
    env = _from_env(os.environ if environ is None else environ)
    file = _read_yaml(config_file) if config_file is not None else {}
    origin = {key: f"config {config_file}" for key in file}
    origin.update({key: f"${ENV_PREFIX}{key.upper()}" for key in env})
    origin.update({key: "flag" for key in flags})
    try:
        return ExporterSettings(**{**file, **env, **flags})
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        key = ".".join(str(p) for p in first["loc"])
        _line, problem = describe_error(first, {}, wording=_WORDING)
        raise SettingsError(f"{origin.get(key, 'settings')}: {problem}") from exc
