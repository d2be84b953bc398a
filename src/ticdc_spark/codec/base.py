"""The codec contract: a message, an encoder, a decoder.

An :class:`Encoder` turns events into :class:`Message` objects (key bytes or None, value bytes
or None) and says where each must go (:class:`Route`); the dispatcher picks topics and
partitions.  A :class:`Decoder` turns one message, as read from Kafka or a capture file, into
events.  The only exception a decoder lets out is :class:`~ticdc_spark.errors.DecodeError`.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ticdc_spark.model import Event

__all__ = ["Decoder", "Encoder", "Message", "Route"]


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


@runtime_checkable
class Decoder(Protocol):
    """Turns one message into the events it carries (a batch may carry several)."""

    protocol: str

    def decode(self, message: Message) -> list[Event]: ...
