"""The columns of Spark's built-in Kafka source, and the source class, shared by our sources.

Keeping exactly these columns means everything downstream (``decode``) takes our sources and
Spark's own ``kafka`` source alike.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader

__all__ = [
    "KAFKA_COLUMNS",
    "KafkaColumnsSource",
    "arrow_kafka_schema",
    "empty_columns",
    "record_batch",
    "spark_kafka_schema",
]

KAFKA_COLUMNS = (
    "key",
    "value",
    "topic",
    "partition",
    "offset",
    "timestamp",
    "timestampType",
    "headers",
)

SPARK_KAFKA_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int, headers array<struct<key:string,value:binary>>"
)


class KafkaColumnsSource(DataSource):
    """A Spark source with the columns of Spark's Kafka source, batch and streaming.

    A subclass gives its ``source_name``, its ``readers`` (the batch and the stream reader
    class, each made from a config) and ``config()``: its options, checked on the driver."""

    source_name: ClassVar[str]
    readers: ClassVar[
        tuple[Callable[[Any], DataSourceReader], Callable[[Any], DataSourceStreamReader]]
    ]

    @classmethod
    def name(cls) -> str:
        return cls.source_name

    def config(self) -> Any:
        raise NotImplementedError

    def schema(self) -> str:
        return spark_kafka_schema()

    def reader(self, schema: Any) -> DataSourceReader:
        return self.readers[0](self.config())

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return self.readers[1](self.config())


def empty_columns() -> dict[str, list[Any]]:
    """Column lists to fill record by record, then turn into a batch with record_batch."""
    return {name: [] for name in KAFKA_COLUMNS}


def spark_kafka_schema(include_headers: bool = True) -> str:
    """The columns as Spark DDL; without ``headers`` as Spark's source with
    includeHeaders=false."""
    if include_headers:
        return SPARK_KAFKA_SCHEMA
    return SPARK_KAFKA_SCHEMA[: SPARK_KAFKA_SCHEMA.index(", headers")]


def arrow_kafka_schema(include_headers: bool = True) -> Any:
    import pyarrow as pa

    header = pa.struct([("key", pa.string()), ("value", pa.binary())])
    schema = pa.schema(
        [
            ("key", pa.binary()),
            ("value", pa.binary()),
            ("topic", pa.string()),
            ("partition", pa.int32()),
            ("offset", pa.int64()),
            ("timestamp", pa.timestamp("us", tz="UTC")),
            ("timestampType", pa.int32()),
            ("headers", pa.list_(header)),
        ]
    )
    return schema if include_headers else schema.remove(schema.get_field_index("headers"))


def record_batch(columns: dict[str, list[Any]], include_headers: bool = True) -> Any:
    """An Arrow batch from column lists; timestamps are milliseconds since the epoch."""
    import pyarrow as pa

    schema = arrow_kafka_schema(include_headers)
    millis = pa.array(columns["timestamp"], pa.int64())
    arrays = []
    for field in schema:
        if field.name == "timestamp":
            arrays.append(pa.compute.multiply(millis, 1000).cast(field.type))
        else:
            arrays.append(pa.array(columns[field.name], field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
