"""Read the MIG tables ``nvidia-smi`` prints, to compare real hardware with the catalogue.

``nvidia-smi mig -lgip`` (profiles), ``-lgipp`` (possible placements), ``-lgi`` (existing GPU
instances) and ``nvidia-smi -L`` (devices) are what operators paste into tickets and what NVIDIA
documents; migscope pins its catalogue to such recordings and can check a node's own output
against it. Parsers take text (no I/O) and read what real pastes hold: the column widths of
every driver, several GPUs, CRLF line ends, trailing spaces, markdown indentation, block
quotes (``> ``) and fences, shell prompts and other commands' output around the table, blank
lines a web page put between a profile's two table lines, and tables whose ``|`` borders a
renderer dropped. They skip ``#`` comment lines and ignore lines they do not understand.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class ListedProfile:
    """One profile row of ``nvidia-smi mig -lgip`` (two table lines per profile)."""

    gpu: int
    name: str
    profile_id: int
    free: int
    total: int
    memory_gib: float
    p2p: bool
    sm_count: int
    decoders: int
    encoders: int
    copy_engines: int
    jpegs: int
    ofas: int


@dataclass(frozen=True)
class ListedPlacements:
    """One row of ``nvidia-smi mig -lgipp``: the starts a profile may take, and its size."""

    gpu: int
    profile_id: int
    starts: tuple[int, ...]
    size: int


@dataclass(frozen=True)
class ListedGpuInstance:
    """One row of ``nvidia-smi mig -lgi``: an existing GPU instance and where it sits."""

    gpu: int
    name: str
    profile_id: int
    instance_id: int
    start: int
    size: int


@dataclass(frozen=True)
class ListedDevice:
    """A GPU of ``nvidia-smi -L`` with the MIG devices listed under it."""

    index: int
    name: str
    uuid: str
    mig_devices: tuple[tuple[str, str], ...]  # (profile name, MIG device UUID)


_QUOTE = re.compile(r"^(?:\s*>)+")


def _lines(text: str) -> list[str]:
    """The text's lines without comments, quote markers, surrounding space or blank lines."""
    lines = []
    for raw in text.splitlines():
        if raw.startswith("#"):
            continue
        line = _QUOTE.sub("", raw).strip()
        if line:
            lines.append(line)
    return lines


_LGIP_FIRST = re.compile(
    r"^\|?\s*(?P<gpu>\d+)\s+MIG\s+(?P<name>\S+)\s+(?P<id>\d+)\s+(?P<free>\d+)\s*/\s*(?P<total>\d+)"
    r"\s+(?P<mem>\d+(?:\.\d+)?)\s+(?P<p2p>Yes|No)\s+(?P<sm>\d+)\s+(?P<dec>\d+)\s+(?P<enc>\d+)\s*\|?$"
)
_LGIP_SECOND = re.compile(r"^\|?\s*(?P<ce>\d+)\s+(?P<jpeg>\d+)\s+(?P<ofa>\d+)\s*\|?$")


def parse_lgip(text: str) -> list[ListedProfile]:
    """Parse ``nvidia-smi mig -lgip``; each profile spans two lines of the table."""
    profiles = []
    lines = _lines(text)
    for first, second in itertools.pairwise(lines):
        head = _LGIP_FIRST.match(first)
        tail = _LGIP_SECOND.match(second)
        if not head or not tail:
            continue
        profiles.append(
            ListedProfile(
                gpu=int(head["gpu"]),
                name=head["name"],
                profile_id=int(head["id"]),
                free=int(head["free"]),
                total=int(head["total"]),
                memory_gib=float(head["mem"]),
                p2p=head["p2p"] == "Yes",
                sm_count=int(head["sm"]),
                decoders=int(head["dec"]),
                encoders=int(head["enc"]),
                copy_engines=int(tail["ce"]),
                jpegs=int(tail["jpeg"]),
                ofas=int(tail["ofa"]),
            )
        )
    return profiles


_LGIPP = re.compile(
    r"^GPU\s+(?P<gpu>\d+)\s+Profile\s+ID\s+(?P<id>\d+)\s+Placements?\s*:\s*"
    r"\{(?P<starts>[\d,\s]*)\}\s*:\s*(?P<size>\d+)$"
)


def parse_lgipp(text: str) -> list[ListedPlacements]:
    """Parse ``nvidia-smi mig -lgipp`` lines like ``GPU 0 Profile ID 9 Placements: {0,4}:4``."""
    rows = []
    for line in _lines(text):
        match = _LGIPP.match(line)
        if match:
            starts = tuple(int(s) for s in match["starts"].replace(" ", "").split(",") if s)
            rows.append(
                ListedPlacements(int(match["gpu"]), int(match["id"]), starts, int(match["size"]))
            )
    return rows


_LGI = re.compile(
    r"^\|?\s*(?P<gpu>\d+)\s+MIG\s+(?P<name>\S+)\s+(?P<pid>\d+)\s+(?P<iid>\d+)\s+"
    r"(?P<start>\d+):(?P<size>\d+)\s*\|?$"
)


def parse_lgi(text: str) -> list[ListedGpuInstance]:
    """Parse ``nvidia-smi mig -lgi``: existing GPU instances with ``start:size`` placements."""
    rows = []
    for line in _lines(text):
        match = _LGI.match(line)
        if match:
            rows.append(
                ListedGpuInstance(
                    gpu=int(match["gpu"]),
                    name=match["name"],
                    profile_id=int(match["pid"]),
                    instance_id=int(match["iid"]),
                    start=int(match["start"]),
                    size=int(match["size"]),
                )
            )
    return rows


_LIST_GPU = re.compile(r"^GPU (?P<index>\d+): (?P<name>.+?) \(UUID: (?P<uuid>[^)]+)\)$")
_LIST_MIG = re.compile(r"^MIG (?P<name>\S+)\s+Device\s+\d+: \(UUID: (?P<uuid>[^)]+)\)$")


def parse_list(text: str) -> list[ListedDevice]:
    """Parse ``nvidia-smi -L``: GPUs with their MIG devices (old and new UUID formats)."""
    devices: list[ListedDevice] = []
    for line in _lines(text):
        gpu = _LIST_GPU.match(line)
        if gpu:
            devices.append(ListedDevice(int(gpu["index"]), gpu["name"], gpu["uuid"], ()))
            continue
        mig = _LIST_MIG.match(line)
        if mig and devices:
            last = devices[-1]
            entry = (mig["name"], mig["uuid"])
            devices[-1] = ListedDevice(last.index, last.name, last.uuid, (*last.mig_devices, entry))
    return devices
