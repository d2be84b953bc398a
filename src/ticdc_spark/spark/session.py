"""Building a local SparkSession suited to the pipeline."""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["local_session"]


def local_session(app: str = "ticdc-spark", cores: int = 2, **conf: Any) -> Any:
    """A local SparkSession: Arrow on, small shuffles, no UI, loopback networking."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Python workers must run this interpreter (with pyarrow and ticdc_spark), not PATH's.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName(app)
        .config("spark.ui.enabled", "false")
        # The driver collects each micro-batch's changelog to apply it; the default 1 GiB
        # heap and result-size cap are too small for batches of a few hundred thousand rows.
        .config("spark.driver.memory", os.environ.get("TICDC_SPARK_DRIVER_MEMORY", "4g"))
        .config("spark.driver.maxResultSize", "0")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(max(2, cores)))
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.streaming.stopGracefullyOnShutdown", "true")
        .config("spark.python.worker.reuse", "true")
    )
    for key, value in conf.items():
        builder = builder.config(key, str(value))
    return builder.getOrCreate()
