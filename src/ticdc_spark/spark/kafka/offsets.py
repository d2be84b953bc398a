"""Planning the ``ticdc-kafka`` source's reads on the driver: the source's partitions and
their offsets from the broker (:class:`OffsetReader`), where a query starts and ends (offsets,
times), the ranges a micro-batch reads (bounded, split as Spark splits them), and what Spark
reports as data loss between two plans."""

from __future__ import annotations

import json
import logging
import math
import os
import re
import time
from collections.abc import Callable, Mapping
from typing import TypeVar

from pyspark.sql.datasource import InputPartition

from ticdc_spark.errors import ConfigError, ObjectNotFound, TiCDCSparkError
from ticdc_spark.io.kafka import redact
from ticdc_spark.spark.kafka.options import (
    EARLIEST,
    LATEST,
    Offsets,
    SourceConfig,
    Timestamps,
    parse_spec,
    report_data_loss,
)
from ticdc_spark.storage import StorageOptions, Store, is_local, open_store
from ticdc_spark.storage.store import local_path

__all__ = [
    "OffsetReader",
    "limit_offsets",
    "load_offsets",
    "offsets_at_times",
    "plan_ranges",
    "split_ranges",
    "store_offsets",
    "topic_partitions",
    "with_new_partitions",
]

log = logging.getLogger(__name__)

T = TypeVar("T")
_INTERNAL_TOPICS = frozenset(("__consumer_offsets", "__transaction_state"))


def topic_partitions(options: Mapping[str, str]) -> list[tuple[str, int]]:
    """The (topic, partition) pairs a source with these options reads, from the broker."""
    metadata = OffsetReader(SourceConfig.parse(options))
    try:
        return metadata.partitions()
    finally:
        metadata.close()


# --------------------------------------------------------------------------------------------
# Metadata (driver side).


class OffsetReader:
    """Topic partitions and their low/high watermarks."""

    def __init__(self, config: SourceConfig) -> None:
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
        times: Timestamps,
        bounds: dict[tuple[str, int], tuple[int, int]] | None,
        fail_on_no_match: bool,
    ) -> Offsets:
        """The earliest offset of each partition whose record time is at or after the time
        asked (the broker's ListOffsets by timestamp); a partition no record's time reaches
        fails the query with ``fail_on_no_match``, else takes its end offset.  A per-partition
        JSON must name exactly the source's partitions, as Spark requires."""
        if bounds is None:
            bounds = self.bounds(self.partitions())
        parts = sorted(bounds)
        if times.each is not None:
            _require_every_partition_named(times.option, times.each, parts)
        found = self._offsets_for_times(times, parts)
        return offsets_at_times(found, times, bounds, fail_on_no_match)

    def _offsets_for_times(
        self, times: Timestamps, parts: list[tuple[str, int]]
    ) -> dict[tuple[str, int], int]:
        """The broker's answer (ListOffsets by timestamp, retried) for each partition: its
        earliest offset whose record time is at or after the time asked, negative where none
        is; :func:`offsets_at_times` decides what such a partition gets."""
        from confluent_kafka import TopicPartition

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
        return found

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
        wanted = parse_spec(spec, default)
        if "*" not in wanted:
            _require_every_partition_named(
                option, wanted, parts, " (-1 for latest, -2 for earliest)"
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


def _require_every_partition_named(
    option: str,
    spec: Offsets,
    parts: list[tuple[str, int]],
    hint: str = "",
) -> None:
    """Refuse a per-partition JSON option (offsets or times, ``{topic: {partition: ...}}``)
    that does not name exactly the source's partitions ``parts`` (sorted), as Spark does;
    ``hint`` says what else the option accepts."""
    named = sorted((t, int(p)) for t, ps in spec.items() for p in ps)
    if named != parts:
        raise ConfigError(
            f"if {option} contains specific offsets, it must name every partition of the "
            f"source{hint}; named: {[f'{t}-{p}' for t, p in named]}, the source's: "
            f"{[f'{t}-{p}' for t, p in parts]}"
        )


def offsets_at_times(
    found: Mapping[tuple[str, int], int],
    times: Timestamps,
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


def plan_ranges(start: Offsets, end: Offsets, config: SourceConfig) -> list[InputPartition]:
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


def with_new_partitions(
    start: Offsets, end: Offsets, config: SourceConfig, report: bool = False
) -> Offsets:
    """``start`` and, for the partitions of ``end`` it lacks (new ones), their earliest
    offsets, as Spark starts a new partition; ``report``: a new partition whose earliest
    offset is not 0 lost records (they were deleted before they could be read)."""
    new = [(t, int(p)) for t, ps in end.items() for p in ps if p not in start.get(t, {})]
    since = {t: dict(ps) for t, ps in start.items()}
    if not new:
        return since
    metadata = OffsetReader(config)
    try:
        bounds = metadata.bounds(new)
    finally:
        metadata.close()
    for (topic, partition), (low, _high) in sorted(bounds.items()):
        since.setdefault(topic, {})[str(partition)] = low
        if report and low != 0:
            report_data_loss(
                config,
                f"added partition {topic}-{partition} starts at offset {low} instead of 0: "
                "some data may have been missed",
            )
    return since


def _offsets_file(path: str, storage: StorageOptions | None) -> tuple[Store, str]:
    """The store holding ``path`` (a local path or a URI) and the file's name in it."""
    if is_local(path):
        local = os.path.abspath(local_path(path))
        return open_store(os.path.dirname(local), storage), os.path.basename(local)
    parent, _, name = path.rstrip("/").rpartition("/")
    return open_store(parent, storage), name


def load_offsets(path: str | None, storage: StorageOptions | None = None) -> Offsets | None:
    """The initial offsets kept in ``path`` (None: none kept yet)."""
    if not path:
        return None
    store, name = _offsets_file(path, storage)
    try:
        loaded = json.loads(store.read(name))
        return {t: {str(p): int(o) for p, o in ps.items()} for t, ps in loaded.items()}
    except ObjectNotFound:
        return None
    except (ValueError, AttributeError, TypeError) as exc:
        raise TiCDCSparkError(f"cannot read the initial offsets in {path}: {exc}") from None


def store_offsets(
    path: str | None, offsets: Offsets, storage: StorageOptions | None = None
) -> Offsets:
    """Keep ``offsets`` in ``path`` unless some are kept there already (put-if-absent: of
    two first runs, both go on from the first's); the offsets kept."""
    if not path:
        return offsets
    store, name = _offsets_file(path, storage)
    if store.create(name, json.dumps(offsets, sort_keys=True).encode()):
        return offsets
    return load_offsets(path, storage) or offsets


def limit_offsets(start: Offsets, end: Offsets, budget: int) -> Offsets:
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
