"""Claim-check messages read from S3, and what the storage layer, the lease, the claim-check
reader and the Delta sink do when the S3 server stops mid-operation and starts again: retry
through a short outage, or stop with one line naming the store and the object; a restart
gives the same tables.  Each test here has its own SeaweedFS, which it stops."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from s3_server import BUCKET, SECRET_KEY, SeaweedFS
from test_apply_edge_cases import Script
from test_canal_json_options import _row
from ticdc_spark.codec import Message, make_decoder, make_encoder
from ticdc_spark.errors import DecodeError, StorageError
from ticdc_spark.model import RowKind
from ticdc_spark.pipeline.apply import Applier
from ticdc_spark.pipeline.checkpoint import StateStore
from ticdc_spark.sinks.base import live
from ticdc_spark.sinks.delta import DeltaSink
from ticdc_spark.storage import Lease, LeaseLost, StorageOptions, open_store

QUICK = {"MAX_RETRIES": "2", "RETRY_TIMEOUT": "2"}  # give up within seconds


@pytest.fixture(scope="module")
def own_server() -> Iterator[SeaweedFS]:
    own = SeaweedFS()
    own.start()
    try:
        yield own
    finally:
        own.close()


@pytest.fixture
def server(own_server: SeaweedFS) -> SeaweedFS:
    """This module's SeaweedFS, running (a test that failed may have left it stopped)."""
    if own_server.process is None:
        own_server.start()
    return own_server


def _options(server: SeaweedFS, **extra: str) -> StorageOptions:
    return StorageOptions.from_environment(extra, environ=server.environment())


def test_an_unreachable_store_stops_with_one_line_naming_the_object(server: SeaweedFS) -> None:
    store = open_store(f"s3://{BUCKET}/ckpt", _options(server, **QUICK))
    store.write("ticdc/state-1.json", b"{}")
    server.stop()
    for action in (lambda: store.read("ticdc/state-1.json"), lambda: store.create("lease", b"")):
        with pytest.raises(StorageError) as caught:
            action()
        message = str(caught.value)
        assert f"s3://{BUCKET}/ckpt/" in message and "the store did not answer" in message
        assert "connection refused" in message and "\n" not in message
        assert SECRET_KEY not in message
    server.start()  # (its volumes come back a moment later: 500s, retried by object_store)
    again = open_store(f"s3://{BUCKET}/ckpt", _options(server))
    assert again.read("ticdc/state-1.json") == b"{}"  # kept, and readable again


def _restart_after(server: SeaweedFS, seconds: float) -> threading.Thread:
    def restart() -> None:
        time.sleep(seconds)
        server.start()

    thread = threading.Thread(target=restart)
    thread.start()
    return thread


def test_writes_retry_through_a_short_outage(server: SeaweedFS) -> None:
    """object_store retries refused connections with backoff (here up to 100 times within
    60 s: its default of 10 times can be spent in a few seconds)."""
    options = _options(server, MAX_RETRIES="100", RETRY_TIMEOUT="60")
    store = open_store(f"s3://{BUCKET}/ckpt", options)
    server.stop()
    restarting = _restart_after(server, 1.0)
    store.write("ticdc/state-2.json", b"{}")
    restarting.join()
    assert store.read("ticdc/state-2.json") == b"{}"


def test_a_lease_that_cannot_be_renewed_stops_the_job(server: SeaweedFS) -> None:
    lease = Lease(open_store(f"s3://{BUCKET}/ckpt", _options(server, **QUICK)), ttl=2.0)
    lease.acquire()
    lease.start_heartbeat()
    server.stop()
    deadline = time.monotonic() + 30
    with pytest.raises(LeaseLost, match=r"could not renew s3://lake/ckpt/lease\.json"):
        while time.monotonic() < deadline:
            lease.check()
            time.sleep(0.1)
    server.start()
    lease.release()


def _claim_check_options(uri: str) -> dict[str, str]:
    return {
        "max-message-bytes": "500",
        "enable-tidb-extension": "true",
        "large-message-handle-option": "claim-check",
        "claim-check-storage-uri": uri,
    }


def test_claim_check_messages_are_read_from_s3(
    server: SeaweedFS, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Written with the storage configured by the environment, read with TiCDC's URI
    parameters instead; a missing file is a dead letter, an unreachable store a stop."""
    for key, value in server.environment().items():
        monkeypatch.setenv(key, value)
    big = _row(RowKind.UPDATE, body="z" * 600)
    (message,) = make_encoder("canal-json", _claim_check_options(f"s3://{BUCKET}/cc")).encode([big])
    location = orjson.loads(message.value)["_tidb"]["claimCheckLocation"]
    assert location.startswith(f"s3://{BUCKET}/cc/")
    assert open_store(f"s3://{BUCKET}/cc", _options(server)).exists(location.rsplit("/", 1)[1])
    for key in server.environment():
        monkeypatch.delenv(key)
    env = server.environment()
    ticdc_uri = (
        f"s3://{BUCKET}/cc?endpoint={env['AWS_ENDPOINT_URL']}&access-key="
        f"{env['AWS_ACCESS_KEY_ID']}&secret-access-key={SECRET_KEY}&region=us-east-1"
    )
    decoder = make_decoder("canal-json", _claim_check_options(ticdc_uri))
    (event,) = decoder.decode(message)
    assert (event.kind, event.after, event.before) == (big.kind, big.after, big.before)

    missing = message.value.replace(location.rsplit("/", 1)[1].encode(), b"gone.json")
    with pytest.raises(DecodeError, match=r"claim-check file gone\.json.*does not exist"):
        decoder.decode(Message(message.key, missing, topic="t", partition=0, offset=1))
    server.stop()
    with pytest.raises(StorageError, match="did not answer") as caught:
        make_decoder("canal-json", _claim_check_options(ticdc_uri + "&x=1")).decode(message)
    assert SECRET_KEY not in str(caught.value)


def _delta_rows(root: str, options: StorageOptions) -> list[dict[str, Any]]:
    sink = DeltaSink(root, storage=options)
    return sorted(live(sink.read(("db", "t"))).to_pylist(), key=str)


def test_a_delta_batch_cut_by_an_outage_is_replayed_to_the_same_table(
    server: SeaweedFS, tmp_path: Path
) -> None:
    root, options = f"s3://{BUCKET}/lake", _options(server, **QUICK)
    checkpoint = StateStore(tmp_path / "checkpoint")
    first = Script().insert(100, {"id": "1", "v": "a"}).insert(100, {"id": "2", "v": "b"})
    Applier(DeltaSink(root, storage=options), checkpoint, mode="eventual").apply(first.table(), 0)
    second = Script().update(200, {"id": "1", "v": "a"}, {"id": "1", "v": "c"})
    changelog = second.delete(200, {"id": "2", "v": "b"}).table()
    applier = Applier(DeltaSink(root, storage=options), checkpoint, mode="eventual")
    server.stop()
    with pytest.raises(StorageError) as caught:
        applier.apply(changelog, 1)
    assert str(caught.value) == (
        f"cannot apply rows to db.t in {root}: the store did not answer: connection refused "
        "(after 2 retries)"
    )
    server.start()  # the job restarts (with the default retries: the volumes come back late)
    patient = _options(server)
    Applier(DeltaSink(root, storage=patient), checkpoint, mode="eventual").apply(changelog, 1)
    assert _delta_rows(root, patient) == [{"id": 1, "v": "c"}]
