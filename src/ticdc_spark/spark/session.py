"""Building a local SparkSession suited to the pipeline."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from typing import Any

from ticdc_spark.spark.jars import check_spark_version, spark_settings

__all__ = ["ARROW_BATCH_CONF", "local_session"]

# How Spark cuts the Arrow batches it sends to the decode stage's Python workers.  With a byte
# cap set (Spark's default: 64 MiB), Spark re-measures the batch it is building after every
# row (ArrowWriter.sizeInBytes, on each column vector): a JFR profile of the decode stage
# shows that check as 15-20% of the JVM's time, and lifting it makes the stage 10-20% faster
# (benchmarks/pipeline_bench.py has a contender with Spark's cap).  Spark skips the check
# only when the cap is exactly Int.MaxValue, so the batches are bounded by their number of
# records instead: 2,000 messages (as fast as 10,000 on the benchmark).  A batch then holds
# at most 2,000 x the largest message.  Kafka caps messages at 1 MiB unless a topic raises
# max.message.bytes (TiCDC never writes more than the topic accepts), so a batch stays under
# the 2 GiB an Arrow column can hold.  For topics that allow much larger messages, set the
# cap back (``--spark-conf spark.sql.execution.arrow.maxBytesPerBatch=64m``) or fewer records.
ARROW_BATCH_CONF: dict[str, str] = {
    "spark.sql.execution.arrow.maxBytesPerBatch": str(2**31 - 1),
    "spark.sql.execution.arrow.maxRecordsPerBatch": "2000",
}


def local_session(
    app: str = "ticdc-spark",
    cores: int = 2,
    settings: Mapping[str, str] | None = None,
    features: Iterable[str] = (),
    **conf: Any,
) -> Any:
    """A local SparkSession: Arrow on, small shuffles, no UI, loopback networking.

    ``features`` names the JVM libraries to load (:data:`ticdc_spark.spark.jars.FEATURES`:
    ``delta``, ``iceberg``, ``kafka``, ``s3``), resolved from Maven Central and cached.
    ``settings`` (a mapping, e.g. from the command line) and ``conf`` override the defaults,
    :data:`ARROW_BATCH_CONF` included.
    """
    features = tuple(features)
    if features:
        check_spark_version()
    _python_environment()
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(f"local[{cores}]").appName(app)
    chosen = {
        **_defaults(cores),
        **ARROW_BATCH_CONF,
        **spark_settings(features),
        **(settings or {}),
        **conf,
    }
    for key, value in chosen.items():
        builder = builder.config(key, str(value))
    return builder.getOrCreate()


def _python_environment() -> None:
    """Loopback networking, and Python workers that run this interpreter (with pyarrow and
    ticdc_spark), not PATH's; a variable already set wins."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")


def _defaults(cores: int) -> dict[str, str]:
    """The session settings of a local pipeline, before the caller's."""
    return {
        "spark.ui.enabled": "false",
        # The driver collects each micro-batch's changelog to apply it; the default 1 GiB
        # heap and result-size cap are too small for batches of a few hundred thousand rows.
        "spark.driver.memory": os.environ.get("TICDC_SPARK_DRIVER_MEMORY", "4g"),
        "spark.driver.maxResultSize": "0",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(max(2, cores)),
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
        "spark.sql.streaming.stopGracefullyOnShutdown": "true",
        "spark.python.worker.reuse": "true",
    }
