"""The serving exporter's cap on glibc malloc arenas, observed in a real child process.

Each test starts a Python child that runs 16 threads allocating at the same time and prints
glibc's ``malloc_stats()`` (one ``Arena N:`` line per arena) on stderr.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc only")

CHILD = """
import ctypes, sys, threading
from migscope.exporter._malloc import limit_arenas
print(limit_arenas() if sys.argv[1] == "limit" else None)
barrier = threading.Barrier(16)
def work():
    barrier.wait()
    keep = [bytearray(50_000) for _ in range(20)]
    barrier.wait()
threads = [threading.Thread(target=work) for _ in range(16)]
for t in threads:
    t.start()
for t in threads:
    t.join()
ctypes.CDLL(None).malloc_stats()
"""


def arenas(mode: str, **env: str) -> tuple[str, int]:
    environ = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"} | env
    done = subprocess.run(
        [sys.executable, "-c", CHILD, mode],
        capture_output=True,
        text=True,
        check=True,
        env=environ,
        timeout=60,
    )
    count = sum(line.startswith("Arena ") for line in done.stderr.splitlines())
    return done.stdout.strip(), count


def test_sixteen_allocating_threads_share_two_arenas() -> None:
    assert arenas("none")[1] > 2  # glibc's own choice: about one per thread
    assert arenas("limit") == ("True", 2)


def test_malloc_arena_max_in_the_environment_wins() -> None:
    applied, count = arenas("limit", MALLOC_ARENA_MAX="4")
    assert applied == "False"
    assert count == 4
