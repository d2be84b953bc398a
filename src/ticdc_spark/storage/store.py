"""The few storage operations the checkpoint, the dead letters and the claim-check reader need,
over a local directory or an object store.

Two implementations behind one interface, :class:`Store`:

* :class:`~ticdc_spark.storage.local.LocalStore` for plain paths and ``file://``: a write is a
  temporary file, ``fsync``, ``rename`` and an ``fsync`` of the directory (what the checkpoint
  has always done: a power cut leaves the old file or the new one), put-if-absent is a
  hard link (which fails if the name exists).
* :class:`~ticdc_spark.storage.objects.ObjectStore` for ``s3://``, ``gs://``, ``az://`` and
  ``abfss://``, through obstore (Python bindings of object_store, the Rust crate that delta-rs
  itself writes tables with).  Chosen for its conditional writes: ``put(mode="create")``
  sends ``If-None-Match: *`` and ``put(mode={"e_tag": ...})`` sends ``If-Match``, on S3,
  GCS and Azure alike, which is what a single-writer lease and never-overwritten files need
  on stores without rename.  (fsspec/s3fs has no conditional put; pyarrow.fs has neither
  conditional writes nor ETags.)  A single PUT is atomic on every one of these stores: a
  reader sees the old object or the new one, never a part.

What each store guarantees, and what the job relies on (docs/pipeline.md has the table):
read-after-write and list-after-write consistency (S3 since 2020, GCS, Azure, SeaweedFS),
an atomic single PUT, and conditional create and replace.  A store without conditional
writes is refused when the lease is taken (:mod:`ticdc_spark.storage.lease`), never
silently used without one.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable
from urllib.parse import unquote, urlsplit

__all__ = ["Store", "is_local", "join", "local_path"]


class Store(abc.ABC):
    """A root (directory or bucket prefix) holding objects named by ``/``-separated keys."""

    uri: str  # the root, as messages name it (never with credentials)

    def describe(self, key: str) -> str:
        """The full location of ``key``, for messages."""
        return join(self.uri, key)

    @abc.abstractmethod
    def read(self, key: str) -> bytes:
        """The object's bytes; :class:`~ticdc_spark.errors.ObjectNotFound` if there is none."""

    @abc.abstractmethod
    def read_versioned(self, key: str) -> tuple[bytes, str]:
        """The object's bytes and its version (what :meth:`replace` compares)."""

    @abc.abstractmethod
    def write(self, key: str, data: bytes) -> None:
        """Create or replace the object atomically: readers see all of the old or the new."""

    @abc.abstractmethod
    def create(self, key: str, data: bytes) -> bool:
        """Write the object only if there is none (put-if-absent): False if one exists."""

    @abc.abstractmethod
    def replace(self, key: str, data: bytes, version: str) -> bool:
        """Replace the object only if it is still at ``version``: False if it changed or
        is gone (compare-and-swap)."""

    @abc.abstractmethod
    def list_keys(self, prefix: str = "") -> list[str]:
        """The keys under ``prefix`` (a key prefix ending with ``/`` for a "directory"),
        sorted."""

    @abc.abstractmethod
    def children(self, prefix: str = "") -> list[str]:
        """The names of the "directories" right under ``prefix`` (``a/`` -> ``["b", ...]``
        for keys ``a/b/...``), sorted."""

    @abc.abstractmethod
    def delete(self, keys: str | Iterable[str]) -> None:
        """Delete objects (a missing one is no error)."""

    @abc.abstractmethod
    def copy(self, source: str, target: str) -> None:
        """Copy an object within the store (server-side on object stores)."""

    @abc.abstractmethod
    def exists(self, key: str) -> bool: ...

    @abc.abstractmethod
    def size(self, key: str) -> int:
        """The object's size in bytes (:class:`~ticdc_spark.errors.ObjectNotFound` if none)."""


def is_local(uri: str) -> bool:
    """Whether ``uri`` is a local path (no scheme, or ``file://``)."""
    scheme = urlsplit(uri).scheme.lower()
    return scheme in ("", "file") or (len(scheme) == 1 and uri[1:2] == ":")  # C:\ on Windows


def join(root: str, key: str) -> str:
    """``root/key`` with one slash between."""
    if not key:
        return root
    return root.rstrip("/") + "/" + key.lstrip("/")


def local_path(uri: str) -> str:
    """The filesystem path of a local ``uri``."""
    parts = urlsplit(uri)
    return unquote(parts.path) if parts.scheme.lower() == "file" else uri
