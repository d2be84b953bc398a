"""``ticdc-kafka``: Kafka as a Spark source (batch and streaming) on confluent-kafka.

    spark.readStream.format("ticdc-kafka")
        .option("kafka.bootstrap.servers", "host:9092").option("subscribe", "cdc_test")
        .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", 100000)
        .load()

Columns and options are those of Spark's built-in Kafka source, so on a cluster that has the
built-in source, ``format("kafka")`` can take its place: what Spark refuses is refused with
its reason, what is not implemented here is refused too, never ignored (docs/kafka-source.md
has the table of every option).  Built here because Spark's own connector jar is not always
available (Python-only environments); offsets are plain dicts ``{topic: {partition:
offset}}`` that Spark keeps in the query's checkpoint.  One Spark partition reads one Kafka
partition's offset range, yielding Arrow batches.  Data loss (partitions gone, offsets gone
backwards, deleted records) is reported as Spark reports it: ``failOnDataLoss``.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from ticdc_spark.errors import ConfigError, TiCDCSparkError
from ticdc_spark.io.kafka import client_config, redact
from ticdc_spark.spark.kafka_schema import (
    KafkaColumnsSource,
    empty_columns,
    record_batch,
    spark_kafka_schema,
)

__all__ = ["KafkaDataSource", "register"]

log = logging.getLogger(__name__)

T = TypeVar("T")
Offsets = dict[str, dict[str, int]]  # topic -> partition (as text, JSON keys) -> offset
EARLIEST, LATEST = -2, -1
_INTERNAL_TOPICS = frozenset(("__consumer_offsets", "__transaction_state"))
BATCH_ROWS = 10_000


def register(spark: Any) -> None:
    spark.dataSource.register(KafkaDataSource)


# Kafka client settings Spark's Kafka source refuses, with its reasons.
_REFUSED_CLIENT_SETTINGS = {
    "auto.offset.reset": "set the source option startingOffsets to earliest or latest "
    "instead: the source tracks offsets itself, and a resuming query starts where it left off",
    "key.deserializer": "keys are returned as bytes; deserialize them with DataFrame operations",
    "value.deserializer": "values are returned as bytes; deserialize them with DataFrame "
    "operations",
    "enable.auto.commit": "the source keeps its offsets in the query's checkpoint",
    "interceptor.classes": "interceptors could change the records",
}
# The offset options in Spark's order of preference: a time for every partition, a time per
# partition, then offsets (KafkaSourceProvider.getKafkaOffsetRangeLimit).
_STARTING_OPTIONS = ("startingTimestamp", "startingOffsetsByTimestamp", "startingOffsets")
_ENDING_OPTIONS = ("endingTimestamp", "endingOffsetsByTimestamp", "endingOffsets")
# Streaming-only options: Spark ignores them in batch queries with a warning, as here.
_STREAM_ONLY = ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay")


def _check_options(lowered: Mapping[str, str], mode: str) -> None:
    """Refuse what Spark's Kafka source refuses (with its reasons), and what this source
    does not implement; ``mode`` is "batch", "stream" or "any" (no query yet)."""
    for setting, reason in _REFUSED_CLIENT_SETTINGS.items():
        if f"kafka.{setting}" in lowered:
            raise ConfigError(f"Kafka option '{setting}' is not supported: {reason}")
    if "maxbytespertrigger" in lowered:
        raise ConfigError(
            "the Kafka source has no option maxBytesPerTrigger (Spark's has none either: Kafka "
            "offsets carry no sizes); bound micro-batches with maxOffsetsPerTrigger"
        )
    if lowered.get("includeheaders", "false").strip().lower() not in ("true", "false"):
        raise ConfigError("includeHeaders must be true or false")
    if "minoffsetspertrigger" in lowered and "maxoffsetspertrigger" in lowered:
        least, most = lowered["minoffsetspertrigger"], lowered["maxoffsetspertrigger"]
        if least.strip().isdigit() and most.strip().isdigit() and int(least) > int(most):
            raise ConfigError(
                f"The value of minOffsetPerTrigger({least}) is higher than the "
                f"maxOffsetsPerTrigger({most})."
            )
    if mode == "stream" and "endingoffsets" in lowered:
        raise ConfigError("ending offset not valid in streaming queries")
    if mode == "stream" and ("endingoffsetsbytimestamp" in lowered or "endingtimestamp" in lowered):
        # (Spark refuses endingOffsetsByTimestamp and ignores endingTimestamp: refused too)
        raise ConfigError("ending timestamp not valid in streaming queries")
    if mode == "batch":
        _check_batch_offsets(lowered)
        for name in _STREAM_ONLY:
            if name.lower() in lowered:
                log.warning("%s option ignored in batch queries", name)


def _check_batch_offsets(lowered: Mapping[str, str]) -> None:
    """Batch queries start at no "latest" and end at no "earliest" (an offsets option a
    timestamp option outranks is not read, as in Spark)."""
    if _chosen(lowered, _STARTING_OPTIONS) == "startingOffsets":
        starting = lowered.get("startingoffsets", "earliest").strip()
        if starting.lower() == "latest":
            raise ConfigError("starting offset can't be latest for batch queries on Kafka")
        for topic, partition, offset in _spec_items(starting):
            if offset == LATEST:
                raise ConfigError(
                    f"startingOffsets for {topic}-{partition} can't be latest for batch "
                    "queries on Kafka"
                )
    if _chosen(lowered, _ENDING_OPTIONS) == "endingOffsets":
        ending = lowered.get("endingoffsets", "latest").strip()
        if ending.lower() == "earliest":
            raise ConfigError("ending offset can't be earliest for batch queries on Kafka")
        for topic, partition, offset in _spec_items(ending):
            if offset == EARLIEST:
                raise ConfigError(
                    f"ending offset for {topic}-{partition} can't be earliest for batch "
                    "queries on Kafka"
                )


def _chosen(lowered: Mapping[str, str], options: tuple[str, ...]) -> str:
    """Which of the options (in order of preference) gives the offsets: the first set, else
    the last (offsets, at their default)."""
    return next((o for o in options if o.lower() in lowered), options[-1])


@dataclass(frozen=True)
class _Timestamps:
    """Offsets asked by record time (ms since the epoch): ``every`` partition at one time
    (startingTimestamp / endingTimestamp), or ``each`` its own (starting/
    endingOffsetsByTimestamp, JSON {topic: {partition: time}}).  Each partition starts or
    ends at its earliest offset whose time is at or after the one asked (Kafka's
    offsetsForTimes, the time passed as given)."""

    option: str
    every: int | None = None
    each: Offsets | None = None

    @classmethod
    def parse(cls, lowered: Mapping[str, str], options: tuple[str, ...]) -> _Timestamps | None:
        option = _chosen(lowered, options)
        if option == options[0]:
            text = lowered[option.lower()].strip()
            try:
                return cls(option, every=int(text))
            except ValueError:
                raise ConfigError(f"{option}: expected a single long value, got {text}") from None
        if option == options[1]:
            text = lowered[option.lower()].strip()
            try:
                parsed = json.loads(text)
                each = {t: {str(p): int(o) for p, o in ps.items()} for t, ps in parsed.items()}
            except (ValueError, AttributeError, TypeError):
                raise ConfigError(
                    f"{option} must be JSON {{topic: {{partition: time in ms}}}}, not {text!r}"
                ) from None
            return cls(option, each=each)
        return None

    def time_of(self, topic: str, partition: int) -> int:
        if self.each is None:
            assert self.every is not None
            return self.every
        return self.each[topic][str(partition)]


def _latest_when_no_match(lowered: Mapping[str, str]) -> bool:
    """startingOffsetsByTimestampStrategy: what a starting time no record reaches does:
    ``error`` (the default) fails the query, ``latest`` starts at the end."""
    strategy = lowered.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise ConfigError(
            f"startingOffsetsByTimestampStrategy must be error or latest, not {strategy!r}"
        )
    return strategy == "latest"


def _positive(lowered: Mapping[str, str], name: str) -> int | None:
    text = lowered.get(name.lower())
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise ConfigError(f"{name} must be a positive integer, not {text!r}")
    return value


_DURATION = re.compile(r"\s*(\d+)\s*(us|ms|s|m|min|h|d)?\s*", re.IGNORECASE)
_UNIT_S = {"us": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}


def _duration_s(text: str) -> float:
    """Seconds of a Spark time string (``15m``, ``30s``, ``500ms``; a bare number: ms)."""
    found = _DURATION.fullmatch(text)
    if found is None:
        raise ConfigError(f"maxTriggerDelay must be a duration such as 15m or 30s, not {text!r}")
    return int(found.group(1)) * _UNIT_S[(found.group(2) or "ms").lower()]


def _spec_items(spec: str) -> list[tuple[str, str, int]]:
    if spec.lower() in ("earliest", "latest"):
        return []
    return [(t, p, o) for t, ps in _parse_spec(spec, LATEST).items() for p, o in ps.items()]


@dataclass(frozen=True)
class _Config:
    """The source's options, checked once on the driver."""

    client: dict[str, Any] = field(repr=False)  # credentials: never printed
    subscribe: tuple[str, ...]
    pattern: str | None
    assign: dict[str, list[int]] | None
    starting: str
    ending: str
    max_offsets: int
    fail_on_data_loss: bool
    poll_timeout_s: float
    initial_offsets_path: str | None = None
    starting_times: _Timestamps | None = None  # outranks ``starting``
    ending_times: _Timestamps | None = None  # outranks ``ending``
    latest_when_no_match: bool = False  # startingOffsetsByTimestampStrategy=latest
    include_headers: bool = False
    group_prefix: str = "spark-kafka-source"
    min_offsets: int | None = None
    max_trigger_delay_s: float = 900.0
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    fetch_attempts: int = 3
    fetch_interval_s: float = 1.0
    query_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    def consumer_config(self, role: str) -> dict[str, Any]:
        """librdkafka settings of the ``role`` ("driver" or "executor") consumers, as Spark
        sets its consumers': the user's ``kafka.group.id`` as given, else
        ``groupIdPrefix-<query uuid>-<role>``; ``isolation.level`` read_uncommitted unless
        set (librdkafka's default is read_committed); no offset commits."""
        settings = {**self.client, "enable.auto.commit": False}
        settings.setdefault("group.id", f"{self.group_prefix}-{self.query_id}-{role}")
        settings.setdefault("isolation.level", "read_uncommitted")
        return settings

    @classmethod
    def parse(cls, options: Mapping[str, str], mode: str = "any") -> _Config:
        lowered = {k.lower(): v for k, v in options.items()}
        _check_options(lowered, mode)
        client = client_config({k: v for k, v in options.items() if k.startswith("kafka.")})
        if "bootstrap.servers" not in client:
            raise ConfigError("the ticdc-kafka source needs option kafka.bootstrap.servers")
        chosen = [k for k in ("subscribe", "subscribepattern", "assign") if lowered.get(k)]
        if len(chosen) != 1:
            raise ConfigError("give exactly one of subscribe, subscribePattern or assign")
        assign = json.loads(lowered["assign"]) if lowered.get("assign") else None
        return cls(
            client=client,
            subscribe=tuple(
                t.strip() for t in lowered.get("subscribe", "").split(",") if t.strip()
            ),
            pattern=lowered.get("subscribepattern"),
            assign={t: [int(p) for p in ps] for t, ps in assign.items()} if assign else None,
            starting=lowered.get("startingoffsets", "earliest" if mode == "batch" else "latest"),
            ending=lowered.get("endingoffsets", "latest"),
            max_offsets=int(lowered.get("maxoffsetspertrigger", "0") or 0),
            fail_on_data_loss=lowered.get("failondataloss", "true").lower() != "false",
            poll_timeout_s=int(lowered.get("kafkaconsumer.polltimeoutms", "120000")) / 1000,
            initial_offsets_path=lowered.get("initialoffsetspath") or None,
            starting_times=_Timestamps.parse(lowered, _STARTING_OPTIONS),
            ending_times=_Timestamps.parse(lowered, _ENDING_OPTIONS),
            latest_when_no_match=_latest_when_no_match(lowered),
            include_headers=_include_headers(options),
            min_offsets=_positive(lowered, "minOffsetsPerTrigger"),
            max_trigger_delay_s=_duration_s(lowered.get("maxtriggerdelay", "15m")),
            min_partitions=_positive(lowered, "minPartitions"),
            max_records_per_partition=_positive(lowered, "maxRecordsPerPartition"),
            fetch_attempts=max(1, int(lowered.get("fetchoffset.numretries", "3"))),
            fetch_interval_s=int(lowered.get("fetchoffset.retryintervalms", "1000")) / 1000,
            group_prefix=lowered.get("groupidprefix")
            or ("spark-kafka-relation" if mode == "batch" else "spark-kafka-source"),
        )


def _include_headers(options: Mapping[str, str]) -> bool:
    lowered = {k.lower(): v for k, v in options.items()}
    return lowered.get("includeheaders", "false").strip().lower() == "true"


def topic_partitions(options: Mapping[str, str]) -> list[tuple[str, int]]:
    """The (topic, partition) pairs a source with these options reads, from the broker."""
    metadata = _Metadata(_Config.parse(options))
    try:
        return metadata.partitions()
    finally:
        metadata.close()


# --------------------------------------------------------------------------------------------
# Metadata (driver side).


class _Metadata:
    """Topic partitions and their low/high watermarks."""

    def __init__(self, config: _Config) -> None:
        from confluent_kafka import Consumer

        self.config = config
        self.consumer = Consumer(config.consumer_config("driver"))

    def close(self) -> None:
        self.consumer.close()

    def _retrying(self, fetch: Callable[[], T]) -> T:
        """``fetch``, tried up to fetchOffset.numRetries times fetchOffset.retryIntervalMs
        apart, as Spark's offset reader retries its admin calls."""
        attempt = 1
        while True:
            try:
                return fetch()
            except Exception as exc:
                if attempt >= self.config.fetch_attempts:
                    raise
                log.warning("attempt %d of fetching Kafka offsets failed: %s", attempt, exc)
                attempt += 1
                time.sleep(self.config.fetch_interval_s)

    def partitions(self) -> list[tuple[str, int]]:
        """The source's partitions that exist now (assigned ones too: one that is gone is
        left out, for the planner to report)."""
        try:
            topics = self._retrying(
                lambda: self.consumer.list_topics(timeout=self.config.poll_timeout_s).topics
            )
        except Exception as exc:
            raise TiCDCSparkError(
                f"cannot list Kafka topics ({exc}); client config {redact(self.config.client)}"
            ) from None
        if self.config.assign is not None:
            return sorted(
                (t, p)
                for t, ps in self.config.assign.items()
                for p in ps
                if t in topics and p in topics[t].partitions
            )
        if self.config.pattern is not None:
            # Spark 4 searches each topic's name (Regex.findFirstIn) among the topics the
            # admin client lists, which leaves Kafka's internal topics out
            pattern = re.compile(self.config.pattern)
            names = [t for t in topics if t not in _INTERNAL_TOPICS and pattern.search(t)]
        else:
            names = [t for t in self.config.subscribe if t in topics]
        return sorted((t, p) for t in names for p in topics[t].partitions)

    def bounds(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], tuple[int, int]]:
        from confluent_kafka import TopicPartition

        out = {}
        for topic, partition in partitions:
            part = TopicPartition(topic, partition)
            try:
                low, high = self._retrying(
                    lambda part=part: self.consumer.get_watermark_offsets(  # type: ignore[misc]
                        part, timeout=self.config.poll_timeout_s
                    )
                )
            except Exception as exc:
                raise TiCDCSparkError(
                    f"cannot get the offsets of {topic}-{partition} ({exc}); client config "
                    f"{redact(self.config.client)}"
                ) from None
            out[(topic, partition)] = (int(low), int(high))
        return out

    def starting(
        self, default: int, bounds: dict[tuple[str, int], tuple[int, int]] | None = None
    ) -> Offsets:
        """The offsets the source starts at: by time when a timestamp option is set, else
        by startingOffsets (``default`` when it is not set)."""
        times = self.config.starting_times
        if times is None:
            return self.resolve(self.config.starting, default, bounds)
        return self.at_times(times, bounds, fail_on_no_match=not self.config.latest_when_no_match)

    def ending(self, bounds: dict[tuple[str, int], tuple[int, int]]) -> Offsets:
        """The offsets a batch query ends at: by time (the end of a partition no record's
        time reaches), else by endingOffsets."""
        times = self.config.ending_times
        if times is None:
            return self.resolve(self.config.ending, LATEST, bounds, "endingOffsets")
        return self.at_times(times, bounds, fail_on_no_match=False)

    def at_times(
        self,
        times: _Timestamps,
        bounds: dict[tuple[str, int], tuple[int, int]] | None,
        fail_on_no_match: bool,
    ) -> Offsets:
        """The earliest offset of each partition whose record time is at or after the time
        asked (the broker's ListOffsets by timestamp); a partition no record's time reaches
        fails the query with ``fail_on_no_match``, else takes its end offset.  A per-partition
        JSON must name exactly the source's partitions, as Spark requires."""
        from confluent_kafka import TopicPartition

        if bounds is None:
            bounds = self.bounds(self.partitions())
        parts = sorted(bounds)
        if times.each is not None:
            named = sorted((t, int(p)) for t, ps in times.each.items() for p in ps)
            if named != parts:
                raise ConfigError(
                    f"if {times.option} contains specific offsets, it must name every partition "
                    f"of the source; named: {[f'{t}-{p}' for t, p in named]}, the source's: "
                    f"{[f'{t}-{p}' for t, p in parts]}"
                )
        asked = [TopicPartition(t, p, times.time_of(t, p)) for t, p in parts]
        try:
            answers = self._retrying(
                lambda: self.consumer.offsets_for_times(asked, timeout=self.config.poll_timeout_s)
            )
        except Exception as exc:
            raise TiCDCSparkError(
                f"cannot look up offsets by time for {times.option} ({exc}); client config "
                f"{redact(self.config.client)}"
            ) from None
        found = {}
        for answer in answers:
            if answer.error is not None:
                raise TiCDCSparkError(
                    f"cannot look up the offset of {answer.topic}-{answer.partition} at time "
                    f"{times.time_of(answer.topic, answer.partition)} ({times.option}): "
                    f"{answer.error}"
                )
            found[(answer.topic, answer.partition)] = int(answer.offset)
        return offsets_at_times(found, times, bounds, fail_on_no_match)

    def resolve(
        self,
        spec: str,
        default: int,
        bounds: dict[tuple[str, int], tuple[int, int]] | None = None,
        option: str = "startingOffsets",
    ) -> Offsets:
        """Offsets for "earliest", "latest" or a JSON spec (-2 earliest, -1 latest), of the
        partitions of ``bounds`` (default: the source's partitions now).  A JSON spec must
        name exactly those partitions, as Spark requires."""
        if bounds is None:
            bounds = self.bounds(self.partitions())
        parts = sorted(bounds)
        wanted = _parse_spec(spec, default)
        if "*" not in wanted:
            named = sorted((t, int(p)) for t, ps in wanted.items() for p in ps)
            if named != parts:
                raise ConfigError(
                    f"if {option} contains specific offsets, it must name every partition of "
                    "the source (-1 for latest, -2 for earliest); named: "
                    f"{[f'{t}-{p}' for t, p in named]}, the source's: "
                    f"{[f'{t}-{p}' for t, p in parts]}"
                )
        offsets: Offsets = {}
        for topic, partition in parts:
            low, high = bounds[(topic, partition)]
            asked = wanted.get(topic, {}).get(
                str(partition), wanted.get("*", {}).get("*", EARLIEST)
            )
            value = low if asked == EARLIEST else high if asked == LATEST else asked
            offsets.setdefault(topic, {})[str(partition)] = value
        return offsets


def offsets_at_times(
    found: Mapping[tuple[str, int], int],
    times: _Timestamps,
    bounds: Mapping[tuple[str, int], tuple[int, int]],
    fail_on_no_match: bool,
) -> Offsets:
    """The offsets of the broker's answers to a look-up by time (``found``: negative where
    no record's time reaches the time asked), as Spark's fetchSpecificTimestampBasedOffsets
    takes them: no match fails the query with ``fail_on_no_match``, else is the partition's
    end offset (its latest)."""
    offsets: Offsets = {}
    for topic, partition in sorted(bounds):
        offset = found.get((topic, partition), -1)
        if offset < 0:
            if fail_on_no_match:
                raise TiCDCSparkError(
                    f"No offset matched from request of topic-partition {topic}-{partition} "
                    f"and timestamp {times.time_of(topic, partition)} ({times.option}): no "
                    "record of the partition is that recent. Set the source option "
                    "startingOffsetsByTimestampStrategy to latest to start such partitions "
                    "at their end."
                )
            offset = bounds[(topic, partition)][1]
        offsets.setdefault(topic, {})[str(partition)] = offset
    return offsets


def _parse_spec(spec: str, default: int) -> dict[str, dict[str, int]]:
    keyword = spec.strip().lower()
    if keyword in ("earliest", "latest"):
        return {"*": {"*": EARLIEST if keyword == "earliest" else LATEST}}
    try:
        parsed = json.loads(spec)
        return {t: {str(p): int(o) for p, o in ps.items()} for t, ps in parsed.items()}
    except (ValueError, AttributeError, TypeError):
        raise ConfigError(f"offsets must be earliest, latest or JSON, not {spec!r}") from None


def _ranges(start: Offsets, end: Offsets, config: _Config) -> list[InputPartition]:
    """One InputPartition per range to read, split by minPartitions/maxRecordsPerPartition."""
    ranges = [
        (topic, int(partition), start[topic][partition], until)
        for topic, partitions in sorted(end.items())
        for partition, until in sorted(partitions.items(), key=lambda p: int(p[0]))
    ]
    return [
        InputPartition((config, *piece))
        for piece in split_ranges(ranges, config.min_partitions, config.max_records_per_partition)
    ]


Range = tuple[str, int, int, int]  # topic, partition, from offset, until offset


def split_ranges(
    ranges: list[Range], min_partitions: int | None, max_records: int | None
) -> list[Range]:
    """Spark's KafkaOffsetRangeCalculator: empty ranges dropped; ranges over
    ``maxRecordsPerPartition`` offsets cut into near-equal pieces of at most that many; then,
    with fewer pieces than ``minPartitions``, the large ranges cut in proportion to their
    size (a range whose share rounds to one part is kept whole, out of the proportion)."""
    ranges = [r for r in ranges if r[3] > r[2]]
    if max_records:
        ranges = [p for r in ranges for p in _pieces(r, -(-(r[3] - r[2]) // max_records))]
    if not min_partitions or len(ranges) >= min_partitions:
        return ranges
    total = sum(r[3] - r[2] for r in ranges)
    whole = [r for r in ranges if _part_count(r[3] - r[2], total, min_partitions) == 1]
    split_total = total - sum(r[3] - r[2] for r in whole)
    split_among = max(min_partitions - len(whole), 1)
    out = []
    for r in ranges:
        count = 1 if r in whole else _part_count(r[3] - r[2], split_total, split_among)
        out += _pieces(r, count)
    return out


def _part_count(size: int, total: int, among: int) -> int:
    return max(math.floor(size / total * among + 0.5), 1)  # Scala's math.round: half up


def _pieces(range_: Range, parts: int) -> list[Range]:
    """``range_`` cut into ``parts`` near-equal pieces, the last taking the rounding."""
    topic, partition, begin, until = range_
    out, remaining = [], until - begin
    for part in range(parts):
        size = remaining // (parts - part)
        remaining -= size
        out.append((topic, partition, begin, begin + size))
        begin += size
    return [piece for piece in out if piece[3] > piece[2]]


# --------------------------------------------------------------------------------------------
# Readers.


class _BatchReader(DataSourceReader):
    def __init__(self, config: _Config) -> None:
        self.config = config

    def partitions(self) -> list[InputPartition]:
        metadata = _Metadata(self.config)
        try:
            parts = metadata.partitions()
            if self.config.assign is not None:
                missing = sorted(
                    f"{t}-{p}"
                    for t, ps in self.config.assign.items()
                    for p in ps
                    if (t, p) not in parts
                )
                if missing:
                    raise TiCDCSparkError(f"assigned partitions do not exist: {missing}")
            bounds = metadata.bounds(parts)
            start = metadata.starting(EARLIEST, bounds)
            end = metadata.ending(bounds)
        finally:
            metadata.close()
        for topic, partitions in sorted(end.items()):
            for partition, until in sorted(partitions.items()):
                if start[topic][partition] > until:  # (Spark's KafkaBatchPartitionReader)
                    raise TiCDCSparkError(
                        f"Beginning offset {start[topic][partition]} is after the ending offset "
                        f"{until} for topic {topic} partition {partition}. You either provided "
                        "an invalid fromOffset, or the Kafka topic has been damaged"
                    )
        return _ranges(start, end, self.config)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read_partition(partition)


class _StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, config: _Config) -> None:
        self.config = config
        self.target: Offsets | None = None
        self.initial: Offsets | None = None
        self.last_trigger = 0.0  # when the last batch was let through (minOffsetsPerTrigger)

    def initialOffset(self) -> Offsets:
        """The offsets of ``startingOffsets`` resolved once, as Spark's Kafka source fixes
        them: Spark asks again when it re-runs batch 0 (a restart after a failed first
        batch), and "latest" asked again would skip what arrived in between.  Kept for the
        reader's life, and in ``initialOffsetsPath`` across restarts when that is set (Spark
        keeps them in the query's checkpoint, which a Python source is not told)."""
        if self.initial is None:
            self.initial = _load_offsets(self.config.initial_offsets_path)
        if self.initial is None:
            metadata = _Metadata(self.config)
            try:
                self.initial = metadata.starting(LATEST)
            finally:
                metadata.close()
            _store_offsets(self.config.initial_offsets_path, self.initial)
        return {topic: dict(partitions) for topic, partitions in self.initial.items()}

    def getDefaultReadLimit(self) -> ReadLimit:
        # PySpark has no composite limit: with both options, latestOffset applies
        # minOffsetsPerTrigger from the configuration
        if self.config.max_offsets > 0:
            return ReadMaxRows(self.config.max_offsets)
        if self.config.min_offsets:
            return ReadMinRows(self.config.min_offsets)
        return ReadAllAvailable()

    def latestOffset(self, start: Offsets, limit: ReadLimit) -> Offsets:
        """The broker's end offsets as they are, lower than ``start`` if a topic was
        re-created, without the partitions that are gone (:meth:`partitions` reports both,
        as Spark does).  Unless all available is asked for (Trigger.AvailableNow):
        ``start`` again (no batch) while fewer than minOffsetsPerTrigger records wait and
        maxTriggerDelay has not passed since the last batch (not under AvailableNow), and
        at most
        maxOffsetsPerTrigger records, as Spark's KafkaMicroBatchStream."""
        latest = self.target or self._latest()
        end = {t: dict(ps) for t, ps in latest.items()}
        if isinstance(limit, ReadAllAvailable):
            return end
        if self.config.min_offsets and self.target is None and self._delay(start, end):
            # (not under Trigger.AvailableNow, which must finish: PySpark's ReadMinRows note)
            return {t: dict(ps) for t, ps in start.items()}
        most = limit.max_rows if isinstance(limit, ReadMaxRows) else self.config.max_offsets
        if most > 0:
            end = _limit(_with_new_partitions(start, end, self.config), end, most)
        return end

    def _delay(self, start: Offsets, end: Offsets) -> bool:
        """Whether to wait for more records (Spark's delayBatch)."""
        now = time.time()
        if now - self.last_trigger >= self.config.max_trigger_delay_s:
            self.last_trigger = now
            return False
        waiting = sum(
            o - start.get(t, {}).get(p, 0) for t, ps in end.items() for p, o in ps.items()
        )
        if waiting < (self.config.min_offsets or 0):
            return True
        self.last_trigger = now
        return False

    def _latest(self) -> Offsets:
        metadata = _Metadata(self.config)
        try:
            parts = metadata.partitions()
            bounds = metadata.bounds(parts)
        finally:
            metadata.close()
        latest: Offsets = {}
        for (topic, partition), (_low, high) in bounds.items():
            latest.setdefault(topic, {})[str(partition)] = high
        return latest

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = self._latest()

    def partitions(self, start: Offsets, end: Offsets) -> list[InputPartition]:
        """The ranges from ``start`` to ``end``, reporting what Spark's Kafka source reports
        as data loss: partitions gone, partitions added with records already deleted,
        offsets gone backwards (a re-created topic).  With ``failOnDataLoss`` (the default)
        each fails the query; otherwise it is logged and the query goes on from ``end``."""
        for topic, partitions in sorted(start.items()):
            gone = sorted(p for p in partitions if p not in end.get(topic, {}))
            if gone:
                _report_data_loss(
                    self.config,
                    f"partitions {', '.join(f'{topic}-{p}' for p in gone)} are gone "
                    "(deleted topic or partitions): some data may have been missed",
                )
        since = _with_new_partitions(start, end, self.config, report=True)
        for topic, partitions in sorted(end.items()):
            for partition, until in sorted(partitions.items(), key=lambda p: int(p[0])):
                begin = since[topic][partition]
                if until < begin:
                    _report_data_loss(
                        self.config,
                        f"partition {topic}-{partition}'s offset went back from {begin} to "
                        f"{until} (topic re-created?): some data may have been missed",
                    )
        return _ranges(since, end, self.config)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read_partition(partition)

    def commit(self, end: Offsets) -> None:
        """Offsets live in Spark's checkpoint; nothing is committed to Kafka."""


def _with_new_partitions(
    start: Offsets, end: Offsets, config: _Config, report: bool = False
) -> Offsets:
    """``start`` and, for the partitions of ``end`` it lacks (new ones), their earliest
    offsets, as Spark starts a new partition; ``report``: a new partition whose earliest
    offset is not 0 lost records (they were deleted before they could be read)."""
    new = [(t, int(p)) for t, ps in end.items() for p in ps if p not in start.get(t, {})]
    since = {t: dict(ps) for t, ps in start.items()}
    if not new:
        return since
    metadata = _Metadata(config)
    try:
        bounds = metadata.bounds(new)
    finally:
        metadata.close()
    for (topic, partition), (low, _high) in sorted(bounds.items()):
        since.setdefault(topic, {})[str(partition)] = low
        if report and low != 0:
            _report_data_loss(
                config,
                f"added partition {topic}-{partition} starts at offset {low} instead of 0: "
                "some data may have been missed",
            )
    return since


def _report_data_loss(config: _Config, message: str) -> None:
    """Spark's reportDataLoss: fail the query, or with failOnDataLoss=false log and go on."""
    if config.fail_on_data_loss:
        raise TiCDCSparkError(
            f"{message}. Data may have been lost: Kafka deleted it (retention), or a topic "
            "was deleted or re-created. If you want the query to go on regardless, set the "
            "source option failOnDataLoss to false."
        )
    log.warning("%s. The query goes on (failOnDataLoss=false).", message)


def _load_offsets(path: str | None) -> Offsets | None:
    if not path or not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as stored:
            loaded = json.load(stored)
        return {t: {str(p): int(o) for p, o in ps.items()} for t, ps in loaded.items()}
    except (OSError, ValueError, AttributeError, TypeError) as exc:
        raise TiCDCSparkError(f"cannot read the initial offsets in {path}: {exc}") from None


def _store_offsets(path: str | None, offsets: Offsets) -> None:
    if not path:
        return
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    temporary = f"{path}.{uuid.uuid4().hex}.tmp"
    with open(temporary, "w", encoding="utf-8") as out:
        json.dump(offsets, out, sort_keys=True)
        out.flush()
        os.fsync(out.fileno())
    os.replace(temporary, path)


def _limit(start: Offsets, end: Offsets, budget: int) -> Offsets:
    """Spread ``budget`` records over the partitions in proportion to their backlog, at least
    one record for every partition that has any (none is starved)."""
    backlog = {(t, p): o - start[t][p] for t, ps in end.items() for p, o in ps.items()}
    total = sum(v for v in backlog.values() if v > 0)
    if total <= budget:
        return end
    limited: Offsets = {}
    for (topic, partition), waiting in backlog.items():
        if waiting <= 0:  # nothing to read, or gone backwards: partitions() reports that
            limited.setdefault(topic, {})[partition] = end[topic][partition]
            continue
        share = max(1, budget * waiting // total)
        limited.setdefault(topic, {})[partition] = start[topic][partition] + min(waiting, share)
    return limited


def _read_partition(partition: InputPartition | None) -> Iterator[Any]:
    """One planned range; nothing for the ``InputPartition(None)`` Spark hands a batch source
    that planned no range (an empty topic, a pattern matching nothing, a caught-up range)."""
    if partition is None or partition.value is None:
        return iter(())
    return _read_range(*partition.value)


def _read_range(
    config: _Config, topic: str, partition: int, since: int, until: int
) -> Iterator[Any]:
    """The records [since, until) of one partition, as Arrow batches (runs in a task).

    The consumer never resets its offset by itself (``auto.offset.reset`` is ``error``, as
    Spark's readers use ``none``): offsets the broker no longer has are data loss, which
    fails the query, or with ``failOnDataLoss=false`` is logged and skipped, the read going
    on from the earliest offset left (Spark's KafkaDataConsumer).

    A range is finished by the consumer's position, not by its last record: offsets that
    are never delivered (transaction markers; aborted records under read_committed) may end
    it, and the consumer moves past them (at the end of the log it says so with an EOF)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {
            **config.consumer_config("executor"),
            "enable.partition.eof": True,
            "auto.offset.reset": "error",
        }
    )
    consumer.assign([TopicPartition(topic, partition, since)])
    columns = empty_columns()
    position, deadline = since, time.monotonic() + config.poll_timeout_s
    try:
        while position < until:
            batch = consumer.consume(num_messages=min(BATCH_ROWS, until - position), timeout=1)
            if not batch:
                position = max(position, min(_position(consumer, topic, partition), until))
                if position >= until:
                    break
                if time.monotonic() > deadline:
                    raise TiCDCSparkError(
                        f"timed out reading {topic}/{partition} offsets {since}..{until} at "
                        f"{position} (kafkaConsumer.pollTimeoutMs)"
                    )
                continue
            deadline = time.monotonic() + config.poll_timeout_s
            for message in batch:
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        # the end of the log: what lies below it was delivered or is invisible
                        position = max(position, min(int(message.offset() or 0), until))
                        continue
                    if error.code() not in (
                        KafkaError._AUTO_OFFSET_RESET,
                        KafkaError.OFFSET_OUT_OF_RANGE,
                    ):
                        raise TiCDCSparkError(
                            f"Kafka error at {topic}/{partition}@{position}: {error}"
                        )
                    position = _recover(consumer, config, topic, partition, position, until)
                    break  # what else this batch holds was fetched before the reset
                offset = int(message.offset() or 0)
                if offset >= until:
                    position = until
                    break
                position = offset + 1
                _append(columns, message)
            if len(columns["offset"]) >= BATCH_ROWS:
                yield record_batch(columns, config.include_headers)
                columns = empty_columns()
    finally:
        consumer.close()
    if columns["offset"]:
        yield record_batch(columns, config.include_headers)


def _position(consumer: Any, topic: str, partition: int) -> int:
    """The consumer's position: past the records delivered and the invisible ones after
    them (a negative number while it has none)."""
    from confluent_kafka import TopicPartition

    return int(consumer.position([TopicPartition(topic, partition)])[0].offset)


def _recover(
    consumer: Any, config: _Config, topic: str, partition: int, position: int, until: int
) -> int:
    """After the broker said ``position`` is out of its range: report the data loss, and
    return where the read goes on (the earliest offset the broker still has, or ``until``
    when none of [position, until) is left), the consumer assigned there."""
    from confluent_kafka import TopicPartition

    low, high = consumer.get_watermark_offsets(
        TopicPartition(topic, partition), timeout=config.poll_timeout_s
    )
    if position < low:
        lost = f"records [{position}, {min(low, until)}) were deleted"
    else:
        lost = "the partition ends below it (re-created?)"
    _report_data_loss(
        config,
        f"cannot fetch offset {position} of {topic}-{partition}: the broker has offsets "
        f"[{low}, {high}), {lost}",
    )
    resume = max(int(low), position)
    if resume >= until or resume >= high:
        return until  # nothing of the range is left
    consumer.unassign()
    consumer.assign([TopicPartition(topic, partition, resume)])
    return resume


def _append(columns: dict[str, list[Any]], message: Any) -> None:
    kind, millis = message.timestamp()
    columns["key"].append(message.key())
    columns["value"].append(message.value())
    columns["topic"].append(message.topic())
    columns["partition"].append(message.partition())
    columns["offset"].append(message.offset())
    columns["timestamp"].append(millis if kind else None)
    columns["timestampType"].append(max(0, kind - 1))  # librdkafka 1/2 -> Spark 0/1
    headers = message.headers()
    columns["headers"].append([{"key": k, "value": v} for k, v in headers] if headers else None)


class KafkaDataSource(KafkaColumnsSource):
    """Kafka topics with Spark's Kafka-source columns (``headers`` only with
    includeHeaders=true); options checked for a batch or a streaming query."""

    source_name = "ticdc-kafka"
    readers = (_BatchReader, _StreamReader)

    def config(self) -> _Config:
        return _Config.parse(self.options)

    def schema(self) -> str:
        return spark_kafka_schema(_include_headers(self.options))

    def reader(self, schema: Any) -> DataSourceReader:
        return _BatchReader(_Config.parse(self.options, "batch"))

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return _StreamReader(_Config.parse(self.options, "stream"))
