"""The checkpoint on a real S3 server (SeaweedFS), through the pipeline's apply path without
Spark (the kill-point harness of restart_helpers: the same applier, state store, changelog
log and sinks as ``replicate``), with the tables on S3 too: killed at named points and at
random moments, restarts give the tables of a run that never stopped; the server stopped in
the middle of a batch stops the job naming the store and the object, or is retried through,
and a restart gives the same tables; a damaged state on S3 is rebuilt or refused naming its
URI; the Kafka source's initial offsets and the dead letters on S3."""

from __future__ import annotations

import random
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from restart_helpers import (
    PAUSE_AT,
    assert_same_tables,
    harness_command,
    harness_environment,
    run_harness,
    stream,
    target,
    write_batches,
)
from s3_server import SECRET_KEY, SeaweedFS
from ticdc_spark.errors import CheckpointError
from ticdc_spark.pipeline.apply import Applier
from ticdc_spark.pipeline.checkpoint import ChangelogLog, StateStore
from ticdc_spark.pipeline.dead_letters import DeadLetterWriter, dead_letters
from ticdc_spark.pipeline.failpoints import CRASH_EXIT_CODE
from ticdc_spark.sinks import make_sink
from ticdc_spark.storage import StorageOptions, open_store

RECORDS_PER_BATCH = 12
# In stream order (each restart reaches the next): the Spark-side points, a step, and the
# table operations that are several objects on S3 (Delta's renames and drops by intent
# objects, Iceberg's rewrite); then SIGKILLs at random moments.
POINTS = {
    "delta": ["logged:2", "step:3:2", "rewrite", "rename", "drop", "drop-deleting", "committed:*"],
    "iceberg": ["decoded:2", "state-saved:3", "rewrite-swap", "rename", "drop", "committed:*"],
}


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The kill-anywhere stream's micro-batches, and the local tables of runs that never
    stopped (``ROOT/delta``, ``ROOT/iceberg``)."""
    root = tmp_path_factory.mktemp("restart-s3")
    write_batches(stream(), root / "batches", RECORDS_PER_BATCH)
    for kind in ("delta", "iceberg"):
        calm = root / kind
        assert run_harness(calm / "checkpoint", target(kind, calm), root / "batches", None) == 0
    return root


@pytest.fixture
def server(s3_server: SeaweedFS) -> Iterator[SeaweedFS]:
    """The session's SeaweedFS, running again after a test that stops it."""
    yield s3_server
    if s3_server.process is None:
        s3_server.start()


def _calm(prepared: Path, kind: str) -> object:
    return make_sink(target(kind, prepared / kind))


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_killed_anywhere_with_tables_and_checkpoint_on_s3(
    prepared: Path, server: SeaweedFS, s3_root: str, s3_options: StorageOptions, tmp_path, kind
) -> None:
    checkpoint, spec = f"{s3_root}/checkpoint", target(kind, tmp_path, s3_root)
    storage = dict(s3_options.values)
    for point in POINTS[kind]:
        code = run_harness(checkpoint, spec, prepared / "batches", point, storage=storage)
        assert code == CRASH_EXIT_CODE, f"{point} was never reached"
    rng = random.Random(28)
    for _ in range(3):  # SIGKILL at random moments (inside object-store requests too)
        job = subprocess.Popen(
            harness_command(checkpoint, spec, prepared / "batches"),
            env=harness_environment(storage=storage),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(rng.uniform(1.0, 4.0))
        job.send_signal(signal.SIGKILL)
        job.wait(30)
    assert run_harness(checkpoint, spec, prepared / "batches", None, storage=storage) == 0
    assert_same_tables(make_sink(spec, storage=s3_options), _calm(prepared, kind))


def _paused(checkpoint: str, spec: str, batches: Path, storage: dict[str, str], pause: Path):
    """The harness, stopped inside micro-batch 4 (after its first step) until told to go."""
    pause.mkdir()
    env = {**harness_environment(storage=storage), PAUSE_AT: f"step:4:1@{pause}"}
    job = subprocess.Popen(
        harness_command(checkpoint, spec, batches), env=env, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 300
    while not (pause / "reached").exists():
        assert job.poll() is None, job.communicate()[1].decode()[-3000:]
        assert time.monotonic() < deadline, "the harness never reached batch 4's first step"
        time.sleep(0.05)
    return job


def test_the_server_stopped_mid_batch_stops_the_job_naming_the_object(
    prepared: Path, server: SeaweedFS, s3_root: str, s3_options: StorageOptions, tmp_path: Path
) -> None:
    """Past its retries (2 within 2 s here) the job stops with one line naming the store's
    object and the reason; started again once the server is back, it gives the same tables."""
    checkpoint, spec = f"{s3_root}/checkpoint", target("delta", tmp_path, s3_root)
    quick = {**s3_options.values, "MAX_RETRIES": "2", "RETRY_TIMEOUT": "2"}
    job = _paused(checkpoint, spec, prepared / "batches", quick, tmp_path / "pause")
    server.stop()
    (tmp_path / "pause" / "go").touch()
    _, err = job.communicate(timeout=300)
    assert job.returncode == 1
    last = err.decode().strip().splitlines()[-1]
    assert last.startswith("ticdc_spark.errors.StorageError: cannot "), last
    assert f" {s3_root}/" in last and "the store did not answer: connection refused" in last
    assert SECRET_KEY not in err.decode()
    server.start()
    storage = dict(s3_options.values)
    assert run_harness(checkpoint, spec, prepared / "batches", None, storage=storage) == 0
    assert_same_tables(make_sink(spec, storage=s3_options), _calm(prepared, "delta"))


def test_a_short_outage_mid_batch_is_retried_through(
    prepared: Path, server: SeaweedFS, s3_root: str, s3_options: StorageOptions, tmp_path: Path
) -> None:
    """The server stopped inside a batch and started again while the job retries (up to 100
    times within 120 s): the job goes on, and the tables are those of a calm run."""
    checkpoint, spec = f"{s3_root}/checkpoint", target("iceberg", tmp_path, s3_root)
    patient = {**s3_options.values, "MAX_RETRIES": "100", "RETRY_TIMEOUT": "120"}
    job = _paused(checkpoint, spec, prepared / "batches", patient, tmp_path / "pause")
    server.stop()
    (tmp_path / "pause" / "go").touch()
    restarting = threading.Thread(target=server.start)  # (takes a few seconds itself)
    restarting.start()
    _, err = job.communicate(timeout=300)
    restarting.join()
    assert job.returncode == 0, err.decode()[-3000:]
    assert_same_tables(make_sink(spec, storage=s3_options), _calm(prepared, "iceberg"))


def _batches(prepared: Path) -> list[pa.Table]:
    out = []
    for path in sorted((prepared / "batches").glob("*.arrow")):
        with pa.memory_map(str(path)) as source:
            out.append(pa.ipc.open_file(source).read_all())
    return out


def test_a_damaged_state_on_s3_is_rebuilt_or_refused_naming_its_uri(
    prepared: Path, s3_root: str, s3_options: StorageOptions, tmp_path: Path
) -> None:
    checkpoint, batches = f"{s3_root}/checkpoint", _batches(prepared)

    def applier() -> Applier:
        store = StateStore(checkpoint, storage=s3_options)
        return Applier(make_sink(target("delta", tmp_path), app_id=store.pipeline_id()), store)

    first, log = applier(), ChangelogLog(f"{checkpoint}/ticdc", s3_options)
    for number in range(5):
        log.write(number, batches[number])
        first.apply(batches[number], number)
        log.prune(first.store.oldest())
    files = open_store(f"{checkpoint}/ticdc", s3_options)
    files.write("state-000000000004.json", b'{"watermarks": {')
    assert [r.batch for r in applier().recover(log, 4)] == [4]  # rebuilt from the log
    assert len(files.read("state-000000000004.json")) > 100
    files.write("state-000000000004.json", b'{"watermarks": {')
    files.delete(files.list_keys("wal/"))
    with pytest.raises(CheckpointError) as refused:
        applier().recover(log, 4)
    assert f"{checkpoint}/ticdc/state-000000000004.json is damaged" in str(refused.value)
    assert f"{checkpoint}/ticdc/wal" in str(refused.value)


def test_racing_first_starts_agree_on_the_pipeline_id(
    s3_root: str, s3_options: StorageOptions
) -> None:
    """``pipeline.json`` is created with put-if-absent and read back: of 8 first starts at
    once, every one goes on with the winner's id."""
    stores = [StateStore(f"{s3_root}/ck", storage=s3_options) for _ in range(8)]
    ready = threading.Barrier(len(stores))
    ids: list[str] = []

    def start(store: StateStore) -> None:
        ready.wait()
        ids.append(store.pipeline_id())

    threads = [threading.Thread(target=start, args=(store,)) for store in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(ids) == 8 and len(set(ids)) == 1


def test_dead_letters_on_s3(s3_root: str, s3_options: StorageOptions) -> None:
    rows = pa.table(
        {"topic": ["t", "t"], "partition": [0, 1], "offset": [5, 9], "value": [b"{", b"x"]}
    )
    writer = DeadLetterWriter(f"{s3_root}/dead", s3_options)
    assert writer.write(7, dead_letters(rows, "not JSON")) == 2
    written = open_store(f"{s3_root}/dead", s3_options).read("dead-letters-000000000007.jsonl")
    assert written.count(b"\n") == 2 and b'"error":"not JSON"' in written
    assert b'"value":"ew=="' in written  # (base64 of "{")


def test_the_kafka_sources_initial_offsets_are_kept_once_on_s3(
    s3_root: str, s3_options: StorageOptions
) -> None:
    """Kept with put-if-absent: a run that resolved other offsets goes on from the first's.
    The source's Python workers learn the store from ``storage.*`` options, which Spark
    masks in query plans (secrets by name)."""
    from ticdc_spark.io.kafka import redact
    from ticdc_spark.spark.kafka.offsets import load_offsets, store_offsets
    from ticdc_spark.spark.kafka.options import SourceConfig, storage_source_options

    path = f"{s3_root}/checkpoint/kafka-initial-offsets.json"
    assert load_offsets(path, s3_options) is None
    assert store_offsets(path, {"cdc": {"0": 5}}, s3_options) == {"cdc": {"0": 5}}
    assert store_offsets(path, {"cdc": {"0": 9}}, s3_options) == {"cdc": {"0": 5}}
    options = storage_source_options(s3_options)
    config = SourceConfig.parse({"kafka.bootstrap.servers": "b:9092", "subscribe": "t", **options})
    assert config.storage is not None
    assert load_offsets(path, config.storage) == {"cdc": {"0": 5}}
    assert SECRET_KEY not in repr(config) and SECRET_KEY not in str(redact(options))
