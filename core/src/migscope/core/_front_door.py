"""The lazy loading every distribution's front door uses (PEP 562).

A front door (a distribution's package ``__init__``) exports the names other distributions
use, but importing it must stay cheap: the CLI imports them to print ``--help``, which must
not load pandas, httpx or the Kubernetes client. So each exported name loads its module on
first use, through the ``__getattr__`` and ``__dir__`` this module makes, and is kept on the
package after that. docs/development.md ("Front doors") has the rule.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, homes: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``, whose names load on first use.

    Args:
        package: The package's ``__name__``.
        homes: ``{exported name: the submodule of package that defines it}``.
    """
    module = sys.modules[package]

    def getattr_(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{home}"), name)
        setattr(module, name, value)
        return value

    def dir_() -> list[str]:
        return sorted({*vars(module), *homes})

    return getattr_, dir_
