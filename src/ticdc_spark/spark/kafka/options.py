"""The options of the ``ticdc-kafka`` source: checked once on the driver, as Spark's Kafka
source checks them (what Spark refuses is refused with its reason, nothing is ignored), into a
:class:`SourceConfig` that planning and reading share.  docs/kafka-source.md tables them."""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ticdc_spark.errors import ConfigError, TiCDCSparkError
from ticdc_spark.io.kafka import client_config

__all__ = [
    "EARLIEST",
    "LATEST",
    "Offsets",
    "SourceConfig",
    "Timestamps",
    "canonical",
    "headers_included",
    "parse_spec",
    "report_data_loss",
]

log = logging.getLogger(__name__)

Offsets = dict[str, dict[str, int]]  # topic -> partition (as text, JSON keys) -> offset
EARLIEST, LATEST = -2, -1


def canonical(offsets: Offsets) -> Offsets:
    """``offsets`` with topics and partitions in order: Spark compares a source's offsets as
    JSON text, so two equal offsets written in another order would be a micro-batch of no
    records, run again and again."""
    return {
        topic: dict(sorted(offsets[topic].items(), key=lambda p: int(p[0])))
        for topic in sorted(offsets)
    }


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
_STREAM_ONLY = ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay", "availableNow")


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
class Timestamps:
    """Offsets asked by record time (ms since the epoch): ``every`` partition at one time
    (startingTimestamp / endingTimestamp), or ``each`` its own (starting/
    endingOffsetsByTimestamp, JSON {topic: {partition: time}}).  Each partition starts or
    ends at its earliest offset whose time is at or after the one asked (Kafka's
    offsetsForTimes, the time passed as given)."""

    option: str
    every: int | None = None
    each: Offsets | None = None

    @classmethod
    def parse(cls, lowered: Mapping[str, str], options: tuple[str, ...]) -> Timestamps | None:
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
    return [(t, p, o) for t, ps in parse_spec(spec, LATEST).items() for p, o in ps.items()]


@dataclass(frozen=True)
class SourceConfig:
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
    starting_times: Timestamps | None = None  # outranks ``starting``
    ending_times: Timestamps | None = None  # outranks ``ending``
    latest_when_no_match: bool = False  # startingOffsetsByTimestampStrategy=latest
    include_headers: bool = False
    group_prefix: str = "spark-kafka-source"
    min_offsets: int | None = None
    max_trigger_delay_s: float = 900.0
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    fetch_attempts: int = 3
    fetch_interval_s: float = 1.0
    available_now: bool = False  # the end fixed when the query starts (ticdc_spark.spark.trigger)
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
    def parse(cls, options: Mapping[str, str], mode: str = "any") -> SourceConfig:
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
            starting_times=Timestamps.parse(lowered, _STARTING_OPTIONS),
            ending_times=Timestamps.parse(lowered, _ENDING_OPTIONS),
            latest_when_no_match=_latest_when_no_match(lowered),
            include_headers=headers_included(options),
            min_offsets=_positive(lowered, "minOffsetsPerTrigger"),
            max_trigger_delay_s=_duration_s(lowered.get("maxtriggerdelay", "15m")),
            min_partitions=_positive(lowered, "minPartitions"),
            max_records_per_partition=_positive(lowered, "maxRecordsPerPartition"),
            fetch_attempts=max(1, int(lowered.get("fetchoffset.numretries", "3"))),
            fetch_interval_s=int(lowered.get("fetchoffset.retryintervalms", "1000")) / 1000,
            available_now=_flag(lowered, "availableNow"),
            group_prefix=lowered.get("groupidprefix")
            or ("spark-kafka-relation" if mode == "batch" else "spark-kafka-source"),
        )


def _flag(lowered: Mapping[str, str], name: str) -> bool:
    text = lowered.get(name.lower(), "false").strip().lower()
    if text not in ("true", "false"):
        raise ConfigError(f"{name} must be true or false, not {text!r}")
    return text == "true"


def headers_included(options: Mapping[str, str]) -> bool:
    lowered = {k.lower(): v for k, v in options.items()}
    return lowered.get("includeheaders", "false").strip().lower() == "true"


def parse_spec(spec: str, default: int) -> dict[str, dict[str, int]]:
    keyword = spec.strip().lower()
    if keyword in ("earliest", "latest"):
        return {"*": {"*": EARLIEST if keyword == "earliest" else LATEST}}
    try:
        parsed = json.loads(spec)
        return {t: {str(p): int(o) for p, o in ps.items()} for t, ps in parsed.items()}
    except (ValueError, AttributeError, TypeError):
        raise ConfigError(f"offsets must be earliest, latest or JSON, not {spec!r}") from None


def report_data_loss(config: SourceConfig, message: str) -> None:
    """Spark's reportDataLoss: fail the query, or with failOnDataLoss=false log and go on."""
    if config.fail_on_data_loss:
        raise TiCDCSparkError(
            f"{message}. Data may have been lost: Kafka deleted it (retention), or a topic "
            "was deleted or re-created. If you want the query to go on regardless, set the "
            "source option failOnDataLoss to false."
        )
    log.warning("%s. The query goes on (failOnDataLoss=false).", message)
