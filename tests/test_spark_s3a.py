"""Spark on S3 through Hadoop's S3A connector (the ``s3`` feature: hadoop-aws with the three
AWS SDK modules it uses, not the 641 MB bundle), configured by
:meth:`~ticdc_spark.storage.StorageOptions.spark_s3a` from the same settings as every other
engine: parquet, a Delta table and a streaming checkpoint on SeaweedFS, and the Delta table
read back by delta-rs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from ticdc_spark.spark.jars import SPARK_VERSION
from ticdc_spark.storage import StorageOptions, open_store

JOB = Path(__file__).with_name("spark_s3a_job.py")


def _pyspark_version() -> str:
    import pyspark

    return str(pyspark.__version__)


@pytest.mark.spark
@pytest.mark.skipif(
    _pyspark_version() != SPARK_VERSION,
    reason=f"the pinned JVM libraries need PySpark {SPARK_VERSION}",
)
def test_spark_writes_parquet_delta_and_a_streaming_checkpoint_on_s3(
    s3_root: str, s3_options: StorageOptions
) -> None:
    from deltalake import DeltaTable

    done = subprocess.run(
        [sys.executable, str(JOB), s3_root, orjson.dumps(dict(s3_options.values)).decode()],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found == {"parquet": 100, "delta": 15, "stream": list(range(8))}
    keys = open_store(s3_root, s3_options).list_keys("checkpoint/")
    assert "checkpoint/commits/0" in keys and "checkpoint/commits/1" in keys
    table = DeltaTable(f"{s3_root}/delta", storage_options=s3_options.delta("s3"))
    assert table.version() == 1
    assert sorted(table.to_pyarrow_table()["id"].to_pylist()) == list(range(15))
