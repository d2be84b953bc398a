"""A :class:`~ticdc_spark.storage.store.Store` over a local (or mounted) directory.

Durable as the checkpoint has always been: a write goes to a temporary file that is synced,
renamed over the name, and the directory synced (a power cut leaves the old file or the new
one).  Put-if-absent links the synced temporary file to the name (``link`` fails if the name
exists, atomically, also on NFS).  Compare-and-swap holds an ``flock`` on a lock file beside
the object while it compares and renames: every writer that replaces conditionally takes it.
An object's version is its inode, size and modification time: a rename always brings a new
inode, so a version never comes back.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path

from ticdc_spark.errors import ObjectNotFound, StorageError
from ticdc_spark.storage.store import Store

__all__ = ["LocalStore", "sync_directory"]

_TEMP = ".tmp-"  # temporary files start with this (never listed)
_LOCK = ".lock-"  # compare-and-swap locks


def sync_directory(directory: Path) -> None:
    """Make a rename into ``directory`` durable (a power cut could otherwise undo it)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _version(stat: os.stat_result) -> str:
    return f"{stat.st_ino}-{stat.st_size}-{stat.st_mtime_ns}"


class LocalStore(Store):
    """Objects as files under a directory (created on the first write)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.uri = str(self.root)

    def _path(self, key: str) -> Path:
        parts = [p for p in key.split("/") if p]
        if any(p in (".", "..") for p in parts):
            raise StorageError(f"{key!r} is not a valid object name under {self.uri}", self.uri)
        return self.root.joinpath(*parts)

    @contextlib.contextmanager
    def _errors(self, action: str, key: str) -> Iterator[None]:
        """OSErrors as one line naming the file (a missing one as ObjectNotFound)."""
        try:
            yield
        except FileNotFoundError:
            where = self.describe(key)
            raise ObjectNotFound(f"{where} does not exist", where) from None
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            where = self.describe(key)
            raise StorageError(f"cannot {action} {where}: {reason}", where) from None

    def read(self, key: str) -> bytes:
        with self._errors("read", key):
            return self._path(key).read_bytes()

    def read_versioned(self, key: str) -> tuple[bytes, str]:
        with self._errors("read", key), open(self._path(key), "rb") as file:
            return file.read(), _version(os.fstat(file.fileno()))

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def size(self, key: str) -> int:
        with self._errors("look up", key):
            return self._path(key).stat().st_size

    def _staged(self, path: Path, data: bytes) -> Path:
        """``data`` in a synced temporary file beside ``path``."""
        path.parent.mkdir(parents=True, exist_ok=True)
        temp = path.with_name(f"{_TEMP}{path.name}-{uuid.uuid4().hex}")
        with open(temp, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        return temp

    def write(self, key: str, data: bytes) -> None:
        path = self._path(key)
        with self._errors("write", key):
            os.replace(self._staged(path, data), path)
            sync_directory(path.parent)

    def create(self, key: str, data: bytes) -> bool:
        path = self._path(key)
        with self._errors("create", key):
            temp = self._staged(path, data)
            try:
                os.link(temp, path)
            except FileExistsError:
                return False
            finally:
                temp.unlink()
            sync_directory(path.parent)
            return True

    def replace(self, key: str, data: bytes, version: str) -> bool:
        path = self._path(key)
        with self._errors("replace", key), self._locked(path):
            try:
                current = _version(path.stat())
            except FileNotFoundError:
                return False
            if current != version:
                return False
            os.replace(self._staged(path, data), path)
            sync_directory(path.parent)
            return True

    @contextlib.contextmanager
    def _locked(self, path: Path) -> Iterator[None]:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path.with_name(_LOCK + path.name), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # (closing releases the lock)

    def list_keys(self, prefix: str = "") -> list[str]:
        base = prefix.rpartition("/")[0]
        found = []
        for dirpath, _dirs, files in os.walk(self._path(base) if base else self.root):
            here = Path(dirpath).relative_to(self.root).as_posix()
            found += [
                name if here == "." else f"{here}/{name}"
                for name in files
                if not name.startswith((_TEMP, _LOCK))
            ]
        return sorted(key for key in found if key.startswith(prefix))

    def children(self, prefix: str = "") -> list[str]:
        directory = self._path(prefix) if prefix.strip("/") else self.root
        try:
            return sorted(e.name for e in os.scandir(directory) if e.is_dir())
        except FileNotFoundError:
            return []

    def delete(self, keys: str | Iterable[str]) -> None:
        for key in [keys] if isinstance(keys, str) else keys:
            with self._errors("delete", key):
                try:
                    self._path(key).unlink()
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    if exc.errno != errno.EISDIR:
                        raise

    def copy(self, source: str, target: str) -> None:
        self.write(target, self.read(source))
