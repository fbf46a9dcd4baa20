"""Two malloc arenas for the serving exporter, as ``MALLOC_ARENA_MAX=2`` would give.

glibc gives each thread that allocates while the others hold the lock an arena of its own,
up to 8 per core, and keeps the free space of each for later instead of returning it. gRPC
receives every kubelet ``List`` answer (up to 8 MiB, see
:data:`.podresources.client.MAX_ANSWER_BYTES`) on its own threads, the watcher decodes it on
another, so an answer every 10 s leaves free but resident memory scattered over many arenas:
with a large answer the exporter's RSS went from 102 MiB after two refreshes to 181 MiB after
100, and kept creeping. With two arenas it stayed at 104-108 MiB (docs/pod-attribution.md).
The exporter's allocation rate is low, so sharing two arenas costs nothing measurable.
"""

from __future__ import annotations

import ctypes
import os
import platform

ARENAS = 2
"""Arenas the serving exporter allows (glibc's ``M_ARENA_MAX``)."""

_M_ARENA_MAX = -8  # from glibc's <malloc.h>


def limit_arenas(count: int = ARENAS) -> bool:
    """Cap glibc's malloc arenas for this process; True when applied.

    Call before starting threads: arenas that exist already stay. Nothing is done where the
    environment sets ``MALLOC_ARENA_MAX`` (the operator's choice wins) or the C library is not
    glibc (musl has a single heap anyway).
    """
    if "MALLOC_ARENA_MAX" in os.environ or platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library the interpreter runs on
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_ARENA_MAX, count))
