"""A run's files put into ``--out DIR`` whole or not at all, never through a planted link.

Why (issue 20): the files used to be overwritten in place, one after the other, so a run that
failed half-way (a full disk, a contract break, Ctrl-C) left a truncated ``report.json`` beside
the previous run's Markdown, HTML and plan: the earlier report was lost and the directory
contradicted itself. And ``open(DIR/report.json, "w")`` followed a symlink planted there,
writing wherever it pointed.

How :func:`replace_files` does it:

1. **Stage.** Every file is written into a private staging directory made *inside* DIR
   (``.migscope-new-XXXXXXXX``, mode 0700, :func:`tempfile.mkdtemp`), each created new
   (``O_CREAT | O_EXCL | O_NOFOLLOW``, so no link is followed and nothing that exists is
   reused), with mode :data:`FILE_MODE` (0640; the kernel takes the umask off), written and
   ``fsync``-ed. Inside DIR rather than beside it, because the swap is a rename and a rename
   works within one filesystem: DIR may be a mount point (a volume), and its parent is then
   on another one.
2. **Check.** Every name to be replaced is a regular file or a link (replaced, not
   followed); anything else (a directory someone made there) stops the run before anything
   changed.
3. **Swap**, once every file is complete: one :func:`os.replace` per file (a rename, atomic
   for each file: a reader sees the old file or the new one, never half of one; a link at the
   name is itself replaced). Before each, the old file is hard-linked into the staging
   directory; if a rename fails midway, the files already swapped are put back from those
   links and the new names removed, so DIR holds exactly the old set again. migscope's own
   names that this run does not write (``mig-parted-config.yaml`` when nothing is planned,
   a format not asked for) are moved out the same way: afterwards DIR shows exactly one
   run. Files of other names, and directories, are never touched.
4. **Clean up**: the staging directory (with the old files' links) is removed, on success
   and on failure, and DIR is ``fsync``-ed so that the renames last.

Why not one directory rename (write ``DIR.new``, rename it over DIR): DIR may be a mount
point or the current directory, which cannot be renamed, and it may hold files migscope did
not write, which would have to move with it; Linux's ``renameat2(RENAME_EXCHANGE)`` swaps
two directories atomically but Python does not expose it, and it has the same two problems.
What per-file renames cannot promise: a process killed (or a machine lost) *during* the few
renames leaves complete files of both runs in DIR and its staging directory behind (a
hidden ``.migscope-new-*``, safe to delete). Where the filesystem refuses hard links, the
old file is renamed aside instead: its name is then briefly absent, never truncated.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TextIO

FILE_MODE = 0o640
"""Mode of every file written, less the umask: reports name pods and namespaces, so they are
readable by their owner and group, never by every user of the machine."""

DIR_MODE = 0o750
"""Mode of DIR when this creates it, less the umask (its parents get the default)."""

STAGING_PREFIX = ".migscope-new-"
"""Name prefix of the staging directory inside DIR (hidden, as every swap in progress)."""

Writer = Callable[[TextIO], object]
"""Writes one file's text into the stream it is given (what it returns is not used)."""


def replace_files(
    folder: str | os.PathLike[str],
    contents: Mapping[str, Writer],
    *,
    owned: Iterable[str] = (),
) -> dict[str, Path]:
    """Write ``contents`` into ``folder`` and swap them in together (see the module).

    Args:
        folder: The directory (created, with its parents, when missing).
        contents: File name → a function that writes the file's text into a stream. Names
            are plain file names; they are swapped in this order.
        owned: Names that belong to a run: those not in ``contents`` are removed with the
            swap, so that ``folder`` ends up holding this run's files only.

    Returns:
        File name → its path in ``folder``, for every name of ``contents``.

    Raises:
        OSError: ``folder`` cannot be created or written, a name is taken by something other
            than a file or a link, or a write or rename failed; ``folder`` is then as it was.
        Exception: whatever a writer raises; ``folder`` is then as it was.
    """
    root = Path(folder)
    root.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    stale = [n for n in dict.fromkeys(owned) if n not in contents]
    staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=root))
    try:
        new = staging / "new"
        new.mkdir(mode=0o700)
        for name, write in contents.items():
            _write_new(new / name, write)
        names = [*contents, *(n for n in stale if os.path.lexists(root / n))]
        for name in names:
            _check_replaceable(root / name)
        _swap(root, new, staging / "old", list(contents), names[len(contents) :])
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    _sync_directory(root)
    return {name: root / name for name in contents}


def _write_new(path: Path, write: Writer) -> None:
    """Create ``path`` (it must not exist, and is no link), write it, and flush it to disk."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(path, flags, FILE_MODE)
    with os.fdopen(fd, "w", encoding="utf-8") as stream:
        write(stream)
        stream.flush()
        os.fsync(stream.fileno())


def _check_replaceable(path: Path) -> None:
    """Refuse to replace anything but a regular file or a link (never followed)."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
        raise FileExistsError(
            errno.EEXIST, f"{path} is not a file: migscope replaces only the files it writes"
        )


def _swap(root: Path, new: Path, old: Path, incoming: list[str], outgoing: list[str]) -> None:
    """Rename ``incoming`` from ``new`` into ``root`` and ``outgoing`` out of it, or none.

    Every old file is linked (else moved) into ``old`` first; on a failure, what was done is
    undone in reverse order and the failure raised.
    """
    old.mkdir(mode=0o700)
    done: list[tuple[str, bool]] = []  # (name, whether an old file was set aside)
    try:
        for name in incoming:
            target = root / name
            if _set_aside(target, old / name, move=False):
                done.append((name, True))
                os.replace(new / name, target)
            else:
                os.replace(new / name, target)
                done.append((name, False))
        for name in outgoing:
            _set_aside(root / name, old / name, move=True)
            done.append((name, True))
    except BaseException:
        _undo(root, old, done)
        raise


def _set_aside(target: Path, backup: Path, *, move: bool) -> bool:
    """Keep the file (or link) at ``target`` as ``backup``; False when there is none.

    A hard link when it need not go (``target`` stays in place until the rename replaces it),
    a rename when it must, or when the filesystem has no hard links.
    """
    if not os.path.lexists(target):
        return False
    if not move:
        try:
            os.link(target, backup, follow_symlinks=False)
            return True
        except OSError:
            pass
    os.replace(target, backup)
    return True


def _undo(root: Path, old: Path, done: list[tuple[str, bool]]) -> None:
    """Put the old files back and take the new names away, last done first.

    Best effort: a step that fails is passed over so that the others are still tried; the
    caller raises the failure that started it.
    """
    for name, kept in reversed(done):
        target = root / name
        with contextlib.suppress(OSError):
            if kept:
                os.replace(old / name, target)
            else:
                target.unlink(missing_ok=True)


def _sync_directory(path: Path) -> None:
    """Make the renames in ``path`` durable (where the filesystem can sync a directory)."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
