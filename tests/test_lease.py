"""The single-writer lease, on a local directory and on a real S3 server: a second job is
refused naming the first, a crashed job's lease is taken over once it stops being renewed,
and a job whose lease was taken stops."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import orjson
import pytest

from ticdc_spark.errors import StorageError
from ticdc_spark.storage import Lease, LeaseHeld, LeaseLost, StorageOptions, open_store
from ticdc_spark.storage.lease import Holder
from ticdc_spark.storage.local import LocalStore


def test_a_second_job_is_refused_naming_the_first(store_root: tuple[str, StorageOptions]) -> None:
    first = Lease(open_store(*store_root), ttl=30)
    first.acquire()
    second = Lease(open_store(*store_root), ttl=30)
    with pytest.raises(LeaseHeld) as refused:
        second.acquire()
    message = str(refused.value)
    mine = Holder.parse(open_store(*store_root).read("lease.json"))
    assert f"held by the job on {mine.host} (pid {os.getpid()}, started {mine.started})" in message
    assert "lease.json" in message and "expires at" in message
    first.release()
    second.acquire()  # released: taken at once
    with pytest.raises(LeaseLost, match="released by this job"):
        first.renew()
    second.release()


_HOLDER = textwrap.dedent(
    """
    import sys, time
    from ticdc_spark.storage import Lease, StorageOptions, open_store
    import orjson
    root, values, ttl = sys.argv[1], orjson.loads(sys.argv[2]), float(sys.argv[3])
    with Lease(open_store(root, StorageOptions(values)), ttl=ttl):
        print("held", flush=True)
        time.sleep(600)
    """
)


def _hold_in_a_process(store_root: tuple[str, StorageOptions], ttl: float) -> subprocess.Popen[str]:
    args = [store_root[0], orjson.dumps(dict(store_root[1].values)).decode(), str(ttl)]
    job = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, *args], stdout=subprocess.PIPE, text=True
    )
    assert job.stdout is not None and job.stdout.readline().strip() == "held"
    return job


def _acquire_within(lease: Lease, seconds: float) -> int:
    """Try to take the lease until it is ours (bounded); returns the refusals seen."""
    refusals, deadline = 0, time.monotonic() + seconds
    while True:
        try:
            lease.acquire()
            return refusals
        except LeaseHeld:
            refusals += 1
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_a_killed_jobs_lease_is_taken_over_once_it_goes_stale(
    store_root: tuple[str, StorageOptions], caplog: pytest.LogCaptureFixture
) -> None:
    job = _hold_in_a_process(store_root, ttl=1.0)
    try:
        with pytest.raises(LeaseHeld, match=f"pid {job.pid}"):
            Lease(open_store(*store_root), ttl=1.0).acquire()
        time.sleep(1.5)  # its heartbeat (every 0.25 s) keeps it fresh
        with pytest.raises(LeaseHeld, match=f"pid {job.pid}"):
            Lease(open_store(*store_root), ttl=1.0).acquire()
    finally:
        os.kill(job.pid, signal.SIGKILL)
        job.wait()
    successor = Lease(open_store(*store_root), ttl=1.0)
    _acquire_within(successor, 30)
    assert Holder.parse(open_store(*store_root).read("lease.json")).pid == os.getpid()
    assert f"took over the lease {store_root[0]}/lease.json from the job on" in caplog.text
    successor.release()


def test_a_lease_that_looks_stale_but_is_renewed_while_watched_is_not_taken(
    tmp_path: Path,
) -> None:
    """A live holder whose clock runs behind looks stale: the newcomer watches it for a
    time to live, sees a renewal, and refuses."""
    store = LocalStore(tmp_path)
    behind = Lease(store, ttl=5, clock=lambda: time.time() - 3600)
    behind.acquire()
    newcomer = Lease(store, ttl=5, sleep=lambda _seconds: behind.renew())
    with pytest.raises(LeaseHeld):
        newcomer.acquire()
    behind.renew()  # still ours
    took = Lease(store, ttl=5, sleep=lambda _seconds: None)  # nothing renews it meanwhile
    took.acquire()
    with pytest.raises(LeaseLost):
        behind.renew()


def test_a_store_that_ignores_conditional_writes_is_refused(tmp_path: Path) -> None:
    class Careless(LocalStore):  # an S3-compatible server that ignores If-None-Match
        def create(self, key: str, data: bytes) -> bool:
            self.write(key, data)
            return True

    with pytest.raises(StorageError, match="does not honour conditional writes"):
        Lease(Careless(tmp_path)).acquire()


def test_a_damaged_lease_names_itself_and_the_way_out(
    store_root: tuple[str, StorageOptions],
) -> None:
    open_store(*store_root).write("lease.json", b"{not json")
    with pytest.raises(StorageError, match=r"lease\.json is damaged.*delete it"):
        Lease(open_store(*store_root)).acquire()
