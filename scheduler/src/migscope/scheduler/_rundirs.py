"""Where a report run writes, and how a good report becomes ``<out_dir>/latest``.

An apply job reads its plan from ``latest``, so ``latest`` must only
ever show a complete, successful report, and it must change atomically: a reader sees the
old report or the new one, never a half-written one. Each report run gets a fresh
``<out_dir>/<UTC time>/`` (:func:`new_run_dir`); the runner calls :func:`update_latest`
only after the run succeeded and left a readable ``report.json``.
"""

from __future__ import annotations

import os
import shutil
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal


def new_run_dir(out_dir: Path, started: datetime) -> Path:
    """A new ``<out_dir>/<YYYYMMDDTHHMMSSZ>`` (``-2``, ``-3`` ... if taken in that second).

    A compact UTC stamp: sorts by time as text and has no ``:``, which some volumes refuse.

    Args:
        out_dir: The job's ``out_dir`` (created if missing).
        started: When the run started.

    Raises:
        OSError: the directory cannot be created.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = started.astimezone(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    for attempt in range(1, 1000):
        path = out_dir / (stamp if attempt == 1 else f"{stamp}-{attempt}")
        try:
            path.mkdir()
        except FileExistsError:
            continue
        return path
    raise FileExistsError(f"{out_dir}: too many runs named {stamp}")


def update_latest(out_dir: Path, run_dir: Path) -> Literal["symlink", "copy"]:
    """Make ``<out_dir>/latest`` show ``run_dir``; returns how.

    A relative symlink swapped in with one ``rename`` (atomic: a reader sees the old report or
    the new one, never neither; relative so the volume may be mounted anywhere). Where the
    volume refuses symlinks, a copy replaces the old one with two renames: a reader may then
    briefly find no ``latest``, never a half-written one.

    Args:
        out_dir: The job's ``out_dir``, which holds ``latest``.
        run_dir: The finished run's directory inside ``out_dir``.

    Raises:
        OSError: neither worked.
    """
    latest = out_dir / "latest"
    tag = f"{os.getpid()}-{threading.get_ident()}"
    staged = out_dir / f".latest-new-{tag}"
    _remove(staged)
    if not (latest.is_dir() and not latest.is_symlink()):
        try:
            os.symlink(run_dir.name, staged, target_is_directory=True)
        except OSError:
            pass
        else:
            os.replace(staged, latest)
            return "symlink"
    shutil.copytree(run_dir, staged, symlinks=True)
    old = out_dir / f".latest-old-{tag}"
    _remove(old)
    if os.path.lexists(latest):
        os.rename(latest, old)
    os.rename(staged, latest)
    _remove(old)
    return "copy"


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()
