"""Renaming and dropping Delta tables on an object store, which has no rename.

A Delta table is its prefix: the data files and ``_delta_log/`` (whose actions name the data
files relative to the prefix).  On a local disk a rename is one directory rename; on S3, GCS
or Azure the objects must be copied (server-side: no byte passes through the job) and the
old ones deleted, and a drop deletes them all.  Neither is one step, so each is announced
first by an *intent* object under ``ROOT/_ticdc~pending/`` (a name no table's prefix has:
``~`` is escaped in those), carried out, and then deleted.  A sink opened after a crash
carries out every intent left before it applies anything, so from the job's view a rename
or a drop happens whole or not at all.  A reader outside the job may meanwhile see the
target partly copied (an older version of the table) or the source partly deleted.

Order makes a repeat harmless: a rename first deletes whatever an interrupted copy left at
the target, copies the data files, then the log in version order (``_last_checkpoint``
last), then records in its intent that the copy is complete, and only then deletes the
source, log first (so the source stops being a table before its data goes).  The cost is
one server-side copy per object of the table: a rename of a large table takes a while.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable, Mapping

import orjson

from ticdc_spark.pipeline.failpoints import crash_point
from ticdc_spark.storage import Store

__all__ = ["PENDING", "ObjectTables", "table_prefix"]

log = logging.getLogger(__name__)
PENDING = "_ticdc~pending"
LOG = "_delta_log/"
_PLAIN = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")


def escape(name: str) -> str:
    """A database or table name as one safe key segment: bytes other than letters, digits
    and ``_.-`` as ``~XX`` (not ``%XX``, which delta-rs decodes in a URL, twice)."""
    return "".join(chr(b) if b in _PLAIN else f"~{b:02X}" for b in name.encode()) or "~"


def unescape(segment: str) -> str:
    if segment == "~":
        return ""
    raw, i = bytearray(), 0
    while i < len(segment):
        if segment[i] == "~":
            raw.append(int(segment[i + 1 : i + 3], 16))
            i += 3
        else:
            raw += segment[i].encode()
            i += 1
    return raw.decode()


def table_prefix(key: tuple[str, str]) -> str:
    return f"{escape(key[0])}/{escape(key[1])}"


def _log_order(key: str) -> tuple[int, str]:
    """Data files first, then the log in version order, ``_last_checkpoint`` last."""
    if LOG not in key:
        return (0, key)
    return (2, key) if key.endswith("_last_checkpoint") else (1, key)


class ObjectTables:
    """The intents and object copies behind renames and drops of one sink's tables."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def candidates(self) -> list[tuple[str, str]]:
        """(database, table) of every prefix two levels down (tables or not)."""
        return [
            (unescape(database), unescape(table))
            for database in self.store.children()
            if database != PENDING
            for table in self.store.children(database + "/")
        ]

    def drop(self, key: tuple[str, str]) -> None:
        intent = self._announce({"op": "drop", "table": table_prefix(key)})
        crash_point("drop")
        self._delete_table(table_prefix(key))
        self.store.delete(intent)

    def rename(self, old: tuple[str, str], new: tuple[str, str]) -> None:
        what = {"op": "rename", "from": table_prefix(old), "to": table_prefix(new)}
        intent = self._announce(what)
        crash_point("rename")
        self._carry_out(intent)

    def finish_pending(self) -> None:
        """Carry out the renames and drops a stopped run announced, oldest first."""
        for intent in self.store.list_keys(PENDING + "/"):
            log.warning("finishing a table rename or drop a stopped run began: %s", intent)
            self._carry_out(intent)

    def _announce(self, what: Mapping[str, object]) -> str:
        intent = f"{PENDING}/{time.time_ns():020d}-{uuid.uuid4().hex}.json"
        self.store.write(intent, orjson.dumps(what))
        return intent

    def _carry_out(self, intent: str) -> None:
        what = orjson.loads(self.store.read(intent))
        if what["op"] == "drop":
            self._delete_table(what["table"])
        else:
            if not what.get("copied"):
                self._copy_table(what["from"], what["to"])
                self.store.write(intent, orjson.dumps({**what, "copied": True}))
            self._delete_table(what["from"])
        self.store.delete(intent)

    def _copy_table(self, source: str, target: str) -> None:
        self.store.delete(self.store.list_keys(target + "/"))  # (an interrupted copy's)
        for key in sorted(self.store.list_keys(source + "/"), key=_log_order):
            self.store.copy(key, target + key[len(source) :])

    def _delete_table(self, prefix: str) -> None:
        """The log first (the prefix stops being a table), then the data files."""
        self._delete(self.store.list_keys(f"{prefix}/{LOG}"))
        crash_point("drop-deleting")
        self._delete(self.store.list_keys(prefix + "/"))

    def _delete(self, keys: Iterable[str]) -> None:
        self.store.delete(list(keys))
