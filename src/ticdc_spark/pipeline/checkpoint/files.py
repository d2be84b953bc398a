"""Files that survive a kill -9 or a power cut: written aside, synced, renamed into place.

A reader finds either the old file or the whole new one, never a torn one: the data is
written to a temporary file and synced, then renamed over the target, and the directory is
synced so that the rename itself is durable (a power cut could otherwise undo it).
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa

__all__ = ["atomic_write", "read_arrow", "sync_directory", "write_arrow"]


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` whole, durably."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)
    sync_directory(path.parent)


def write_arrow(path: Path, table: pa.Table) -> None:
    """Replace ``path`` with ``table`` as an Arrow IPC file, synced.  The directory is not
    synced: the caller does (once for several files, or with the file that refers to it)."""
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as raw:
        with pa.ipc.new_file(raw, table.schema) as out:
            out.write_table(table)
        raw.flush()
        os.fsync(raw.fileno())
    os.replace(tmp, path)


def read_arrow(path: Path) -> pa.Table:
    """An Arrow IPC file written by :func:`write_arrow` (memory-mapped)."""
    with pa.memory_map(str(path)) as source:
        return pa.ipc.open_file(source).read_all()


def sync_directory(directory: Path) -> None:
    """Make a rename into ``directory`` durable (a power cut could otherwise undo it)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
