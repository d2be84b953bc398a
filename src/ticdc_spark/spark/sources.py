"""The pipeline's sources: Kafka (``kafka://``) or a capture directory, as Spark reads them.

Both are Spark data sources of ours with the columns and options of Spark's Kafka source
(:mod:`ticdc_spark.spark.kafka`, :mod:`ticdc_spark.spark.capture_source`); each micro-batch
is bounded (:func:`bounded_source_options`), since the driver collects it to apply it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ticdc_spark.errors import ConfigError
from ticdc_spark.io.kafka import SECRET_KEY_PATTERN, is_kafka_uri, parse_kafka_uri, redact

__all__ = [
    "DEFAULT_CHANGES_PER_BATCH",
    "DEFAULT_MAX_BYTES_PER_TRIGGER",
    "bounded_source_options",
    "kafka_options",
    "read_source",
    "source_partitions",
]

# The bound per micro-batch ``run`` (``ticdc-spark replicate``) gives its source unless the
# source options set one.  Each micro-batch's changelog is collected to the driver to be
# applied, so without a bound a job started on a backlog collects all of it at once (a
# 2M-message Canal-JSON capture: one micro-batch of 2,000,000 rows, ~8.5 GB resident).  About
# this many changes: maxOffsetsPerTrigger counts Kafka records, and a record carries one
# change (Canal-JSON) or up to TiCDC's default max-batch-size, 16 (Open Protocol).
DEFAULT_CHANGES_PER_BATCH = 100_000
_CHANGES_PER_RECORD = {"open-protocol": 16}
# For a capture directory also its bytes (Spark's file sources name it maxBytesPerTrigger):
# records of large messages (up to TiCDC's max-message-bytes, 10 MiB by default).  Spark's
# Kafka source has no byte bound, and neither has ours: Kafka offsets carry no sizes.
DEFAULT_MAX_BYTES_PER_TRIGGER = 256 * 2**20


def read_source(
    spark: Any,
    source: str,
    options: Mapping[str, str] | None = None,
    checkpoint: str | None = None,
    kafka_source: str = "ticdc",
) -> Any:
    """A streaming DataFrame with Spark's Kafka-source columns for a source spec.  With a
    ``checkpoint`` (the pipeline's), a Kafka source keeps the initial offsets it resolved
    there, so a restart re-running batch 0 starts where the first run did.  A ``kafka://``
    source is read by ours, or with ``kafka_source="spark"`` by Spark's own."""
    options = dict(options or {})
    if is_kafka_uri(source) and kafka_source != "ticdc":
        from ticdc_spark.spark.spark_kafka import read_spark_kafka

        _mask_secret_options(spark)
        return read_spark_kafka(spark, kafka_options(source, options), kafka_source)
    if is_kafka_uri(source):
        if checkpoint is not None and not any(k.lower() == "initialoffsetspath" for k in options):
            options["initialOffsetsPath"] = str(Path(checkpoint) / "kafka-initial-offsets.json")
        from ticdc_spark.spark.kafka.source import register

        register(spark)
        _mask_secret_options(spark)
        reader = spark.readStream.format("ticdc-kafka")
        for key, value in kafka_options(source, options).items():
            reader = reader.option(key, value)
        return reader.load()
    path = Path(source)
    if not path.is_dir():
        raise ConfigError(
            f"source {redact(source)!r} is neither kafka://... nor a capture directory"
        )
    from ticdc_spark.spark.capture_source import register as register_capture

    register_capture(spark)
    reader = spark.readStream.format("ticdc-capture").option("path", str(path))
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _mask_secret_options(spark: Any) -> None:
    """Have Spark mask in query plans (``explain``) the option values :func:`redact` masks:
    Spark's own patterns miss e.g. ``kafka.ssl.key.pem`` and ``kafka.sasl.username``."""
    name, ours = "spark.sql.redaction.options.regex", f"(?i:{SECRET_KEY_PATTERN})"
    current = spark.conf.get(name)
    if ours not in current:
        spark.conf.set(name, f"{current}|{ours}" if current else ours)


def kafka_options(source: str, options: Mapping[str, str]) -> dict[str, str]:
    """The ticdc-kafka source options of a kafka:// source spec and --source-option values."""
    servers, topics, extra = parse_kafka_uri(source)
    options = dict(options)
    return {
        "kafka.bootstrap.servers": servers,
        "subscribe": ",".join(topics),
        "startingOffsets": options.pop("startingOffsets", "earliest"),
        **extra,
        **options,
    }


def bounded_source_options(
    source: str, protocol: str, options: Mapping[str, str]
) -> dict[str, str]:
    """``options`` with the default bound per micro-batch where they set none (Spark's option
    names, compared ignoring case): ``maxOffsetsPerTrigger`` of about
    :data:`DEFAULT_CHANGES_PER_BATCH` changes, and for a capture directory
    ``maxBytesPerTrigger`` :data:`DEFAULT_MAX_BYTES_PER_TRIGGER`.  Under ``--trigger once``
    (Spark's Trigger.AvailableNow) the backlog is applied in as many bounded micro-batches
    as it takes.  Set a larger value to lift a bound."""
    out = dict(options)
    given = {k.lower(): v for k, v in options.items()}
    if "maxoffsetspertrigger" not in given:
        records = max(1, DEFAULT_CHANGES_PER_BATCH // _CHANGES_PER_RECORD.get(protocol, 1))
        least = given.get("minoffsetspertrigger", "").strip()
        if least.isdigit():  # Spark refuses a minimum above the maximum
            records = max(records, int(least))
        out["maxOffsetsPerTrigger"] = str(records)
    if not is_kafka_uri(source) and "maxbytespertrigger" not in given:
        out["maxBytesPerTrigger"] = str(DEFAULT_MAX_BYTES_PER_TRIGGER)
    return out


def source_partitions(source: str, options: Mapping[str, str]) -> tuple[str, ...]:
    """The ``topic/partition`` names a source reads: as the broker lists them now, or for a
    capture directory as its records name them now.  Consistent mode waits for a watermark
    from each of them: a partition that has sent nothing yet (or whose records come later
    in the directory than a micro-batch reaches) must hold back the others' rows too."""
    if not is_kafka_uri(source):
        if not Path(source).is_dir():
            return ()
        from ticdc_spark.spark.capture_source import capture_partitions

        return tuple(f"{t}/{p}" for t, p in capture_partitions(source))
    from ticdc_spark.spark.kafka.source import topic_partitions

    return tuple(f"{t}/{p}" for t, p in topic_partitions(kafka_options(source, options)))
