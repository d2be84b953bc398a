"""Building a SparkSession suited to the pipeline: local (``local[N]``), or a driver here with
its executors on a cluster (``spark://HOST:PORT``)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from ticdc_spark.errors import ConfigError
from ticdc_spark.spark.cluster import check_executors, check_master, is_local
from ticdc_spark.spark.jars import check_spark_version, spark_settings, start_lock

__all__ = ["ARROW_BATCH_CONF", "local_session", "spark_session"]

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
    """A local SparkSession (``local[cores]``): see :func:`spark_session`."""
    return spark_session(app, None, cores, settings, features, **conf)


def spark_session(
    app: str = "ticdc-spark",
    master: str | None = None,
    cores: int = 2,
    settings: Mapping[str, str] | None = None,
    features: Iterable[str] = (),
    **conf: Any,
) -> Any:
    """A SparkSession: Arrow on, no UI, UTC; local (``local[cores]``, small shuffles, on
    loopback) when ``master`` is None, else the driver here and the executors on the cluster
    at ``master`` (``spark://HOST:PORT``).

    ``features`` names the JVM libraries to load (:data:`ticdc_spark.spark.jars.FEATURES`:
    ``delta``, ``iceberg``, ``kafka``, ``s3``), resolved from Maven Central and cached, and
    shipped by Spark to a cluster's executors.  ``settings`` (a mapping, e.g. from the
    command line) and ``conf`` override the defaults, :data:`ARROW_BATCH_CONF` included.
    """
    features = tuple(features)
    if features:
        check_spark_version()
    master = master or f"local[{cores}]"
    check_master(master)
    loopback = _on_loopback(master)
    _python_environment(loopback)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName(app)
    chosen = _settings(master, cores, loopback, features, settings or {}, conf)
    for key, value in chosen.items():
        builder = builder.config(key, str(value))
    with start_lock(chosen):
        session = builder.getOrCreate()
    if not is_local(master):
        _check_same_master(session, master)
        check_executors(session)
    return session


def _settings(
    master: str,
    cores: int,
    loopback: bool,
    features: tuple[str, ...],
    settings: Mapping[str, str],
    conf: Mapping[str, Any],
) -> dict[str, Any]:
    """The session's settings, each layer overriding the ones before it: the pipeline's
    defaults, those of a local or a cluster master, loopback networking, the Arrow batch
    size, the JVM libraries of ``features``, then the caller's ``settings`` and ``conf``."""
    return {
        **_defaults(),
        **(_local_defaults(cores) if is_local(master) else _cluster_defaults()),
        **(_LOOPBACK if loopback else {}),
        **ARROW_BATCH_CONF,
        **spark_settings(features),
        **settings,
        **conf,
    }


def _check_same_master(session: Any, master: str) -> None:
    """Refuse the session this process already runs elsewhere (``getOrCreate`` returns it
    whatever master was asked for)."""
    running = session.sparkContext.master
    if running != master:
        raise ConfigError(
            f"this process already runs a Spark session on {running}: it cannot start "
            f"another on {master}"
        )


def _on_loopback(master: str) -> bool:
    """Whether the whole job runs on this machine's loopback: a local master, or a cluster's
    at 127.0.0.1/localhost (the standalone cluster of the tests and benchmarks)."""
    if is_local(master):
        return True
    host = urlsplit(master).hostname or ""
    return host == "localhost" or host.startswith("127.") or host == "::1"


def _python_environment(loopback: bool) -> None:
    """Loopback networking (for a job on this machine only: a cluster elsewhere reaches the
    driver at the address Spark finds, or ``spark.driver.host``), and Python workers that run
    this interpreter (with pyarrow and ticdc_spark), not PATH's: on a cluster the executors
    run it too, so it must exist at the same path on every worker (see docs/pipeline.md, "On
    a cluster"); a variable already set wins."""
    if loopback:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")


def _defaults() -> dict[str, str]:
    """The session settings of a pipeline, local or on a cluster, before the caller's."""
    return {
        "spark.ui.enabled": "false",
        # The driver collects each micro-batch's changelog to apply it; the default 1 GiB
        # heap and result-size cap are too small for batches of a few hundred thousand rows.
        "spark.driver.memory": os.environ.get("TICDC_SPARK_DRIVER_MEMORY", "4g"),
        "spark.driver.maxResultSize": "0",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.streaming.stopGracefullyOnShutdown": "true",
        "spark.python.worker.reuse": "true",
    }


def _local_defaults(cores: int) -> dict[str, str]:
    return {"spark.sql.shuffle.partitions": str(max(2, cores))}


def _cluster_defaults() -> dict[str, str]:
    """A cluster's executors do not inherit the driver's environment: what the Python
    workers need from it is set for them.  Shuffles keep Spark's 200 partitions: adaptive
    execution coalesces them to about the cluster's cores (``parallelismFirst``), which
    this process cannot know before the session starts."""
    return {"spark.executorEnv.PYARROW_IGNORE_TIMEZONE": "1"}


# The driver on loopback: an address the executors of this machine reach, and no other
# machine's traffic.
_LOOPBACK = {"spark.driver.bindAddress": "127.0.0.1", "spark.driver.host": "127.0.0.1"}
