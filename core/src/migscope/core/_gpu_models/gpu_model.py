"""A MIG-capable GPU model and its GPU-instance profiles: the nouns of the catalogue.

:class:`GpuModel` holds a model's profiles (:class:`GiProfile`), with the names and memory
sizes that only some drivers report (:class:`ProfileName`, :class:`MemoryFact`) and how sure
the data is (:class:`Evidence`); the PCI-ID and profile-name helpers read and write the forms
NVML and mig-parted use. The models themselves are in this package's architecture modules;
:mod:`migscope.core._catalogue` finds them, and is where the rest of migscope imports these
names from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum

from migscope.core._drivers import DriverRange, DriverVersion
from migscope.core._errors import UserError

NVIDIA_VENDOR_ID = 0x10DE


class CatalogueError(UserError, ValueError):
    """Base class for catalogue lookups that fail on user input."""


class UnknownGpuError(CatalogueError):
    """No catalogued GPU model matches the given key, name or PCI device ID."""


class UnknownProfileError(CatalogueError):
    """A profile name that the GPU model does not offer."""


class Evidence(str, Enum):
    """How sure we are of a model's data, strongest first.

    ``MEASURED`` data was compared field by field with real ``nvidia-smi``/NVML output that
    lives in this repository's fixtures; ``DOCUMENTED`` comes from NVIDIA's MIG user guide and
    mig-parted's configs; ``INFERRED`` fills gaps by analogy with sibling parts and is flagged
    so that nobody mistakes it for a measurement.
    """

    MEASURED = "measured"
    DOCUMENTED = "documented"
    INFERRED = "inferred"


@dataclass(frozen=True)
class ProfileName:
    """A name a profile goes by, on the drivers (and boards) that print it.

    Names change with the driver while the profile (its NVML id and placements) stays: an
    A100 80GB's 7-slice profile is ``7g.79gb`` on R535 and ``7g.80gb`` elsewhere. A
    mig-parted config must use the name the node's driver prints, so each name carries the
    branches it was seen on and where that was seen.

    Attributes:
        name: The name without the ``"MIG "`` prefix.
        drivers: Driver branches that print this name.
        evidence: Where this was seen or documented (URL with commit, issue or PR number).
        note: Anything else a reader needs (why the name changed, what is unsure).
        boards: Empty when every board of the model prints the name on those drivers;
            otherwise which boards do (``"pre-production GB200 boards"``): the driver
            alone then cannot tell whether the name exists.
        strength: How sure the fact is (see :class:`Evidence`).
    """

    name: str
    drivers: DriverRange
    evidence: str
    note: str = ""
    boards: str = ""
    strength: Evidence = Evidence.DOCUMENTED

    @property
    def everywhere(self) -> bool:
        """True when every driver and every board of the model prints this name."""
        return self.drivers.is_any and not self.boards

    def where(self) -> str:
        """Where the name exists, for messages.

        ``"R535-R545"``, ``"R570 on early boards"``, or ``"early boards"`` (every driver).
        """
        if not self.boards:
            return str(self.drivers)
        return self.boards if self.drivers.is_any else f"{self.drivers} on {self.boards}"


@dataclass(frozen=True)
class MemoryFact:
    """The memory size a range of drivers reports for a profile.

    The firmware reserves a little of each instance's memory, and how much has changed
    between driver branches (H100 NVL 1g: 10.62 GiB on one driver, 10.75 GiB on R560), so
    the size is a per-driver fact; the profile's ``memory_mib`` is the reference figure used
    when the driver is unknown or no fact covers it.

    Attributes:
        mib: ``memorySizeMB`` as NVML reports it, in MiB (``-lgip`` prints it in GiB with two
            decimals, so a figure read from ``-lgip`` is exact to 1/16 GiB).
        drivers: Driver branches reporting this size, or ``None`` when the source does not
            say which driver printed it: such a fact widens :meth:`GiProfile.memory_range_mib`
            but is never chosen by :meth:`GiProfile.memory_mib_on`.
        evidence: Where it was seen (URL with commit, issue or PR number).
        strength: How sure the fact is (see :class:`Evidence`).
    """

    mib: int
    drivers: DriverRange | None
    evidence: str
    strength: Evidence = Evidence.MEASURED

    def where(self) -> str:
        """The drivers, for messages: ``"R560"``, or ``"an unstated driver"``."""
        return "an unstated driver" if self.drivers is None else str(self.drivers)


class NameStatus(str, Enum):
    """Whether a profile name exists on a driver (see :meth:`GpuModel.check_profile_name`)."""

    AVAILABLE = "available"
    """The name exists on the given driver, or on every driver and board of the model."""
    DRIVER_DEPENDENT = "driver-dependent"
    """The name exists only on some drivers or boards, and the driver given (if any) cannot
    settle it: no driver was given, or on that driver it depends on the board."""
    NOT_ON_DRIVER = "not-on-driver"
    """The profile exists, but the given driver does not print this name."""
    UNKNOWN = "unknown"
    """The model has no profile of that name on any driver."""


@dataclass(frozen=True)
class NameCheck:
    """The answer of :meth:`GpuModel.check_profile_name`.

    Attributes:
        profile: The profile the name resolves to on some driver; ``None`` when ``UNKNOWN``.
        status: The verdict.
        message: One line for the user; empty when ``AVAILABLE`` under the given name on
            every driver, otherwise it names the drivers (and boards) the name exists on and
            the evidence.
    """

    profile: GiProfile | None
    status: NameStatus
    message: str

    @property
    def ok(self) -> bool:
        """True when the name is certainly usable (``AVAILABLE``)."""
        return self.status is NameStatus.AVAILABLE


@dataclass(frozen=True)
class GiProfile:
    """One GPU-instance profile of one GPU model, as NVML describes it.

    Attributes:
        name: Profile name without NVML's ``"MIG "`` prefix, e.g. ``"3g.71gb"``.
        nvml_id: NVML profile id (``nvmlGpuInstanceProfileInfo_v2_t.id``), the number that
            ``nvidia-smi mig -lgip`` prints and ``-cgi`` takes. ``None`` where unknown.
        nvml_index: The ``NVML_GPU_INSTANCE_PROFILE_*`` constant NVML is queried with.
        compute_slices: Compute (SM) slices the instance takes, the ``Ng`` in its name.
        memory_slices: Memory slices it takes; also the placement size. A 3g takes 4.
        memory_mib: Reference memory size in MiB (``memorySizeMB``, which NVML reports in
            MiB): the figure when the driver is unknown; ``memory_facts`` hold per-driver
            figures (see :meth:`memory_mib_on`).
        sm_count: Streaming multiprocessors of the instance.
        max_instances: Most instances of this profile one GPU can hold.
        placements: Allowed start positions, in memory slices (``-lgipp``'s ``{starts}``).
        copy_engines, decoders, encoders, jpegs, ofas: Engine counts from ``-lgip``.
        media_extensions: True for ``+me``/``+me.all`` profiles, which take the GPU's single
            set of media extensions: at most one such instance per GPU, whatever its profile.
        takes_all_media: True for ``+me.all`` (RTX PRO Blackwell), which "allocates all
            available media engines to this instance" (MIG user guide): no other instance on
            the GPU may then hold a decoder, encoder, JPEG or OFA engine (only ``-me``
            profiles, which have none, fit beside it).
        min_driver: First driver branch known to offer the profile (``"470"``), or ``None``.
        name_facts: The names the profile goes by per driver, with evidence. ``name`` is
            implied on every driver the profile exists on unless a record for it is given
            (then only where its records say); other names are aliases, accepted by
            :meth:`GpuModel.profile` and judged by :meth:`GpuModel.check_profile_name`.
        memory_facts: Memory sizes per driver, first match wins (see :meth:`memory_mib_on`).
    """

    name: str
    nvml_id: int | None
    nvml_index: int
    compute_slices: int
    memory_slices: int
    memory_mib: int
    sm_count: int
    max_instances: int
    placements: tuple[int, ...]
    copy_engines: int
    decoders: int
    encoders: int
    jpegs: int
    ofas: int
    media_extensions: bool = False
    min_driver: str | None = None
    name_facts: tuple[ProfileName, ...] = ()
    memory_facts: tuple[MemoryFact, ...] = ()
    takes_all_media: bool = False

    @property
    def has_media_engines(self) -> bool:
        """Whether the instance holds any decoder, encoder, JPEG or optical-flow engine."""
        return any((self.decoders, self.encoders, self.jpegs, self.ofas))

    @property
    def drivers(self) -> DriverRange:
        """The driver branches that offer the profile at all (from ``min_driver``)."""
        return DriverRange(int(self.min_driver)) if self.min_driver else DriverRange()

    def known_names(self) -> tuple[ProfileName, ...]:
        """Every name record, the canonical name's implied one first when not given."""
        if any(fact.name == self.name for fact in self.name_facts):
            return self.name_facts
        implied = ProfileName(self.name, self.drivers, "the catalogue's reference name")
        return (implied, *self.name_facts)

    @property
    def aliases(self) -> tuple[str, ...]:
        """Names other than ``name`` that some drivers or boards print for this profile."""
        seen = dict.fromkeys(f.name for f in self.name_facts if f.name != self.name)
        return tuple(seen)

    def exists_on(self, driver: DriverVersion | None) -> bool:
        """Whether ``driver`` offers the profile (True when the driver is unknown)."""
        return driver is None or self.drivers.contains(driver)

    def names_on(self, driver: DriverVersion) -> tuple[str, ...]:
        """The names ``driver`` is known to print for this profile (empty if none)."""
        if not self.exists_on(driver):
            return ()
        found = (f.name for f in self.known_names() if f.drivers.contains(driver))
        return tuple(dict.fromkeys(found))

    def memory_mib_on(self, driver: DriverVersion | None) -> int:
        """Memory in MiB that ``driver`` reports: its fact's figure, else the reference."""
        if driver is not None:
            for fact in self.memory_facts:
                if fact.drivers is not None and fact.drivers.contains(driver):
                    return fact.mib
        return self.memory_mib

    def memory_range_mib(self) -> tuple[int, int]:
        """The smallest and largest size any known driver reports: its known variance."""
        sizes = [self.memory_mib, *(fact.mib for fact in self.memory_facts)]
        return min(sizes), max(sizes)

    @property
    def nvml_name(self) -> str:
        """The name as NVML and nvidia-smi print it (``"MIG 3g.71gb"``)."""
        return f"MIG {self.name}"

    @property
    def resource_name(self) -> str:
        """The Kubernetes extended resource under the ``mixed`` strategy."""
        return f"nvidia.com/mig-{self.name}"

    def placement_spans(self) -> tuple[tuple[int, int], ...]:
        """The placements as ``(start, size)`` pairs, the way ``-lgipp`` prints them."""
        return tuple((start, self.memory_slices) for start in self.placements)


@dataclass(frozen=True)
class GpuModel:
    """A MIG-capable GPU model and its profiles.

    Attributes:
        key: Short, stable identifier used on the command line and in reports
            (``"H200-141GB"``).
        names: NVML device names seen for this model (``nvmlDeviceGetName``).
        pci_device_ids: PCI device IDs packed with the vendor as mig-parted's
            ``device-filter`` writes them: ``0x233510DE``.
        architecture: ``"ampere"``, ``"hopper"`` or ``"blackwell"``. GPM (per-instance
            activity from NVML) exists on Hopper and newer only.
        compute_slices: Compute slices of the whole GPU (7, or 4 on A30 and RTX PRO 6000).
        memory_slices: Memory slices of the whole GPU (8, or 4).
        memory_total_bytes: Framebuffer size NVML reports for the whole GPU.
        profiles: GPU-instance profiles, in NVML profile-index order.
        evidence: How the data was established (see :class:`Evidence`).
        source: Where the data comes from, for humans; cites files and documents.
        notes: Caveats worth knowing when planning for this model.
        placement_unit: How many of the driver's placement units make one memory slice.
            ``-lgipp`` and ``-lgi`` count starts and sizes in these units: 1 on A100, H100,
            H200 and B200, 3 on RTX PRO 6000 Blackwell, whose driver (610.43.02) prints
            ``{0,3,6,9}:3`` for the 1g profiles, ``{0,6}:6`` for 2g and ``{0}:12`` for 4g.
            The catalogue keeps placements in memory slices; see :meth:`slices_from_nvml`.
    """

    key: str
    names: tuple[str, ...]
    pci_device_ids: tuple[int, ...]
    architecture: str
    compute_slices: int
    memory_slices: int
    memory_total_bytes: int
    profiles: tuple[GiProfile, ...]
    evidence: Evidence
    source: str
    notes: str = ""
    placement_unit: int = 1
    _by_name: dict[str, GiProfile] = field(init=False, repr=False, compare=False)

    def __repr__(self) -> str:
        return f"GpuModel({self.key!r})"

    def __post_init__(self) -> None:
        by_name: dict[str, GiProfile] = {}
        for profile in self.profiles:
            for name in (profile.name, *profile.aliases):
                other = by_name.setdefault(name.lower(), profile)
                if other is not profile:
                    raise ValueError(f"{self.key}: {name} names {other.name} and {profile.name}")
        object.__setattr__(self, "_by_name", by_name)

    @property
    def has_gpm(self) -> bool:
        """Whether NVML's GPM (per-GPU-instance activity) is available: Hopper and newer."""
        return self.architecture in ("hopper", "blackwell")

    @property
    def sm_total(self) -> int:
        """SMs of the full-GPU profile (what a 7g/4g-of-4 instance gets)."""
        return max(p.sm_count for p in self.profiles)

    def profile(self, name: str) -> GiProfile:
        """Return the profile called ``name`` (``"MIG "`` prefix and aliases accepted).

        Raises:
            UnknownProfileError: the model has no such profile; the message lists the known
                names so that a typo is obvious.
        """
        wanted = normalise_profile_name(name)
        found = self._by_name.get(_strip_compute_instance(wanted).lower())
        if found is None:
            known = ", ".join(p.name for p in self.profiles)
            raise UnknownProfileError(f"{self.key} has no MIG profile {wanted!r} (known: {known})")
        return found

    def has_profile(self, name: str) -> bool:
        """Whether ``name`` (or an alias of it) is a profile of this model."""
        return _strip_compute_instance(normalise_profile_name(name)).lower() in self._by_name

    def check_profile_name(self, name: str, driver: DriverVersion | None = None) -> NameCheck:
        """Whether ``driver`` (None: unknown) prints the profile name ``name``.

        :meth:`profile` accepts every name any driver uses; this says whether the name fits
        the driver at hand, which is what a mig-parted config needs (MIG Manager rejects a
        name the node's driver does not print). See :class:`NameStatus` for the verdicts.
        """
        wanted = _strip_compute_instance(normalise_profile_name(name))
        profile = self._by_name.get(wanted.lower())
        if profile is None:
            known = ", ".join(p.name for p in self.profiles)
            return NameCheck(
                None,
                NameStatus.UNKNOWN,
                f"{self.key} has no MIG profile {wanted!r} (known: {known})",
            )
        facts = [f for f in profile.known_names() if f.name.lower() == wanted.lower()]
        if profile.drivers.is_any and any(f.everywhere for f in facts):
            return NameCheck(profile, NameStatus.AVAILABLE, "")
        where = "; ".join(_fact_text(f) for f in facts)
        if driver is None:
            return NameCheck(
                profile,
                NameStatus.DRIVER_DEPENDENT,
                f"{self.key}: MIG {wanted} exists only on {where}{_elsewhere(profile, wanted)}",
            )
        here = [f for f in facts if f.drivers.contains(driver) and profile.exists_on(driver)]
        if any(not f.boards for f in here):
            return NameCheck(profile, NameStatus.AVAILABLE, "")
        if here:
            return NameCheck(
                profile,
                NameStatus.DRIVER_DEPENDENT,
                f"{self.key}: MIG {wanted} on driver {driver} exists only on {where}",
            )
        if not profile.exists_on(driver):
            instead = f"; driver {driver} has no such profile (it needs {profile.drivers})"
        elif names := profile.names_on(driver):
            instead = f"; driver {driver} calls it {' or '.join(names)}"
        else:
            instead = ""
        return NameCheck(
            profile,
            NameStatus.NOT_ON_DRIVER,
            f"{self.key}: MIG {wanted} does not exist on driver {driver}: known on {where}"
            f"{instead}",
        )

    def profile_by_nvml_id(self, nvml_id: int) -> GiProfile | None:
        """The profile NVML knows by ``nvml_id``, or None."""
        return next((p for p in self.profiles if p.nvml_id == nvml_id), None)

    def profile_by_nvml_index(self, nvml_index: int) -> GiProfile | None:
        """The profile NVML answers for ``NVML_GPU_INSTANCE_PROFILE_*`` index, or None."""
        return next((p for p in self.profiles if p.nvml_index == nvml_index), None)

    def slices_from_nvml(self, start: int, size: int) -> tuple[int, int]:
        """A ``(start, size)`` as ``-lgipp``/``-lgi``/NVML print it, in memory slices.

        Raises:
            CatalogueError: the span is not on this model's placement grid (a start or size
                that is not a multiple of :attr:`placement_unit`).
        """
        unit = self.placement_unit
        if start < 0 or size <= 0 or start % unit or size % unit:
            raise CatalogueError(
                f"placement {start}:{size} is not on {self.key}'s grid of {unit} driver "
                f"units per memory slice"
            )
        return start // unit, size // unit

    def nvml_span(self, start: int, size: int) -> tuple[int, int]:
        """A ``(start, size)`` in memory slices as the driver prints it (the inverse)."""
        return start * self.placement_unit, size * self.placement_unit

    def device_filter(self) -> list[str]:
        """This model's PCI IDs as mig-parted ``device-filter`` strings."""
        return [format_pci_device_id(d) for d in self.pci_device_ids]


def _fact_text(fact: ProfileName) -> str:
    return f"{fact.where()} ({fact.evidence})"


def _elsewhere(profile: GiProfile, wanted: str) -> str:
    others = [f for f in profile.known_names() if f.name.lower() != wanted.lower()]
    if not others:
        return ""
    return "; elsewhere: " + ", ".join(f"{f.name} on {f.where()}" for f in others)


_PROFILE_NAME = re.compile(r"^(?:\d+c\.)?\d+g\.\d+gb(?:[+-][a-z.]+)?$", re.IGNORECASE)


def normalise_profile_name(name: str) -> str:
    """Strip NVML's ``"MIG "`` prefix and surrounding space from a profile name."""
    text = name.strip()
    if text[:4].upper() == "MIG ":
        text = text[4:].strip()
    return text


_COMPUTE_INSTANCE_PREFIX = re.compile(r"^(\d+)c\.(\d+)g\.")


def _strip_compute_instance(name: str) -> str:
    """``"1c.3g.20gb"`` (one compute instance of a 3g.20gb) names the GI profile 3g.20gb.

    mig-parted accepts such names in ``mig-devices``; for placement only the GPU instance
    matters. A compute part larger than its GPU instance (``4c.3g.20gb``) is left as is, so
    the lookup fails and says so.
    """
    match = _COMPUTE_INSTANCE_PREFIX.match(name)
    if match and int(match.group(1)) <= int(match.group(2)):
        return name[match.end(1) + 2 :]
    return name


def is_profile_name(name: str) -> bool:
    """Whether ``name`` has the shape of a MIG profile name (``[<C>c.]<G>g.<N>gb[+attr]``)."""
    return bool(_PROFILE_NAME.match(normalise_profile_name(name)))


def parse_pci_device_id(text: str | int) -> int:
    """Parse a PCI device ID the way mig-parted and NVML write it.

    Accepts ``"0x233510DE"`` (device and vendor packed, as in ``device-filter`` and
    ``nvmlPciInfo_t.pciDeviceId``), ``"0x2335"`` or ``"2335"`` (device only; NVIDIA's vendor
    ID is assumed), and integers in either form. mig-parted's optional subsystem suffix
    (``":0xSSSSvvvv"``) is ignored: the catalogue matches on device ID.

    Raises:
        CatalogueError: the text is not a hexadecimal PCI ID.
    """
    if isinstance(text, int):
        value = text
    else:
        head = text.strip().split(":", 1)[0]
        try:
            value = int(head, 16)
        except ValueError:
            raise CatalogueError(
                f"not a PCI device ID: {text!r} (expected e.g. 0x233510DE)"
            ) from None
    if value <= 0xFFFF:
        value = (value << 16) | NVIDIA_VENDOR_ID
    if not 0 < value <= 0xFFFFFFFF:
        raise CatalogueError(f"not a PCI device ID: {text!r} (expected e.g. 0x233510DE)")
    return value


def format_pci_device_id(value: int) -> str:
    """Format a packed PCI ID the way mig-parted's ``device-filter`` does: ``0x233510DE``."""
    return f"0x{value:08X}"
