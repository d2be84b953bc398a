"""replicate end to end on Spark, with the tables on a real S3 server (SeaweedFS): a workload
with DDLs, read from a capture directory, applied to Delta tables on ``s3://`` and to an
Iceberg warehouse on ``s3://`` (checkpoint local), then verified; and wrong credentials give
``verify`` one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline_helpers import assert_matches, produce, write_capture_dir
from s3_server import BUCKET
from ticdc_spark.cli import main
from ticdc_spark.sinks import make_sink
from ticdc_spark.spark.pipeline import PipelineConfig, run
from ticdc_spark.storage import StorageOptions
from ticdc_spark.testing.workload import Workload

OPTIONS = {"enable-tidb-extension": "true"}


@pytest.mark.spark
@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_replicate_to_tables_on_s3_with_a_local_checkpoint(
    spark, kind: str, s3_root: str, s3_options: StorageOptions, tmp_path: Path
) -> None:
    workload = Workload(seed=41, rows=300, tables=2, ddl_every=10, watermark_every=5)
    target = (
        f"delta:{s3_root}/lake"
        if kind == "delta"
        else f"iceberg:sqlite:///{tmp_path / 'catalog.db'}#{s3_root}/warehouse"
    )
    config = PipelineConfig(
        engine="embedded",
        source=str(write_capture_dir(produce(workload, "canal-json", OPTIONS), tmp_path)),
        protocol="canal-json",
        target=target,
        checkpoint=str(tmp_path / "checkpoint"),
        options=OPTIONS,
        on_error="stop",
        storage=s3_options,
    )
    run(spark, config)
    assert_matches(workload, make_sink(target, storage=s3_options))


def test_verify_with_wrong_credentials_says_one_line(
    s3_root: str, s3_options: StorageOptions, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wrong = ["--storage-option", "AWS_SECRET_ACCESS_KEY=wrong-secret-value"]
    env = [f"{k}={v}" for k, v in s3_options.values.items() if k != "AWS_SECRET_ACCESS_KEY"]
    args = ["verify", "--target", f"delta:{s3_root}/lake", "--expected", str(tmp_path)]
    args += [a for pair in env for a in ("--storage-option", pair)] + wrong
    assert main(args) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith(f"ticdc-spark verify: cannot list s3://{BUCKET}/")
    assert "access denied" in err and "wrong-secret-value" not in err


def test_a_checkpoint_on_an_object_store_is_refused_for_now(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not taken as a local directory named ``s3:``."""
    args = [
        "replicate",
        "--engine",
        "embedded",
        "--source",
        str(tmp_path),
        "-p",
        "canal-json",
        "--target",
    ]
    args += [f"delta:{tmp_path / 'lake'}", "--checkpoint", "s3://lake/ckpt"]
    assert main(args) == 2
    assert "--checkpoint must be a local directory for now" in capsys.readouterr().err
    assert not Path("s3:").exists()
