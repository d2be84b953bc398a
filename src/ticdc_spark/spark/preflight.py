"""Everything a pipeline run can be refused for, checked before Spark starts and before
anything is written.

Starting Spark takes 5-12 s, and the pipeline's checks at its start (:func:`~ticdc_spark.
spark.pipeline.start`) come after it, once the checkpoint directory exists: a misspelled
option then cost that wait and left a checkpoint behind.  :func:`preflight` reads the same
settings first, touching nothing: the protocol and its options, the schema registry, the
mode (against what the protocol carries, and against what an existing checkpoint holds), the
error policy, the trigger, the table filter, the target, the source and every source option
by name (a misspelled one is named with the option meant: Spark's own sources would ignore
it).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from pathlib import Path

import pyarrow.compute as pc

from ticdc_spark.codec import get_codec
from ticdc_spark.codec.avro.registry import check_shared_registry
from ticdc_spark.errors import ConfigError, DamagedState
from ticdc_spark.filter import TableFilter
from ticdc_spark.io.kafka import is_kafka_uri, redact
from ticdc_spark.pipeline import wire_rows
from ticdc_spark.pipeline.capabilities import Capabilities
from ticdc_spark.pipeline.checkpoint import StateStore, check_checkpoint
from ticdc_spark.pipeline.policy import Mode, OnError
from ticdc_spark.sinks import check_target
from ticdc_spark.spark import capture_source as capture
from ticdc_spark.spark.kafka.options import SourceConfig
from ticdc_spark.spark.pipeline import PipelineConfig, trigger_seconds
from ticdc_spark.spark.sources import bounded_source_options, kafka_options
from ticdc_spark.storage import is_local
from ticdc_spark.storage.hadoop import checkpoint_features
from ticdc_spark.storage.store import local_path

__all__ = ["KAFKA_OPTIONS", "preflight"]

# The ticdc-kafka source's options other than kafka.* (docs/kafka-source.md tables them;
# tests/test_cli_bad_input.py checks that the two lists agree).
KAFKA_OPTIONS = (
    "assign",
    "subscribe",
    "subscribePattern",
    "startingOffsets",
    "endingOffsets",
    "startingTimestamp",
    "startingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy",
    "endingTimestamp",
    "endingOffsetsByTimestamp",
    "failOnDataLoss",
    "availableNow",
    "kafkaConsumer.pollTimeoutMs",
    "fetchOffset.numRetries",
    "fetchOffset.retryIntervalMs",
    "maxOffsetsPerTrigger",
    "maxBytesPerTrigger",  # (known, and refused with the reason)
    "minOffsetsPerTrigger",
    "maxTriggerDelay",
    "minPartitions",
    "maxRecordsPerPartition",
    "groupIdPrefix",
    "includeHeaders",
    "initialOffsetsPath",
)


def preflight(config: PipelineConfig) -> None:
    """Refuse a configuration the pipeline would refuse once Spark runs (ConfigError, or
    CheckpointError for a checkpoint that cannot resume), without creating anything."""
    spec = get_codec(config.protocol)
    check_shared_registry(spec.parse_options(config.options), spec.name)
    Capabilities.of(config.protocol, config.options).check_mode(config.mode)
    OnError.parse(config.on_error, (OnError.DEAD_LETTER, OnError.STOP), what="--on-error")
    TableFilter(config.table_filter)
    trigger_seconds(config.trigger)
    if config.max_held_rows < 1:
        raise ConfigError(f"--max-held-rows must be at least 1, not {config.max_held_rows}")
    check_target(config.target, config.engine)
    _check_source(config)
    _check_checkpoint(config)


def _check_source(config: PipelineConfig) -> None:
    options = config.source_options
    if is_kafka_uri(config.source):
        _check_names(options, KAFKA_OPTIONS, "a Kafka source", also="kafka.*")
        bounded = bounded_source_options(config.source, config.protocol, options)
        SourceConfig.parse(kafka_options(config.source, bounded), "stream")
        return
    if not Path(config.source).is_dir():
        raise ConfigError(
            f"source {redact(config.source)!r} is neither kafka://HOST:PORT/TOPIC nor a "
            "capture directory"
        )
    _check_names(options, [o for o in capture.OPTIONS if o != "path"], "a capture directory")
    capture.check_options({**options, "path": config.source})


def _check_names(
    options: Mapping[str, str], known: Iterable[str], what: str, also: str = ""
) -> None:
    """Refuse a source option no source of this kind has, naming the one meant."""
    names = {name.lower(): name for name in known}
    for given in options:
        if given.lower() in names or (also and given.lower().startswith(also.rstrip("*"))):
            continue
        close = difflib.get_close_matches(given.lower(), list(names), n=1, cutoff=0.75)
        valid = ", ".join([*names.values(), *([also] if also else [])])
        hint = f"did you mean {names[close[0]]}?" if close else f"valid: {valid}"
        raise ConfigError(f"--source-option {given!r} is not an option of {what}: {hint}")


def _check_checkpoint(config: PipelineConfig) -> None:
    """A checkpoint that exists must be a directory (or prefix) whose Spark part is there,
    and switching it to eventual mode must not strand the rows it holds back for the
    watermark."""
    checkpoint_features(config.checkpoint)  # (a store Spark cannot write to: before any use)
    letters = config.dead_letters
    if letters and is_local(letters) and Path(local_path(letters)).is_file():
        raise ConfigError(f"--dead-letters {letters} is a file, not a directory")
    started = True
    if is_local(config.checkpoint):
        root = Path(local_path(config.checkpoint))
        if root.exists() and not root.is_dir():
            raise ConfigError(f"--checkpoint {root} is a file, not a directory")
        started = (root / "ticdc").is_dir()  # (nothing to read, and nothing to create)
    check_checkpoint(config.checkpoint, config.storage)
    if started and Mode.parse(config.mode) == Mode.EVENTUAL:
        _check_mode_switch(config)


def _check_mode_switch(config: PipelineConfig) -> None:
    """Rows held for the watermark (consistent mode) are released in eventual mode by the
    next micro-batch, and there may be none (``--trigger once`` with nothing new: the run
    ends with them still held); so such a checkpoint goes on in consistent mode only."""
    root = config.checkpoint
    store = StateStore(root, storage=config.storage)
    latest = store.latest()
    try:
        held = store.read(latest).held if latest >= 0 else None
    except DamagedState:
        return  # (the start rebuilds it from the log, or refuses naming the file)
    if held is None:
        return
    waiting = int(held.num_rows - (pc.sum(wire_rows.wire(held)).as_py() or 0))
    if waiting:
        raise ConfigError(
            f"the checkpoint {root} holds {waiting} rows back for the watermark (it ran in "
            "consistent mode), which eventual mode would leave unapplied until new data "
            "comes: go on in consistent mode, or replicate again from the start in eventual "
            "mode (a new --checkpoint and an empty target)"
        )
