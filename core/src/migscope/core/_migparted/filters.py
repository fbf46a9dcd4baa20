"""mig-parted ``device-filter`` strings read the way mig-parted reads them.

mig-parted (``pkg/types/device.go``, ``NewDeviceIDFromString``) splits a filter at ``:`` into
the packed device+vendor ID and an optional packed subsystem ID, and reads each part with Go's
``strconv.ParseUint(part, 0, 32)``: base 0, so ``"0x20B010DE"``, the decimal ``"548409566"``,
octal ``"0o4054010336"`` (or a leading ``0``), binary ``"0b..."`` and ``_`` digit separators
are all the same filter. The high 16 bits are the device, the low 16 the vendor. A string it
cannot read is silently ignored there (the entry then matches no GPU), so migscope refuses it
with the reason instead.

Sources: NVIDIA/mig-parted@bd7160f ``pkg/types/device.go`` (``NewDeviceIDFromString``,
``splitRawDeviceID``) and ``api/spec/v1/helpers.go`` (``MatchesDeviceFilter`` drops the
parse error); Go's ``strconv.ParseUint`` documentation for base 0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from migscope.core._errors import UserError

NVIDIA_VENDOR_ID = 0x10DE
_UINT32_MAX = 0xFFFFFFFF

# Go integer literals as strconv.ParseUint reads them with base 0: an optional base prefix,
# digits of that base, and "_" only between digits or right after a prefix.
_GO_UINT = re.compile(
    r"""^(?:
        0[xX](?P<hex>_?[0-9a-fA-F](?:_?[0-9a-fA-F])*)
      | 0[bB](?P<bin>_?[01](?:_?[01])*)
      | 0[oO](?P<oct>_?[0-7](?:_?[0-7])*)
      | 0(?P<legacy_oct>_?[0-7](?:_?[0-7])*)
      | (?P<dec>[1-9](?:_?[0-9])*|0)
    )$""",
    re.VERBOSE,
)
_BASES = {"hex": 16, "bin": 2, "oct": 8, "legacy_oct": 8, "dec": 10}


class DeviceFilterError(UserError, ValueError):
    """A device-filter string mig-parted cannot read, or one that can match no NVIDIA GPU."""


def parse_go_uint32(text: str) -> int:
    """``text`` as Go's ``strconv.ParseUint(text, 0, 32)`` reads it.

    Raises:
        DeviceFilterError: not an unsigned integer literal (no sign, no spaces), or over 32
            bits.
    """
    match = _GO_UINT.match(text)
    if match is None:
        raise DeviceFilterError(f"{text!r} is not a number (hex 0x..., decimal, octal or binary)")
    kind = next(k for k, v in match.groupdict().items() if v is not None)
    value = int(match[kind].replace("_", ""), _BASES[kind])
    if value > _UINT32_MAX:
        raise DeviceFilterError(f"{text!r} is larger than 32 bits")
    return value


@dataclass(frozen=True)
class DeviceFilter:
    """One ``device-filter`` item, as written and as mig-parted reads it.

    Attributes:
        text: The string as written in the config.
        device_vendor: Device and vendor packed as ``0xDDDDVVVV`` (the catalogue's form).
        subsystem: Subsystem device and vendor packed the same way, or None when absent.
            mig-parted then requires all four to match; the catalogue knows models by device
            ID only, so migscope matches models on ``device_vendor``.
    """

    text: str
    device_vendor: int
    subsystem: int | None = None

    @property
    def canonical(self) -> str:
        """The filter as mig-parted prints a ``DeviceID``: ``0x20B010DE[:0x134F10DE]``."""
        head = f"0x{self.device_vendor:08X}"
        return head if self.subsystem is None else f"{head}:0x{self.subsystem:08X}"


def parse_device_filter(text: str) -> DeviceFilter:
    """Read one device-filter string the way mig-parted does, refusing what matches nothing.

    Raises:
        DeviceFilterError: more than one ``:``, a part Go's base-0 parser rejects, or a
            device+vendor part whose vendor is not NVIDIA's ``0x10DE`` (``"0x2335"`` is
            device 0x0000 of vendor 0x2335 to mig-parted, so it would match no GPU).
    """
    parts = text.split(":")
    if len(parts) > 2:
        raise DeviceFilterError(f"it has {len(parts) - 1} ':', mig-parted allows one")
    device_vendor = parse_go_uint32(parts[0])
    if device_vendor & 0xFFFF != NVIDIA_VENDOR_ID:
        raise DeviceFilterError(
            f"it reads as device 0x{device_vendor >> 16:04X} of vendor "
            f"0x{device_vendor & 0xFFFF:04X}, and no NVIDIA GPU has that vendor"
        )
    subsystem = parse_go_uint32(parts[1]) if len(parts) == 2 else None
    return DeviceFilter(text, device_vendor, subsystem)
