"""Table sinks: the plan's steps applied to lakehouse tables, one package per format.

A target is ``SCHEME:LOCATION``; :func:`make_sink` finds the sink class registered under the
scheme and loads its module only then (as pyiceberg's catalog registry does), so that
choosing Delta never imports pyiceberg, nothing imports Spark, and a missing library is one
clear line saying what to install.  A sink imports only the plan's step types
(:mod:`ticdc_spark.pipeline.steps`): how a plan is made is no concern of it.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from typing import Any

from ticdc_spark.errors import ConfigError
from ticdc_spark.io.kafka import redact
from ticdc_spark.pipeline.policy import Engine
from ticdc_spark.sinks.base import TableSink
from ticdc_spark.storage import StorageOptions
from ticdc_spark.storage.hadoop import table_features

__all__ = [
    "SINKS",
    "SPARK_SINKS",
    "SinkEntry",
    "check_target",
    "make_sink",
    "table_root",
    "target_scheme",
]


@dataclass(frozen=True)
class SinkEntry:
    """A sink class by module path, loaded on first use, and the library it needs."""

    target: str  # e.g. "delta:PATH", for messages
    loader: str  # "module:Class"
    library: str  # the module it imports (checked before loading)
    install: str  # what to install when the library is missing

    def load(self) -> type[TableSink]:
        self.check_library()
        module, _, name = self.loader.partition(":")
        sink: type[TableSink] = getattr(importlib.import_module(module), name)
        return sink

    def check_library(self) -> None:
        if importlib.util.find_spec(self.library) is None:
            raise ConfigError(
                f"a {self.target} target needs the {self.library} package, which is not "
                f"installed: pip install {self.install}"
            )


SPARK_EXTRA = "'ticdc-spark[spark]'"
SINKS: dict[str, SinkEntry] = {
    "delta": SinkEntry("delta:PATH", "ticdc_spark.sinks.delta:DeltaSink", "deltalake", SPARK_EXTRA),
    "iceberg": SinkEntry(
        "iceberg:CATALOG_URI#WAREHOUSE",
        "ticdc_spark.sinks.iceberg:IcebergSink",
        "pyiceberg",
        SPARK_EXTRA,
    ),
}


# The Spark engine's sinks (Spark SQL in the executors: sinks/spark/), by the same schemes.
SPARK_SINKS: dict[str, SinkEntry] = {
    "delta": SinkEntry(
        "delta:PATH", "ticdc_spark.sinks.spark.delta:SparkDeltaSink", "pyspark", SPARK_EXTRA
    ),
    "iceberg": SinkEntry(
        "iceberg:CATALOG_URI#WAREHOUSE",
        "ticdc_spark.sinks.spark.iceberg:SparkIcebergSink",
        "pyspark",
        SPARK_EXTRA,
    ),
}


def make_sink(
    target: str,
    app_id: str = "ticdc-spark",
    engine: str = Engine.EMBEDDED,
    spark: Any = None,
    storage: StorageOptions | None = None,
) -> TableSink:
    """The sink of a target spec: ``delta:PATH`` or ``iceberg:CATALOG_URI#WAREHOUSE`` (PATH
    and WAREHOUSE local or an object store's URI, configured by ``storage``: by default the
    environment's).  ``app_id`` is the pipeline's id, under which a sink records the steps
    it applied; the Spark engine's sinks apply through ``spark`` (a SparkSession with the
    format's jars, and S3A's for tables on ``s3://``: :func:`ticdc_spark.spark.jars.
    engine_features`)."""
    scheme, location = target_scheme(target)
    if Engine.parse(engine) == Engine.EMBEDDED:
        return SINKS[scheme].load().from_target(location, app_id, storage)
    table_features(table_root(target))
    if spark is None:
        raise ConfigError("the spark engine's sinks need a SparkSession")
    entry = SPARK_SINKS[scheme].load()
    sink: TableSink = entry.from_spark(spark, location, app_id, storage)  # type: ignore[attr-defined]
    return sink


def check_target(target: str, engine: str = Engine.EMBEDDED) -> None:
    """Refuse a target spec :func:`make_sink` would refuse (an unknown scheme, a library
    missing, a store the spark engine's session has no connector for), without loading its
    sink or touching the target."""
    scheme, _ = target_scheme(target)
    if Engine.parse(engine) == Engine.EMBEDDED:
        SINKS[scheme].check_library()
    else:
        table_features(table_root(target))


def table_root(target: str) -> str:
    """Where a target's tables live: a Delta root, an Iceberg warehouse (a path or a URI)."""
    return target.partition(":")[2].rpartition("#")[2]


def target_scheme(target: str) -> tuple[str, str]:
    """A target's scheme (``delta`` or ``iceberg``) and location, or a ConfigError saying
    what a target looks like."""
    scheme, sep, location = target.partition(":")
    if scheme.lower() not in SINKS or not sep or not location:
        valid = " or ".join(e.target for e in SINKS.values())
        raise ConfigError(f"unknown target {redact(target)!r}: use {valid}")
    return scheme.lower(), location
