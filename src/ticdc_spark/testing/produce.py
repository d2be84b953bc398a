"""The workload producer: a workload's events sent as TiCDC would send them, to Kafka or a
capture directory (the product's :class:`~ticdc_spark.io.producer.Producer`), and the final
state every table must reach, as the protocol carries it (:mod:`.expected`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ticdc_spark.codec import get_codec, make_encoder
from ticdc_spark.dispatch import TopicRouter, make_dispatcher
from ticdc_spark.filter import TableFilter
from ticdc_spark.io.kafka import KafkaProducerSink, is_kafka_uri, parse_kafka_uri, redact
from ticdc_spark.io.producer import CaptureDirOutput, Output, Producer
from ticdc_spark.model import DDLEvent, Event, RowChange, TableSchema
from ticdc_spark.testing.expected import write_expected

__all__ = ["ProduceResult", "produce_workload"]


@dataclass
class ProduceResult:
    messages: int
    rows: int
    ddl: int
    destination: str  # where they went, credentials masked


def produce_workload(
    workload: Any,
    protocol: str,
    options: dict[str, str],
    to: str,
    *,
    expected: str | Path | None = None,
    topic: str = "ticdc_{schema}",
    partitions: int = 3,
    dispatcher: str = "index-value",
    kafka_config: dict[str, Any] | None = None,
    events: Iterable[Event] | None = None,
    table_filter: TableFilter | None = None,
) -> ProduceResult:
    """Send a workload's events to Kafka (``kafka://HOST:PORT``) or a capture directory, and
    write its expected final state.  With ``table_filter``, the tables it filters out are
    neither sent nor in the expected state."""
    router = TopicRouter(topic)
    tables = [s for s in workload.table_schemas() if _kept(table_filter, s)]
    topics = sorted({router.topic(s.database, s.table) for s in tables})
    producer = Producer(
        make_encoder(protocol, options),
        _output(to, topics, partitions, kafka_config),
        router=router,
        dispatcher=make_dispatcher(dispatcher),
        partitions=partitions,
        topics=topics,
        table_filter=table_filter,
    )
    rows, ddl = _send(producer, workload.events() if events is None else events)
    if expected is not None:
        schemas = {n: s for n, s in workload.final_schemas().items() if _kept(table_filter, s)}
        write_expected(expected, schemas, _carried_state(protocol, schemas, workload))
    return ProduceResult(producer.sent, rows, ddl, redact(to))


def _kept(table_filter: TableFilter | None, schema: TableSchema) -> bool:
    return table_filter is None or table_filter.matches(schema.database, schema.table)


def _send(producer: Producer, events: Iterable[Event]) -> tuple[int, int]:
    """Send every event, then close; the row changes and DDL sent (those the filter kept)."""
    rows = ddl = 0
    for event in events:
        if producer.keeps(event):
            rows += isinstance(event, RowChange)
            ddl += isinstance(event, DDLEvent)
        producer.send(event)
    producer.close()
    return rows, ddl


def _carried_state(protocol: str, schemas: dict[str, Any], workload: Any) -> Any:
    """The workload's final state as the protocol carries it (its values that travel lossily,
    such as Debezium's DECIMAL as a double, as a consumer gets them back)."""
    state = workload.final_state()
    view = get_codec(protocol).carried
    if view is None:
        return state
    out = {}
    for name, rows in state.items():
        schema = schemas.get(name)
        if schema is None:
            continue
        views = {c.name: view(c.type) for c in schema.columns}
        out[name] = {
            key: {col: views[col](v) if col in views else v for col, v in row.items()}
            for key, row in rows.items()
        }
    return out


def _output(
    to: str, topics: list[str], partitions: int, kafka_config: dict[str, Any] | None
) -> Output:
    """Kafka (its topics created) for a ``kafka://`` URI, else a capture directory."""
    if not is_kafka_uri(to):
        return CaptureDirOutput(to)
    servers, _topics, extra = parse_kafka_uri(to)
    sink = KafkaProducerSink(servers, extra, kafka_config)
    sink.create_topics(topics, partitions)
    return sink
