"""The stores Spark itself reads and writes (its part of the checkpoint, the spark engine's
tables), and what a session needs for each: nothing for a local path, Hadoop's S3A connector
for ``s3://`` and ``s3a://`` (the ``s3`` feature of :mod:`ticdc_spark.spark.jars`, configured
from the same settings as everything else: :meth:`StorageOptions.spark_s3a`).

GCS and Azure would need their Hadoop connectors on the session, which it does not load yet:
the job's own files and the embedded engine's tables reach them through object_store, Spark
does not.  Here, below the sinks and Spark's layer, so that both ask the same question; no
pyspark: the checks run before Spark starts.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from ticdc_spark.errors import ConfigError
from ticdc_spark.storage.options import StorageOptions

__all__ = ["checkpoint_features", "s3a_settings", "session_s3a_settings", "table_features"]

# The Spark features a scheme needs; a scheme not here has no connector on the session.
_FEATURES: dict[str, tuple[str, ...]] = {"": (), "file": (), "s3": ("s3",), "s3a": ("s3",)}


def _scheme(uri: str) -> str:
    scheme = urlsplit(uri).scheme.lower()
    return "" if len(scheme) == 1 else scheme  # (C:\ on Windows)


def checkpoint_features(checkpoint: str) -> tuple[str, ...]:
    """The features Spark's part of a checkpoint needs, or a ConfigError for a store Spark
    cannot write to (a URI is never taken as a directory named ``gs:``)."""
    scheme = _scheme(checkpoint)
    if scheme not in _FEATURES:
        raise ConfigError(
            f"--checkpoint on {scheme}:// is not supported yet (Spark keeps its part of the "
            "checkpoint there through a Hadoop connector the session does not load): use "
            "s3:// or a local directory"
        )
    return _FEATURES[scheme]


def table_features(location: str) -> tuple[str, ...]:
    """The features the spark engine's tables at ``location`` (a Delta root, an Iceberg
    warehouse) need, or a ConfigError for a store Spark cannot write to."""
    scheme = _scheme(location)
    if scheme not in _FEATURES:
        raise ConfigError(
            f"the spark engine does not write tables to {scheme}:// yet (Spark would write "
            "them through a Hadoop connector its session does not load): tables on s3:// "
            "or a local path, or --engine embedded for this store"
        )
    return _FEATURES[scheme]


def s3a_settings(features: Iterable[str], storage: StorageOptions) -> dict[str, str]:
    """The session settings S3A takes from ``storage`` when ``features`` load it."""
    return storage.spark_s3a() if "s3" in features else {}


def session_s3a_settings(spark: Any, location: str, storage: StorageOptions) -> dict[str, str]:
    """The S3A settings a new session of ``spark`` (a SparkSession) sets at runtime to reach
    ``location`` (``fs.s3a.*``, ``fs.s3.impl``: each query's Hadoop configuration is made
    from the session's settings, and ``SparkSession.newSession()`` inherits none of its
    parent's runtime ones), but none the application was started with: a session from
    ``pipeline_session`` has them already, and a user's ``--spark-conf
    spark.hadoop.fs.s3a.*`` wins."""
    settings = s3a_settings(table_features(location), storage)
    started = spark.sparkContext.getConf() if settings else None
    return {
        key.removeprefix("spark.hadoop."): value
        for key, value in settings.items()
        if started is not None and not started.contains(key)
    }
