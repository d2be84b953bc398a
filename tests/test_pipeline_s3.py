"""replicate end to end on Spark, with the tables on a real S3 server (SeaweedFS): a workload
with DDLs, read from a capture directory, applied to Delta tables on ``s3://`` and to an
Iceberg warehouse on ``s3://``, with the checkpoint local and on ``s3://`` (Spark's part
through S3A), then verified; ``replicate --checkpoint s3://...`` killed at a random moment
and started again; one job per checkpoint on every store; wrong credentials in one line."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline_helpers import assert_matches, produce, write_capture_dir
from restart_helpers import environment
from s3_server import BUCKET, SeaweedFS
from ticdc_spark.cli import main
from ticdc_spark.sinks import make_sink
from ticdc_spark.spark.pipeline import PipelineConfig, run, take_lease
from ticdc_spark.storage import StorageOptions, open_store
from ticdc_spark.storage.lease import Holder
from ticdc_spark.testing.expected import write_expected
from ticdc_spark.testing.workload import Workload

OPTIONS = {"enable-tidb-extension": "true"}


def _workload() -> Workload:
    return Workload(seed=41, rows=300, tables=2, ddl_every=10, watermark_every=5)


def _target(kind: str, s3_root: str, tmp_path: Path) -> str:
    if kind == "delta":
        return f"delta:{s3_root}/lake"
    return f"iceberg:sqlite:///{tmp_path / 'catalog.db'}#{s3_root}/warehouse"


@pytest.mark.spark
@pytest.mark.parametrize("checkpoint_on", ["local", "s3"])
@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_replicate_to_tables_on_s3(
    spark_s3, kind: str, checkpoint_on: str, s3_root: str, s3_options: StorageOptions, tmp_path
) -> None:
    workload = _workload()
    local = checkpoint_on == "local"
    config = PipelineConfig(
        engine="embedded",
        source=str(write_capture_dir(produce(workload, "canal-json", OPTIONS), tmp_path)),
        protocol="canal-json",
        target=_target(kind, s3_root, tmp_path),
        checkpoint=str(tmp_path / "checkpoint") if local else f"{s3_root}/checkpoint",
        options=OPTIONS,
        source_options={"maxOffsetsPerTrigger": "400"},  # (several micro-batches)
        on_error="stop",
        storage=s3_options,
    )
    run(spark_s3, config)
    assert_matches(workload, make_sink(config.target, storage=s3_options))
    if not local:  # both parts of the checkpoint on S3, and the lease given back
        keys = open_store(config.checkpoint, s3_options).list_keys()
        assert {"spark/commits/0", "spark/commits/1", "ticdc/pipeline.json"} <= set(keys)
        assert any(k.startswith("ticdc/state-") for k in keys)
        lease = Holder.parse(open_store(config.checkpoint, s3_options).read("ticdc/lease.json"))
        assert lease.released and lease.pid == os.getpid()


def _replicate(source: Path, target: str, checkpoint: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "ticdc_spark.cli",
        "replicate",
        "--source",
        str(source),
        "-p",
        "canal-json",
        "-o",
        "enable-tidb-extension=true",
        "--target",
        target,
        "--checkpoint",
        checkpoint,
        "--trigger",
        "once",
        "--quiet",
        "--source-option",
        "maxOffsetsPerTrigger=150",
    ]


def _wait_for_a_commit(
    job: subprocess.Popen[bytes], checkpoint: str, options: StorageOptions
) -> None:
    """Until Spark has committed a micro-batch to the checkpoint on S3 (the job runs)."""
    store = open_store(checkpoint, options)
    deadline = time.monotonic() + 600
    while not store.list_keys("spark/commits/"):
        assert job.poll() is None, "replicate ended before its first commit"
        assert time.monotonic() < deadline, "no commit within 10 minutes"
        time.sleep(0.2)


@pytest.mark.spark
def test_replicate_killed_at_a_random_moment_with_tables_and_checkpoint_on_s3(
    s3_server: SeaweedFS, s3_root: str, s3_options: StorageOptions, tmp_path: Path
) -> None:
    """``kill -9`` of ``replicate --checkpoint s3://... --target delta:s3://...`` between
    two micro-batches or inside one, then a start (at once: the killed job's lease is taken
    over, its process being gone): the tables are the workload's, as ``verify`` says."""
    workload = _workload()
    source = write_capture_dir(produce(workload, "canal-json", OPTIONS), tmp_path)
    target, checkpoint = f"delta:{s3_root}/lake", f"{s3_root}/checkpoint"
    command = _replicate(source, target, checkpoint)
    env = environment(storage=s3_server.environment())
    job = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _wait_for_a_commit(job, checkpoint, s3_options)
        time.sleep(random.Random(28).uniform(0, 1.5))
    finally:
        job.send_signal(signal.SIGKILL)
        job.communicate(timeout=60)
    assert job.returncode == -signal.SIGKILL  # (killed while it ran, not after it ended)
    done = subprocess.run(command, env=env, capture_output=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    assert b"took over the lease" in done.stderr
    write_expected(tmp_path / "expected", workload.final_schemas(), workload.final_state())
    verify = ["verify", "--target", target, "--expected", str(tmp_path / "expected")]
    assert main(verify + _storage_arguments(s3_options)) == 0


def _storage_arguments(options: StorageOptions, **changed: str) -> list[str]:
    values = {**options.values, **changed}
    return [a for key, value in values.items() for a in ("--storage-option", f"{key}={value}")]


def _replicate_args(tmp_path: Path, checkpoint: str) -> list[str]:
    args = ["replicate", "--source", str(tmp_path), "-p", "canal-json", "--target"]
    return [*args, f"delta:{tmp_path / 'lake'}", "--checkpoint", checkpoint]


def test_a_second_job_on_a_checkpoint_is_refused_naming_the_first(
    store_root: tuple[str, StorageOptions], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On a local checkpoint as on S3: refused before Spark starts, in one line."""
    root, options = store_root
    first = take_lease(root, options)
    try:
        assert main(_replicate_args(tmp_path, root) + _storage_arguments(options)) == 1
    finally:
        first.release()
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert f"ticdc-spark replicate: {root}/ticdc/lease.json is held by the job on" in err
    assert f"{socket.gethostname()} (pid {os.getpid()}, started" in err
    assert "two jobs must not share a checkpoint" in err


def test_verify_and_replicate_with_wrong_credentials_say_one_line(
    s3_root: str, s3_options: StorageOptions, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wrong = _storage_arguments(s3_options, AWS_SECRET_ACCESS_KEY="wrong-secret-value")
    verify = ["verify", "--target", f"delta:{s3_root}/lake", "--expected", str(tmp_path)]
    assert main(verify + wrong) == 1
    replicate = _replicate_args(tmp_path, f"{s3_root}/checkpoint")
    assert main(replicate + wrong) == 1
    verified, replicated = capsys.readouterr().err.splitlines()
    assert verified.startswith(f"ticdc-spark verify: cannot list s3://{BUCKET}/")
    where = f"{s3_root}/checkpoint/ticdc/lease.json"
    assert replicated.startswith(f"ticdc-spark replicate: cannot create {where}")
    for line in (verified, replicated):
        assert "access denied" in line and "wrong-secret-value" not in line


def test_a_checkpoint_where_spark_cannot_write_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Spark keeps its part of the checkpoint through a Hadoop connector: S3A is loaded, the
    GCS and Azure connectors are not (and a URI is never taken as a directory named gs:)."""
    assert main(_replicate_args(tmp_path, "gs://lake/ckpt")) == 2
    assert "--checkpoint on gs:// is not supported yet" in capsys.readouterr().err
    assert not Path("gs:").exists()
