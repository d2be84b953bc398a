"""The decode stage: Kafka records in, the changelog out, with ``mapInArrow``.

``decode(df, protocol, options)`` accepts any DataFrame with the columns of Spark's Kafka
source (``key``, ``value``, ``topic``, ``partition``, ``offset``): ours (``ticdc-kafka``),
the capture-directory source, or Spark's built-in ``kafka`` source on a cluster that has it.
It works on whole Arrow batches: one decoder per task, no per-row UDF.  Messages that fail
to decode become ERROR rows (the dead letters) rather than failing the job, unless
``on_error="fail"``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from ticdc_spark.changelog import ERROR, ChangelogBuilder, arrow_schema
from ticdc_spark.codec import Message, get_codec, make_decoder
from ticdc_spark.errors import ConfigError, DecodeError

__all__ = ["changes", "dead_letters", "decode", "decode_batches"]

SOURCE_COLUMNS = ("key", "value", "topic", "partition", "offset")
OUTPUT_ROWS = 8192


def decode(
    df: Any,
    protocol: str,
    options: Mapping[str, Any] | None = None,
    *,
    on_error: str = "dead-letter",
) -> Any:
    """The changelog DataFrame of a Kafka-shaped DataFrame (see :mod:`ticdc_spark.changelog`)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    if on_error not in ("dead-letter", "fail"):
        raise ConfigError(f"on_error must be dead-letter or fail, not {on_error!r}")
    options = dict(options or {})
    get_codec(protocol).parse_options(options)  # fail fast on the driver, with a clear error
    missing = [c for c in SOURCE_COLUMNS if c not in df.columns]
    if missing:
        raise ConfigError(f"the source DataFrame lacks Kafka columns: {', '.join(missing)}")
    fail = on_error == "fail"

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        return decode_batches(batches, protocol, options, fail=fail)

    return df.select(*SOURCE_COLUMNS).mapInArrow(run, from_arrow_schema(arrow_schema()))


def decode_batches(
    batches: Iterator[Any], protocol: str, options: Mapping[str, Any], *, fail: bool = False
) -> Iterator[Any]:
    """Decode Arrow batches of Kafka records into changelog batches (runs in the tasks)."""
    decoder = make_decoder(protocol, options)
    fast = getattr(decoder, "decode_changelog", None)
    builder = ChangelogBuilder()
    for batch in batches:
        keys = batch.column("key").to_pylist()
        values = batch.column("value").to_pylist()
        topics = batch.column("topic").to_pylist()
        partitions = batch.column("partition").to_pylist()
        offsets = batch.column("offset").to_pylist()
        for key, value, topic, partition, offset in zip(
            keys, values, topics, partitions, offsets, strict=True
        ):
            message = Message(key, value, topic=topic or "", partition=partition, offset=offset)
            try:
                if fast is not None:
                    fast(message, builder)
                else:
                    builder.add_events(
                        decoder.decode(message), topic or "", partition or 0, offset or 0
                    )
            except DecodeError as exc:
                if fail:
                    raise
                builder.add_error(str(exc), topic or "", partition or 0, offset or 0, key, value)
        if len(builder) >= OUTPUT_ROWS:
            yield builder.to_batch()
    if len(builder):
        yield builder.to_batch()


def changes(changelog: Any) -> Any:
    """The changelog without dead letters."""
    from pyspark.sql import functions as F

    return changelog.where(F.col("kind") != ERROR)


def dead_letters(changelog: Any) -> Any:
    """The messages that failed to decode: topic, partition, offset, error, key, value."""
    from pyspark.sql import functions as F

    return changelog.where(F.col("kind") == ERROR).select(
        "topic", "partition", "offset", "error", "key", "value"
    )
