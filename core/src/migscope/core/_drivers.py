"""NVIDIA driver versions and branch ranges, the axis along which MIG facts vary.

Profile ids and placements are fixed by the hardware, but the names and memory sizes that
``nvidia-smi mig -lgip`` prints depend on the driver: an A100 80GB calls its 7-slice profile
``7g.79gb`` on R535 and ``7g.80gb`` elsewhere, and an H100 NVL's 1g reports 10.62 GiB on one
driver and 10.75 GiB on R560. The catalogue therefore attaches each such fact to a
:class:`DriverRange` of driver *branches* (the first number of ``535.129.03``), the unit NVIDIA
releases and documents drivers in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from migscope.core._errors import UserError

_VERSION = re.compile(r"^[rR]?(\d{1,4})((?:\.\d{1,4}){0,3})$")


class DriverVersionError(UserError, ValueError):
    """Text that is not an NVIDIA driver version or branch."""


@dataclass(frozen=True, order=True)
class DriverVersion:
    """An NVIDIA driver version (``535.129.03``) or just its branch (``535``).

    Ordered by its numeric parts, so ``R535 < 535.129.03 < 550.54.15``.

    Attributes:
        parts: The dot-separated numbers, branch first: ``(535, 129, 3)``.
    """

    parts: tuple[int, ...]

    def __post_init__(self) -> None:
        if not self.parts or any(p < 0 for p in self.parts) or self.parts[0] == 0:
            raise DriverVersionError(f"not a driver version: {self.parts!r}")

    @property
    def branch(self) -> int:
        """The driver branch, the first number: ``535`` for ``535.129.03``."""
        return self.parts[0]

    @classmethod
    def parse(cls, text: str) -> DriverVersion:
        """Read ``"535"``, ``"R535"``, ``"r535"`` or ``"535.129.03"``.

        Raises:
            DriverVersionError: anything else, with a one-line message.
        """
        match = _VERSION.match(text.strip())
        if match is None or int(match.group(1)) == 0:
            raise DriverVersionError(
                f"not a driver version: {text!r} (expected e.g. 535, R535 or 535.129.03)"
            )
        rest = match.group(2)
        parts = (int(match.group(1)), *(int(p) for p in rest.split(".")[1:] if rest))
        return cls(parts)

    def __str__(self) -> str:
        if len(self.parts) == 1:
            return f"R{self.parts[0]}"
        # nvidia-smi writes the parts after the second with two digits: 535.129.03
        head = [str(p) for p in self.parts[:2]]
        return ".".join(head + [f"{p:02d}" for p in self.parts[2:]])


@dataclass(frozen=True)
class DriverRange:
    """Driver branches ``first`` to ``last``, both inclusive; ``None`` leaves that end open.

    ``DriverRange()`` is every driver, ``DriverRange(560)`` R560 and later,
    ``DriverRange(last=550)`` up to R550, ``DriverRange(535, 545)`` R535 to R545.
    """

    first: int | None = None
    last: int | None = None

    def __post_init__(self) -> None:
        for end in (self.first, self.last):
            if end is not None and end <= 0:
                raise ValueError(f"driver branch must be positive, got {end}")
        if self.first is not None and self.last is not None and self.first > self.last:
            raise ValueError(f"driver range R{self.first}-R{self.last} is empty")

    @property
    def is_any(self) -> bool:
        """True when the range covers every driver."""
        return self.first is None and self.last is None

    def contains(self, version: DriverVersion) -> bool:
        """Whether the branch of ``version`` lies in the range."""
        branch = version.branch
        if self.first is not None and branch < self.first:
            return False
        return self.last is None or branch <= self.last

    def __str__(self) -> str:
        if self.first is None and self.last is None:
            return "any driver"
        if self.first is None:
            return f"up to R{self.last}"
        if self.last is None:
            return f"R{self.first}+"
        if self.first == self.last:
            return f"R{self.first}"
        return f"R{self.first}-R{self.last}"
