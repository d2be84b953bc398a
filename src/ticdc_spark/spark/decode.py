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
from functools import cached_property
from typing import Any

import pyarrow as pa

from ticdc_spark.codec import Message, get_codec, make_decoder
from ticdc_spark.codec.base import ArrowBatchDecoder, BatchDecoder, Decoder, StatefulDecoder
from ticdc_spark.errors import ConfigError, DecodeError
from ticdc_spark.filter import TableFilter
from ticdc_spark.pipeline.changelog import ERROR, ChangelogBuilder, arrow_schema
from ticdc_spark.pipeline.dead_letters import DEAD_LETTER_FIELDS
from ticdc_spark.pipeline.policy import OnError

__all__ = ["changes", "dead_letters", "decode", "decode_batches"]

SOURCE_COLUMNS = ("key", "value", "topic", "partition", "offset")
# Input batches larger than this are decoded in slices, so that no changelog batch nears the
# 2 GiB an Arrow string column can hold (images are about twice the wire bytes of JSON
# protocols; Avro's, which name every column, can be far more: see _Joining).
MAX_INPUT_BYTES = 256 << 20
# Consecutive small input batches are decoded together up to this many records (or
# COALESCE_BYTES of them): the column-wise batch paths pay a fixed cost per field and per
# table of each batch, and Spark cuts the stage's input by record count (session.py: 2,000)
# so that a batch of the largest messages stays bounded.  Avro's batch path reads all-types
# rows 1.35x faster in batches of 10,000 than of 2,000 (benchmarks/avro_bench.py).
COALESCE_RECORDS = 10_000
COALESCE_BYTES = 64 << 20
# ... and only while their changelog is expected to stay under this (see _Joining).
MAX_JOINED_OUTPUT_BYTES = 256 << 20


def decode(
    df: Any,
    protocol: str,
    options: Mapping[str, Any] | None = None,
    *,
    on_error: str = OnError.DEAD_LETTER,
    compiled: bool = True,
    table_filter: TableFilter | None = None,
) -> Any:
    """The changelog DataFrame of a Kafka-shaped DataFrame (see
    :mod:`ticdc_spark.pipeline.changelog`).

    ``on_error``: ``dead-letter`` (messages that fail to decode become ERROR rows) or
    ``stop`` (the job fails on the first; ``fail`` is accepted for it too).
    ``table_filter`` (TiCDC's table-filter rules, :class:`~ticdc_spark.filter.TableFilter`)
    drops the messages of the tables it filters out before their rows are decoded: they give
    no rows and no dead letters.

    Simple's rows name a schema version that BOOTSTRAP and DDL messages bring, possibly in
    another task: a row whose schema its task has not met comes out as a *wire row* (images
    null, ``value`` the message; see :mod:`ticdc_spark.pipeline.changelog`), which the
    pipeline's consumer finishes (:func:`~ticdc_spark.spark.pipeline.start`, or a
    :class:`~ticdc_spark.pipeline.planner.Planner` with ``Capabilities.of("simple")``).

    ``compiled=False`` keeps a protocol's Arrow batch path (Canal-JSON's compiled scanner,
    Avro's and Debezium's column-wise paths) out of use, to compare or to rule it out; the
    result is the same.  (The codecs' compiled value
    loops, ``ticdc_spark.codec.compiled``, stay in use: they are part of every decoder.)
    """
    from pyspark.sql.pandas.types import from_arrow_schema

    fail = OnError.parse(on_error, (OnError.DEAD_LETTER, OnError.STOP)) == OnError.STOP
    options = _checked(df, protocol, options)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return decode_batches(
            batches, protocol, options, fail=fail, compiled=compiled, table_filter=table_filter
        )

    return df.select(*SOURCE_COLUMNS).mapInArrow(run, from_arrow_schema(arrow_schema()))


def _checked(df: Any, protocol: str, options: Mapping[str, Any] | None) -> dict[str, Any]:
    """The codec options, checked on the driver (a clear error before any task runs), and
    the source DataFrame's columns."""
    options = dict(options or {})
    get_codec(protocol).parse_options(options)
    missing = [c for c in SOURCE_COLUMNS if c not in df.columns]
    if missing:
        raise ConfigError(f"the source DataFrame lacks Kafka columns: {', '.join(missing)}")
    return options


def decode_batches(
    batches: Iterator[pa.RecordBatch],
    protocol: str,
    options: Mapping[str, Any],
    *,
    fail: bool = False,
    compiled: bool = True,
    table_filter: TableFilter | None = None,
) -> Iterator[pa.RecordBatch]:
    """Decode Arrow batches of Kafka records into changelog batches (runs in the tasks).

    Consecutive small input batches are decoded together (up to :data:`COALESCE_RECORDS`
    records), a large one in slices; each becomes one changelog batch, in order.  Decoders
    with an Arrow path (:class:`~ticdc_spark.codec.base.ArrowBatchDecoder`: Canal-JSON, Avro,
    Debezium) get the Arrow batch and decode what it cannot with ``decode_one``; decoders
    with a batch path (:class:`~ticdc_spark.codec.base.BatchDecoder`) get the whole batch;
    if the batch's Arrow conversion then finds a value the batch path let through (it leaves
    type checks to Arrow), the batch is decoded again one message at a time, where every
    check runs and a bad message becomes a dead letter (a decoder whose state changes with
    the messages, :class:`~ticdc_spark.codec.base.StatefulDecoder`, is first put back where
    it stood before the batch).  Should Arrow still refuse the rows, each record is built on
    its own and the ones it refuses become dead letters too.
    """
    # (the stage's own decoder where the protocol has one: Simple leaves a row whose schema
    # this task has not met in its message, for the consumer to finish, see codec.simple)
    decoder = make_decoder(protocol, options, table_filter=table_filter, stage=True)
    stage = _Stage(decoder, compiled, fail)
    joining = _Joining()
    for parts in _coalesced(map(_narrowed, _bounded(batches)), joining):
        out = stage.fast(parts) if len(parts) > 1 else None
        if out is not None:
            joining.saw(out, sum(part.num_rows for part in parts))
            if out.num_rows:
                yield out
            continue
        for part in parts:  # (alone, or a joined batch the fast paths did not take: as before)
            out = stage.decoded(part)
            joining.saw(out, part.num_rows)
            if out.num_rows:
                yield out


# What Arrow raises when a changelog batch cannot be built from the decoded rows.
_UNFIT = (ArithmeticError, TypeError, ValueError)  # pyarrow's ArrowInvalid/TypeError among them


class _Stage:
    """One task's decoder and the ways it decodes an Arrow batch of Kafka records."""

    def __init__(self, decoder: Decoder, compiled: bool, fail: bool) -> None:
        self.decoder, self.fail = decoder, fail
        self.arrow = (
            decoder.decode_arrow_batch
            if compiled and isinstance(decoder, ArrowBatchDecoder)
            else None
        )
        self.whole = decoder.decode_batch if isinstance(decoder, BatchDecoder) else None
        self.stateful = decoder if isinstance(decoder, StatefulDecoder) else None

    def fast(self, parts: list[pa.RecordBatch]) -> pa.RecordBatch | None:
        """The changelog of batches joined into one by the decoder's batch path, or None
        (the decoder put back where it stood) when the batches do not join or the path does
        not take them: then each is decoded on its own, as Spark cut them."""
        if self.arrow is None and self.whole is None:
            return None
        try:
            batch = pa.concat_batches(parts)
        except (pa.ArrowException, ValueError):  # (schemas differ: a direct caller's batches)
            return None
        before = self._snapshot()
        out = self._batch_path(batch, _Records(batch, self.decoder, self.fail), before)
        if out is None:
            self._restore(before)
        return out

    def decoded(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """The changelog of one batch: by the batch path, else one message at a time, where
        every check runs; should Arrow still refuse the rows, each record on its own."""
        records = _Records(batch, self.decoder, self.fail)
        before = self._snapshot()
        out = self._batch_path(batch, records, before)
        if out is not None:
            return out
        try:
            self._restore(before)  # (the replay starts where the first pass did)
            return records.one_by_one()
        except _UNFIT:  # a value no changelog column can hold (an integer past int64)
            self._restore(before)
            return records.isolated()

    def _batch_path(
        self, batch: pa.RecordBatch, records: _Records, before: Any
    ) -> pa.RecordBatch | None:
        out = None
        if self.arrow is not None:
            try:
                out = self.arrow(batch, records.decode_one, records.builder)
            except _UNFIT:
                out = None
            if out is None:  # (rows the careful path added before the failure must not stay)
                records.builder = ChangelogBuilder()
        if out is None and self.whole is not None:
            if self.arrow is not None:
                self._restore(before)
            try:
                self.whole(
                    records.values,
                    records.topics,
                    records.partitions,
                    records.offsets,
                    records.builder,
                    records.decode_one,
                )
                out = records.builder.to_batch()
            except _UNFIT:
                pass
        return out

    def _snapshot(self) -> Any:
        return None if self.stateful is None else self.stateful.snapshot()

    def _restore(self, snapshot: Any) -> None:
        if self.stateful is not None:
            self.stateful.restore(snapshot)


class _Joining:
    """How many records the stage may join into one batch now.

    The changelog of a batch can be far larger than its messages: an Avro image names every
    column (a table of 4,096 nullable columns with 64-character names made 262 KB of
    changelog from 4 KB of message), so the stage joins batches only while the changelog it
    expects of them, at the most bytes per record this task has seen, stays under
    :data:`MAX_JOINED_OUTPUT_BYTES`; until it has seen a changelog, it joins nothing."""

    def __init__(self) -> None:
        self.per_record: float | None = None

    def saw(self, changelog: pa.RecordBatch, records: int) -> None:
        per = changelog.nbytes / max(records, 1)
        self.per_record = per if self.per_record is None else max(self.per_record, per)

    def most(self) -> int:
        if self.per_record is None:
            return 0
        return min(COALESCE_RECORDS, int(MAX_JOINED_OUTPUT_BYTES / max(self.per_record, 1.0)))


def _coalesced(
    batches: Iterator[pa.RecordBatch], joining: _Joining
) -> Iterator[list[pa.RecordBatch]]:
    """The batches in order, consecutive ones grouped to be decoded together up to
    ``joining.most()`` records and :data:`COALESCE_BYTES`; a batch past a bound goes alone."""
    pending: list[pa.RecordBatch] = []
    records = size = 0
    for batch in batches:
        if pending and (
            records + batch.num_rows > joining.most() or size + batch.nbytes > COALESCE_BYTES
        ):
            yield pending
            pending, records, size = [], 0, 0
        pending.append(batch)
        records, size = records + batch.num_rows, size + batch.nbytes
    if pending:
        yield pending


def _narrowed(batch: pa.RecordBatch) -> pa.RecordBatch:
    """The batch with 32-bit offsets, as Spark's Kafka columns have them by default: with
    ``spark.sql.execution.arrow.useLargeVarTypes`` Spark sends large_binary and large_string,
    which the batch paths do not read.  (A batch is at most MAX_INPUT_BYTES here: it fits.)"""
    narrow = {pa.large_binary(): pa.binary(), pa.large_string(): pa.string()}
    if not any(field.type in narrow for field in batch.schema):
        return batch
    fields = [field.with_type(narrow.get(field.type, field.type)) for field in batch.schema]
    return batch.cast(pa.schema(fields))


def _bounded(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The batches, each over :data:`MAX_INPUT_BYTES` cut into slices of about that size."""
    for batch in batches:
        size = batch.nbytes
        if size <= MAX_INPUT_BYTES or batch.num_rows < 2:
            yield batch
            continue
        parts = min(batch.num_rows, -(-size // MAX_INPUT_BYTES))
        step = -(-batch.num_rows // parts)
        for start in range(0, batch.num_rows, step):
            yield batch.slice(start, step)


class _Records:
    """One Arrow batch of Kafka records as Python lists, and the changelog being built."""

    def __init__(self, batch: pa.RecordBatch, decoder: Decoder, fail: bool) -> None:
        self.batch = batch
        self.decoder = decoder
        self.fail = fail
        self.builder = ChangelogBuilder()

    # The batch as Python lists, made when first needed (the Arrow path may never need them).
    @cached_property
    def keys(self) -> list[bytes | None]:
        return self.batch.column("key").to_pylist()  # type: ignore[no-any-return]

    @cached_property
    def values(self) -> list[bytes | None]:
        return self.batch.column("value").to_pylist()  # type: ignore[no-any-return]

    @cached_property
    def topics(self) -> list[str]:
        return [t or "" for t in self.batch.column("topic").to_pylist()]

    @cached_property
    def partitions(self) -> list[int]:
        return [p or 0 for p in self.batch.column("partition").to_pylist()]

    @cached_property
    def offsets(self) -> list[int]:
        return [o or 0 for o in self.batch.column("offset").to_pylist()]

    def decode_one(self, i: int) -> None:
        """Decode record ``i`` with every check; a failure becomes a dead letter (or raises)."""
        topic, partition, offset = self.topics[i], self.partitions[i], self.offsets[i]
        message = Message(
            self.keys[i], self.values[i], topic=topic, partition=partition, offset=offset
        )
        builder = self.builder
        try:
            self.decoder.decode_into(message, builder)
        except DecodeError as exc:
            if self.fail:
                raise
            builder.add_error(str(exc), topic, partition, offset, message.key, message.value)

    def one_by_one(self) -> pa.RecordBatch:
        """The changelog batch of every record decoded with every check."""
        self.builder = ChangelogBuilder()
        for i in range(len(self.values)):
            self.decode_one(i)
        return self.builder.to_batch()

    def isolated(self) -> pa.RecordBatch:
        """Like :meth:`one_by_one`, with each record's rows made into Arrow on their own, so
        that a record Arrow refuses becomes a dead letter (or the error, in fail mode)."""
        parts = []
        for i in range(len(self.values)):
            self.builder = ChangelogBuilder()
            self.decode_one(i)
            try:
                parts.append(self.builder.to_batch())
            except _UNFIT as exc:
                reason = f"a decoded value does not fit the changelog: {exc}"
                key, value = self.keys[i], self.values[i]
                topic, partition, offset = self.topics[i], self.partitions[i], self.offsets[i]
                if self.fail:
                    position = Message(key, value, topic=topic, partition=partition, offset=offset)
                    raise DecodeError(reason, position=position.position, payload=value) from None
                self.builder = ChangelogBuilder()
                self.builder.add_error(reason, topic, partition, offset, key, value)
                parts.append(self.builder.to_batch())
        return pa.concat_batches(parts) if parts else ChangelogBuilder().to_batch()


def changes(changelog: Any) -> Any:
    """The changelog without dead letters."""
    from pyspark.sql import functions as F

    return changelog.where(F.col("kind") != ERROR)


def dead_letters(changelog: Any) -> Any:
    """The messages that failed to decode: topic, partition, offset, error, key, value."""
    from pyspark.sql import functions as F

    return changelog.where(F.col("kind") == ERROR).select(*DEAD_LETTER_FIELDS)
