"""Find and import DCGM's Python bindings without leaving them on ``sys.path``.

Why this is its own job: the bindings are not on PyPI. They ship with DCGM
(``datacenter-gpu-manager-4-core``) in ``/usr/share/datacenter-gpu-manager-4/bindings/python3``
(``/usr/local/dcgm/...`` for DCGM 3), import each other by top-level name, and are ctypes
wrappers around a *local* ``libdcgm.so.4``, needed even to talk to a remote hostengine. They
are untyped, so they are handled as ``Any``, and imported from their directory without leaving
that directory on ``sys.path`` or their modules in ``sys.modules`` (:func:`import_bindings`).
"""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from migscope.core import one_line
from migscope.exporter._backends.base import BackendError

DEFAULT_BINDINGS = (
    Path("/usr/share/datacenter-gpu-manager-4/bindings/python3"),
    Path("/usr/local/dcgm/bindings/python3"),
)
"""Where DCGM 4 and DCGM 3 install their Python bindings, searched in this order."""

_BINDING_MODULES = ("dcgm_structs", "dcgm_fields", "dcgm_agent")

LIBRARY_MISSING = (
    "libdcgm.so.4 not found: DCGM's Python bindings need the local DCGM library even to "
    "talk to a remote nv-hostengine; install datacenter-gpu-manager-4-core (or mount "
    "libdcgm.so.4 into the container and add its directory to LD_LIBRARY_PATH)"
)
"""What to do when the bindings load but ``libdcgm.so.4`` does not."""


@dataclass(frozen=True)
class Bindings:
    """The three binding modules, imported from one directory."""

    directory: Path
    structs: ModuleType
    fields: ModuleType
    agent: ModuleType


def find_bindings(explicit: Path | None) -> Path:
    """The directory holding ``dcgm_agent.py``: the one given, else the default locations.

    Args:
        explicit: ``--dcgm-bindings``, or None to search :data:`DEFAULT_BINDINGS`.

    Raises:
        BackendError: no ``dcgm_agent.py`` in any candidate; the message says what to install.
    """
    candidates = (explicit,) if explicit is not None else DEFAULT_BINDINGS
    for candidate in candidates:
        if (candidate / "dcgm_agent.py").is_file():
            return candidate
    searched = ", ".join(str(c) for c in candidates)
    raise BackendError(
        f"DCGM Python bindings (dcgm_agent.py) not found in {searched}: install DCGM 4 "
        "(package datacenter-gpu-manager-4-core; DCGM is not on PyPI) or point "
        "--dcgm-bindings at the directory that holds dcgm_agent.py"
    )


def _inside(module: ModuleType, directory: Path) -> bool:
    path = getattr(module, "__file__", None)
    if not path:
        return False
    return Path(os.path.realpath(path)).parent == Path(os.path.realpath(directory))


def import_bindings(directory: Path) -> Bindings:
    """Import the binding modules from ``directory`` and leave no trace behind.

    The bindings import each other by top-level name (``import dcgm_structs``), so their
    directory must be on ``sys.path`` while they load. Afterwards ``sys.path`` is restored and
    the modules are taken out of ``sys.modules`` again (the backend keeps its own references,
    and the modules keep theirs to each other): two backends, or two tests, never share module
    state such as the bindings' loaded-library global, and modules of the same name that were
    imported before are put back.

    Raises:
        BackendError: a binding module failed to import (one line, the cause chained).
    """
    shadowed = {
        name: module
        for name, module in list(sys.modules.items())
        if "." not in name and (directory / f"{name}.py").is_file()
    }
    before = set(sys.modules)
    saved_path = list(sys.path)
    for name in shadowed:
        del sys.modules[name]
    sys.path.insert(0, str(directory))
    importlib.invalidate_caches()
    try:
        structs, fields, agent = (importlib.import_module(n) for n in _BINDING_MODULES)
    except Exception as exc:
        raise BackendError(
            f"DCGM Python bindings in {directory} failed to import: "
            f"{type(exc).__name__}: {one_line(exc)}"
        ) from exc
    finally:
        sys.path[:] = saved_path
        for name in set(sys.modules) - before:
            if "." not in name and _inside(sys.modules[name], directory):
                del sys.modules[name]
        sys.modules.update(shadowed)
    return Bindings(directory, structs, fields, agent)
