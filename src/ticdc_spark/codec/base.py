"""The codec contract: a message, an encoder, a decoder, and the sinks decoders write into.

An :class:`Encoder` turns events into :class:`Message` objects (key bytes or None, value bytes
or None) and says where each must go (:class:`Route`); the dispatcher picks topics and
partitions.  A :class:`Decoder` turns one message, as read from Kafka or a capture file, into
events.  The only exception a decoder lets out is :class:`~ticdc_spark.errors.DecodeError`.

Every decoder has one decode path, :meth:`Decoder.decode_into`, which writes what a message
carries into a :class:`RowSink`.  The sink says which values it takes: an :class:`EventSink`
collects events with canonical values (what :meth:`Decoder.decode` returns); the pipeline's
changelog builder (a :class:`ChangelogSink`) takes row images as changelog text, which lets
a decoder skip the canonical values where the wire already holds that text.  Decoders that
can do better on a whole batch say so by implementing :class:`BatchDecoder` (a list of
message values) or :class:`ArrowBatchDecoder` (an Arrow batch of Kafka records); the Spark
decode stage checks for those interfaces, nothing else.  None of this imports the pipeline:
the changelog builder conforms to these protocols, the codecs never import it.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ticdc_spark.model import Event, RowChange, RowKind, TableSchema

__all__ = [
    "ArrowBatchDecoder",
    "BatchDecoder",
    "ChangelogSink",
    "Decoder",
    "Encoder",
    "EventSink",
    "Message",
    "Position",
    "Route",
    "RowSink",
    "StatefulDecoder",
]

# Where an event came from: (topic, partition, offset, seq), seq numbering the events inside
# one message.
Position = tuple[str, int, int, int]


class Route(enum.Enum):
    """Where a message must be sent."""

    DISPATCH = "dispatch"  # the partition the dispatcher picks for the message's row(s)
    FIRST_PARTITION = "first-partition"  # partition 0 of the table's topic
    ALL_PARTITIONS = "all-partitions"  # every partition of the table's topic
    ALL_TOPICS = "all-topics"  # every partition of every topic (watermarks)


@dataclass(slots=True)
class Message:
    """One Kafka record: what an encoder produces and a decoder consumes.

    ``database``/``table`` name the table the message belongs to (empty for watermarks) so the
    dispatcher can pick the topic; ``rows`` counts the row events inside.  ``topic``,
    ``partition``, ``offset`` and ``timestamp`` are set once the record is placed or read;
    ``line`` when it was read from a line of a file.
    """

    key: bytes | None
    value: bytes | None
    route: Route = Route.DISPATCH
    database: str = ""
    table: str = ""
    rows: int = 0
    topic: str = ""
    partition: int | None = None
    offset: int | None = None
    timestamp: int | None = None
    line: int | None = None

    @property
    def position(self) -> str:
        """Where the record came from: ``topic/partition@offset`` and/or ``line N``."""
        parts = []
        if self.partition is not None or self.offset is not None:
            parts.append(f"{self.topic or '?'}/{self.partition}@{self.offset}")
        elif self.topic:
            parts.append(self.topic)
        if self.line is not None:
            parts.append(f"line {self.line}")
        return " ".join(parts)

    @property
    def size(self) -> int:
        """Key plus value bytes."""
        return len(self.key or b"") + len(self.value or b"")


@runtime_checkable
class Encoder(Protocol):
    """Turns events into messages.

    Rows passed in one call are meant for one destination (topic and partition): protocols that
    batch (Open Protocol) pack consecutive rows into one message.  DDL, watermark and bootstrap
    events always get messages of their own.
    """

    protocol: str

    def encode(self, events: Iterable[Event]) -> list[Message]: ...


class RowSink(Protocol):
    """What a decoder's one decode path writes a message's events into.

    ``text`` says which row values the sink takes: canonical values (False) or the
    changelog's text form (True, see :mod:`ticdc_spark.pipeline.changelog`).  ``schema_text`` is the
    table's changelog schema JSON when the decoder has it at hand (sinks that want it compute
    it otherwise); ``partition_id`` is TiDB's physical partition when the protocol says.
    """

    @property
    def text(self) -> bool: ...

    def add_row(
        self,
        kind: RowKind,
        schema: TableSchema,
        commit_ts: int,
        before: Mapping[str, Any] | None,
        after: Mapping[str, Any] | None,
        position: Position,
        *,
        key_only: bool = False,
        partition_id: int | None = None,
        schema_text: str | None = None,
    ) -> None: ...

    def add_events(
        self, events: Iterable[Event], topic: str, partition: int, offset: int, first_seq: int = 0
    ) -> None: ...


class ChangelogSink(RowSink, Protocol):
    """A sink that builds changelog Arrow batches (the pipeline's ``ChangelogBuilder``).

    :meth:`append_row` is the batch paths' primitive: a row already in changelog text, its
    schema JSON known; :meth:`arrow_schema` and ``row_kind`` let an Arrow batch path build
    the same columns.
    """

    row_kind: str

    def append_row(
        self,
        op: str,
        database: str,
        table: str,
        commit_ts: int,
        before: Mapping[str, Any] | None,
        after: Mapping[str, Any] | None,
        schema: str,
        position: Position,
        key_only: bool = False,
    ) -> None: ...

    def schema_text(self, schema: TableSchema | None) -> str | None: ...

    def arrow_schema(self) -> Any: ...

    def to_batch(self) -> Any: ...

    def __len__(self) -> int: ...


@runtime_checkable
class WireRowSink(Protocol):
    """A changelog sink that also takes rows still in their message (the pipeline's
    ``ChangelogBuilder``): a decode stage leaves there the rows it cannot finish in its task
    (Simple's rows whose schema another task or micro-batch brought), for the consumer to
    finish once it knows their schema."""

    def add_wire_row(
        self,
        op: str,
        database: str,
        table: str,
        commit_ts: int,
        position: Position,
        message: bytes,
        key_only: bool = False,
    ) -> None: ...

    def keep_message(self, message: bytes) -> None:
        """Keep ``message`` on the row last added, for the consumer to read again."""


@dataclass(slots=True)
class EventSink:
    """The sink behind :meth:`Decoder.decode`: events with canonical values, in order."""

    events: list[Event] = field(default_factory=list)
    text: bool = False

    def add_row(
        self,
        kind: RowKind,
        schema: TableSchema,
        commit_ts: int,
        before: Mapping[str, Any] | None,
        after: Mapping[str, Any] | None,
        position: Position,
        *,
        key_only: bool = False,
        partition_id: int | None = None,
        schema_text: str | None = None,
    ) -> None:
        self.events.append(
            RowChange(kind, schema, commit_ts, before, after, partition_id, key_only)  # type: ignore[arg-type]
        )

    def add_events(
        self, events: Iterable[Event], topic: str, partition: int, offset: int, first_seq: int = 0
    ) -> None:
        self.events.extend(events)


@runtime_checkable
class Decoder(Protocol):
    """Turns one message into the events it carries (a batch may carry several).

    ``decode_into`` is the one decode path; ``decode`` is ``decode_into`` an
    :class:`EventSink` (see :class:`DecoderBase`).
    """

    protocol: str

    def decode(self, message: Message) -> list[Event]: ...

    def decode_into(self, message: Message, sink: RowSink) -> None: ...


class DecoderBase:
    """What every decoder shares: :meth:`decode` through the one decode path."""

    protocol: str

    def decode(self, message: Message) -> list[Event]:
        sink = EventSink()
        self.decode_into(message, sink)
        return sink.events

    def decode_into(self, message: Message, sink: RowSink) -> None:  # pragma: no cover
        raise NotImplementedError


@runtime_checkable
class BatchDecoder(Protocol):
    """A decoder with a path for a whole batch of message values into a changelog sink.

    ``one_by_one(i)`` decodes message ``i`` with every check into the same sink (or makes it
    a dead letter); the batch path hands it every message it does not take itself, in
    order.  The path may leave one check to Arrow: image values must be strings or null
    (the caller redoes the batch one message at a time when the Arrow conversion fails).
    """

    def decode_batch(
        self,
        values: list[bytes | None],
        topics: list[str],
        partitions: list[int],
        offsets: list[int],
        sink: ChangelogSink,
        one_by_one: Callable[[int], None],
    ) -> None: ...


@runtime_checkable
class StatefulDecoder(Protocol):
    """A decoder whose state, learned from the messages it decodes, changes how later ones
    decode (Simple's schemas by version, Debezium's guessed types, the newest schema of each
    table a tombstone names in Avro).  The Spark decode stage takes a snapshot before a
    batch's fast path and restores it before decoding that batch again one record at a time
    (when Arrow refuses the fast path's rows), so that the second pass starts from where the
    first did."""

    def snapshot(self) -> Any: ...

    def restore(self, snapshot: Any) -> None: ...


@runtime_checkable
class ArrowBatchDecoder(Protocol):
    """A decoder that turns an Arrow batch of Kafka records into a changelog Arrow batch.

    Returns None when it does not apply (the caller then takes another path);
    ``careful(i)`` decodes record ``i`` with every check into ``sink``.
    """

    def decode_arrow_batch(
        self, batch: Any, careful: Callable[[int], None], sink: ChangelogSink
    ) -> Any: ...
