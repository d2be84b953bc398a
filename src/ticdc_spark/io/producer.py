"""The producing side: events to protocol messages with TiCDC's dispatch rules (the
product's ``ticdc-spark encode``; the test bench's workload producer drives it too).

:class:`Producer` does what TiCDC's MQ sink does with a changefeed's events:

* each row goes to the topic of its table (topic expression) and the partition its
  dispatcher picks; rows wait in per-partition batches (so batching protocols batch them);
* a DDL first flushes every waiting row, then goes to every partition of its table's topic
  (Canal-JSON: partition 0);
* a watermark flushes too, then goes to every partition of every topic;
* with a table filter (TiCDC's ``filter.rules``), the events of tables it filters out are
  not encoded at all (watermarks always are).

Messages go to an :class:`Output`: a capture directory (files a streaming capture source can
pick up), a single capture stream, or Kafka (:class:`~ticdc_spark.io.kafka.KafkaProducerSink`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import IO, Protocol

import orjson

from ticdc_spark.codec.base import Encoder, Message, Route
from ticdc_spark.dispatch import PartitionDispatcher, TopicRouter
from ticdc_spark.filter import TableFilter
from ticdc_spark.io.capture import message_to_record
from ticdc_spark.model import DDLEvent, Event, RowChange, Watermark, physical_ms

__all__ = ["CaptureDirOutput", "CaptureStreamOutput", "Output", "Producer"]


class Output(Protocol):
    """Where produced messages go (already placed on a topic and partition)."""

    def write(self, messages: list[Message]) -> None: ...

    def close(self) -> None: ...


class Producer:
    """Encodes events and places the messages, as TiCDC's MQ sink does."""

    def __init__(
        self,
        encoder: Encoder,
        output: Output,
        *,
        router: TopicRouter,
        dispatcher: PartitionDispatcher,
        partitions: int = 1,
        topics: Iterable[str] = (),
        table_filter: TableFilter | None = None,
    ) -> None:
        self.encoder = encoder
        bind = getattr(encoder, "bind_topic_router", None)
        if bind is not None:  # protocols whose subjects follow the topic (avro) check the rule
            bind(router)
        # the table filter, or None when every table is kept (TableFilter's default)
        self.table_filter = (
            None if table_filter is None or table_filter.everything else table_filter
        )
        self.output = output
        self.router = router
        self.dispatcher = dispatcher
        self.partitions = partitions
        self.topics: list[str] = list(topics)
        self.pending: dict[tuple[str, int], list[Event]] = {}
        self.offsets: dict[tuple[str, int], int] = {}
        self.sent = 0

    def send(self, event: Event) -> None:
        if self.table_filter is not None and not self.keeps(event):
            return
        if isinstance(event, RowChange):
            topic = self._topic(event.database, event.table)
            partition = self.dispatcher.partition(event, self.partitions)
            self.pending.setdefault((topic, partition), []).append(event)
            return
        self.flush()
        placed = []
        for message in self.encoder.encode([event]):
            placed += self._place(message, None, _event_ms(event))
        self._emit(placed)

    def keeps(self, event: Event) -> bool:
        """Whether the table filter keeps the event's table (a DDL without a table: its
        schema; a watermark: always)."""
        keep = self.table_filter
        if keep is None or isinstance(event, Watermark):
            return True
        if isinstance(event, DDLEvent):
            if not event.table:
                return keep.matches_schema(event.database)
            return keep.matches(event.database, event.table)
        return keep.matches(event.schema.database, event.schema.table)

    def send_all(self, events: Iterable[Event], flush_every: int = 2048) -> None:
        waiting = 0
        for event in events:
            self.send(event)
            waiting += 1
            if waiting >= flush_every:
                self.flush()
                waiting = 0
        self.flush()

    def flush(self) -> None:
        placed: list[Message] = []
        for (_topic, partition), rows in self.pending.items():
            for message in self.encoder.encode(rows):
                placed += self._place(message, partition, _event_ms(rows[-1]))
        self.pending.clear()
        self._emit(placed)

    def close(self) -> None:
        self.flush()
        self.output.close()

    def _emit(self, messages: list[Message]) -> None:
        if messages:
            self.output.write(messages)
            self.sent += len(messages)

    def _topic(self, database: str, table: str) -> str:
        topic = self.router.topic(database, table)
        if topic not in self.topics:
            self.topics.append(topic)
        return topic

    def _place(self, message: Message, partition: int | None, ms: int) -> list[Message]:
        if message.route is Route.ALL_TOPICS:
            topics = self.topics or [self._topic("", "")]
        else:
            topics = [self._topic(message.database, message.table)]
        if message.route is Route.DISPATCH:
            targets: Iterable[int] = (partition or 0,)
        elif message.route is Route.FIRST_PARTITION:
            targets = (0,)
        else:
            targets = range(self.partitions)
        placed = []
        for topic in topics:
            for target in targets:
                slot = (topic, target)
                offset = self.offsets.get(slot, 0)
                self.offsets[slot] = offset + 1
                placed.append(
                    replace(message, topic=topic, partition=target, offset=offset, timestamp=ms)
                )
        return placed


def _event_ms(event: Event) -> int:
    if isinstance(event, Watermark):
        return physical_ms(event.ts)
    if isinstance(event, RowChange | DDLEvent):
        return physical_ms(event.commit_ts)
    return 0


class CaptureStreamOutput:
    """Capture records to one open binary stream (``ticdc-spark encode``)."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream

    def write(self, messages: list[Message]) -> None:
        self.stream.write(b"".join(orjson.dumps(message_to_record(m)) + b"\n" for m in messages))

    def close(self) -> None:
        self.stream.flush()


class CaptureDirOutput:
    """Capture files in a directory, each written whole then renamed into place, so a
    streaming reader never sees half a file.  A new file every ``records_per_file``."""

    def __init__(self, directory: str | Path, records_per_file: int = 5000) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.records_per_file = records_per_file
        self.buffer: list[bytes] = []
        self.files = len(list(self.directory.glob("*.jsonl")))

    def write(self, messages: list[Message]) -> None:
        self.buffer += [orjson.dumps(message_to_record(m)) + b"\n" for m in messages]
        while len(self.buffer) >= self.records_per_file:
            self._write_file(self.buffer[: self.records_per_file])
            self.buffer = self.buffer[self.records_per_file :]

    def close(self) -> None:
        if self.buffer:
            self._write_file(self.buffer)
            self.buffer = []

    def _write_file(self, lines: list[bytes]) -> None:
        name = self.directory / f"capture-{self.files:06d}.jsonl"
        tmp = name.with_suffix(".jsonl.tmp")
        tmp.write_bytes(b"".join(lines))
        os.replace(tmp, name)
        self.files += 1
