"""The Spark-native apply engine's sinks: steps merged by Spark SQL in the executors (Delta
with deletion vectors, Iceberg in merge-on-read mode), schema changes as metadata, live
tables.  See :mod:`.base`."""

from ticdc_spark.sinks.spark.base import SparkTableSink
from ticdc_spark.sinks.spark.delta import SparkDeltaSink
from ticdc_spark.sinks.spark.iceberg import SparkIcebergSink

__all__ = ["SparkDeltaSink", "SparkIcebergSink", "SparkTableSink"]
