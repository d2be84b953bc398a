"""A Spark job on S3 through S3A, run in its own process by tests/test_spark_s3a.py (a session
with the ``s3`` and ``delta`` features cannot be the shared test session: JVM libraries are
fixed when a session starts).

Given a root ``s3://bucket/prefix`` and the storage settings as JSON, it writes and reads
parquet (through ``s3a://`` and ``s3://``), a Delta table, and runs a streaming query whose
checkpoint is on S3 twice, the second run going on from the first's checkpoint; it prints
what it read as one JSON line.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import orjson

from ticdc_spark.spark.session import local_session
from ticdc_spark.storage import StorageOptions


def stream_once(spark: Any, source: str, out: str, checkpoint: str) -> None:
    query = (
        spark.readStream.schema("id long")
        .parquet(source)
        .writeStream.format("parquet")
        .option("path", out)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()


def main() -> None:
    root, values = sys.argv[1], orjson.loads(sys.argv[2])
    s3a = "s3a" + root[2:]
    options = StorageOptions(values)
    spark = local_session("s3a-test", features=["s3", "delta"], settings=options.spark_s3a())
    spark.range(100).write.parquet(f"{s3a}/table")
    found: dict[str, object] = {"parquet": spark.read.parquet(f"{root}/table").count()}

    spark.range(10).write.format("delta").save(f"{s3a}/delta")
    spark.range(10, 15).write.format("delta").mode("append").save(f"{s3a}/delta")
    found["delta"] = spark.read.format("delta").load(f"{s3a}/delta").count()

    spark.range(0, 5).write.parquet(f"{s3a}/in")
    stream_once(spark, f"{s3a}/in", f"{s3a}/out", f"{s3a}/checkpoint")
    spark.range(5, 8).write.mode("append").parquet(f"{s3a}/in")
    stream_once(spark, f"{s3a}/in", f"{s3a}/out", f"{s3a}/checkpoint")
    found["stream"] = sorted(r.id for r in spark.read.parquet(f"{s3a}/out").collect())
    spark.stop()
    print(json.dumps(found), flush=True)


if __name__ == "__main__":
    main()
