"""A single-writer lease on a checkpoint: two jobs on one checkpoint never both run.

The lease is one small object, ``lease.json``, naming its holder (host, pid, start time, a
random token) and when it last renewed it.  Every change to it is conditional, so it works
the same on a local disk and on a store without rename or locks:

* **taking** it is a put-if-absent (``If-None-Match: *``; locally a hard link).  If a lease
  is there, the job reads it: a lease renewed within its time to live is **refused** at once
  with a message naming its holder.
* the holder **renews** it every ``ttl / 4`` seconds from a thread (compare-and-swap on the
  version it last wrote: ``If-Match``), and stops the job (:meth:`Lease.check` raises) when a
  renewal finds the lease changed under it, or when it could not renew for ``ttl / 2``
  seconds (before any other job may take it over).
* a lease **left by a crash** (kill -9, a lost machine) stops being renewed.  A new job that
  finds one whose last renewal is older than its time to live watches it for one more time
  to live, by its own clock, and takes it over (compare-and-swap) only if nothing renewed it
  meanwhile.  So a takeover never trusts another machine's clock: a skewed clock can only
  make a job wait, or refuse, never run beside a live holder.
* a job that **ends** marks the lease released (compare-and-swap), and the next job takes it
  at once.

A store that ignores conditional writes (some S3-compatible servers did before 2024) cannot
keep two jobs apart: the lease probes for them when it is taken and refuses such a store.

What it cannot do: fence a holder that froze (a stopped VM, a pause longer than the time to
live) and wakes up after another job took over.  The frozen job finds out at its next
renewal or :meth:`Lease.check` and stops; writes it makes in between are table commits that
the new holder's replay recognises by their versions (see :mod:`ticdc_spark.sinks.base`).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from typing import Any

import orjson

from ticdc_spark.errors import StorageError, TiCDCSparkError
from ticdc_spark.storage.store import Store

__all__ = ["Holder", "Lease", "LeaseHeld", "LeaseLost"]

log = logging.getLogger(__name__)
DEFAULT_TTL = 60.0  # seconds; a stale lease is taken over after about twice this


class LeaseHeld(TiCDCSparkError):
    """Another job holds the lease: this one must not start."""


class LeaseLost(TiCDCSparkError):
    """The lease was taken over or could not be renewed: this job must stop."""


@dataclass(frozen=True)
class Holder:
    """What ``lease.json`` says."""

    token: str
    host: str
    pid: int
    started: str  # ISO 8601, UTC
    renewed: float  # the holder's clock, seconds since the epoch
    ttl: float
    released: bool = False

    @classmethod
    def parse(cls, data: bytes) -> Holder:
        fields = orjson.loads(data)
        return cls(**{k: fields[k] for k in cls.__dataclass_fields__ if k in fields})

    def dump(self) -> bytes:
        return orjson.dumps(asdict(self))

    def describe(self) -> str:
        return f"the job on {self.host} (pid {self.pid}, started {self.started})"


def _now_iso(clock: Callable[[], float]) -> str:
    return datetime.fromtimestamp(clock(), UTC).isoformat(timespec="seconds")


class Lease:
    """The lease ``key`` of ``store``: :meth:`acquire`, then :meth:`check` before each
    commit; :meth:`release` at the end (or use it as a context manager)."""

    def __init__(
        self,
        store: Store,
        key: str = "lease.json",
        ttl: float = DEFAULT_TTL,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.store, self.key, self.ttl = store, key, ttl
        self._clock, self._sleep = clock, sleep
        self._mine = Holder(
            uuid.uuid4().hex, socket.gethostname(), os.getpid(), _now_iso(clock), clock(), ttl
        )
        self._version: str | None = None
        self._lost: str | None = None
        self._renewed_at = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def where(self) -> str:
        return self.store.describe(self.key)

    # -- taking ------------------------------------------------------------------------------

    def acquire(self) -> None:
        """Take the lease, or raise :class:`LeaseHeld` naming the job that holds it."""
        self._probe_conditional_writes()
        body = self._body()
        if self.store.create(self.key, body) and self._confirm():
            return
        while True:
            data, version = self.store.read_versioned(self.key)
            held = self._parse(data)
            if held.token == self._mine.token:  # (our create's answer was lost and resent)
                self._version = version
                return
            if not held.released and (
                self._fresh(held) or not self._stale_after_watching(held, version)
            ):
                raise LeaseHeld(self._refusal(held))
            if self.store.replace(self.key, self._body(), version) and self._confirm():
                if not held.released:
                    log.warning("took over the lease %s from %s", self.where, held.describe())
                return

    def _fresh(self, held: Holder) -> bool:
        return self._clock() - held.renewed < held.ttl

    def _stale_after_watching(self, held: Holder, version: str) -> bool:
        """Watch a lease that looks expired for one more time to live: stale if unchanged."""
        log.warning(
            "%s holds %s but has not renewed it for %.0f s: waiting %.0f s to see whether it "
            "still runs",
            held.describe(),
            self.where,
            self._clock() - held.renewed,
            held.ttl,
        )
        self._sleep(held.ttl)
        try:
            return self.store.read_versioned(self.key)[1] == version
        except StorageError:
            return False

    def _refusal(self, held: Holder) -> str:
        expires = datetime.fromtimestamp(held.renewed + held.ttl, UTC).isoformat(timespec="seconds")
        return (
            f"{self.where} is held by {held.describe()}, renewed "
            f"{max(0.0, self._clock() - held.renewed):.0f} s ago: two jobs must not share a "
            "checkpoint. Stop that job first; if it is gone (killed, its machine lost), its "
            f"lease expires at {expires} and the next start takes it over"
        )

    def _parse(self, data: bytes) -> Holder:
        try:
            return Holder.parse(data)
        except (ValueError, TypeError, KeyError) as exc:
            raise StorageError(
                f"{self.where} is damaged ({type(exc).__name__}): if no job runs on this "
                "checkpoint, delete it and start again",
                self.where,
            ) from None

    def _body(self) -> bytes:
        self._mine = replace(self._mine, renewed=self._clock(), released=False)
        return self._mine.dump()

    def _confirm(self) -> bool:
        """Read the lease back: ours (and remember its version), or someone else's."""
        data, version = self.store.read_versioned(self.key)
        if self._parse(data).token != self._mine.token:
            return False
        self._version, self._renewed_at, self._lost = version, time.monotonic(), None
        return True

    def _probe_conditional_writes(self) -> None:
        """Refuse a store that ignores put-if-absent: it could not keep two jobs apart."""
        probe = f"{self.key}.probe-{uuid.uuid4().hex}"
        try:
            first = self.store.create(probe, b"{}")
            second = self.store.create(probe, b"{}")
        finally:
            self.store.delete(probe)
        if not first or second:
            raise StorageError(
                f"{self.store.uri} does not honour conditional writes (If-None-Match: *): "
                "it cannot keep two jobs on one checkpoint apart; use a store that does "
                "(S3, GCS, Azure, MinIO, SeaweedFS) or a local checkpoint",
                self.store.uri,
            )

    # -- holding -----------------------------------------------------------------------------

    def renew(self) -> None:
        """Renew the lease now; :class:`LeaseLost` if another job took it."""
        with self._lock:
            self.check()  # (silent too long: another job may have it already)
            if self._version is None:
                raise LeaseLost(f"{self.where} was never taken by this job")
            self.store.replace(self.key, self._body(), self._version)
            # Read back whatever the answer: a PUT whose answer was lost and was sent again
            # is refused (412) though its first attempt wrote the lease.
            if self._confirm():
                return
            self._lost = self._taken_message()
            raise LeaseLost(self._lost)

    def _taken_message(self) -> str:
        try:
            other = self._parse(self.store.read(self.key)).describe()
        except StorageError:
            other = "another job (or someone deleted it)"
        return f"{self.where} was taken over by {other}: this job stops"

    def check(self) -> None:
        """Raise :class:`LeaseLost` if the lease may no longer be ours (call before commits)."""
        if self._lost:
            raise LeaseLost(self._lost)
        silent = time.monotonic() - self._renewed_at
        if silent > self.ttl / 2:
            self._lost = (
                f"could not renew {self.where} for {silent:.0f} s: this job stops before "
                "another job may take the checkpoint over"
            )
            raise LeaseLost(self._lost)

    def start_heartbeat(self) -> None:
        """Renew from a daemon thread every ``ttl / 4`` seconds until :meth:`release`."""
        self._thread = threading.Thread(target=self._beat, name="ticdc-lease", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(self.ttl / 4):
            try:
                self.renew()
            except LeaseLost as exc:
                log.error("%s", exc)
                return
            except StorageError as exc:  # the store is away: check() stops the job in time
                log.warning("could not renew the lease: %s", exc)

    def release(self) -> None:
        """Stop renewing and mark the lease released, if it is still ours."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            if self._version is None or self._lost:
                return
            released = replace(self._mine, renewed=self._clock(), released=True).dump()
            if not self.store.replace(self.key, released, self._version):
                log.warning("%s was no longer ours when released", self.where)
            self._version, self._lost = None, f"{self.where} was released by this job"

    def __enter__(self) -> Lease:
        self.acquire()
        self.start_heartbeat()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()
