"""The bundled sample captures, ``src/ticdc_spark/samples/<protocol>.capture.jsonl``, made by
this project's own encoders from the workload generator: 40 row changes of a sysbench-like
and an all-types table (inserts, updates, deletes), their CREATE TABLEs and watermarks, as
TiCDC sends them to 3 partitions of a topic per schema, with TiCDC's index-value dispatcher.
Every encoder's clock is pinned, so the bytes depend on nothing but this file.

    python tests/sample_captures.py          # rewrites the five files

Each one decodes with ``ticdc-spark sample -p P | ticdc-spark decode -p P``, no options
(tests/test_samples.py runs that line), since each is written with what carries its values:

* Canal-JSON and Debezium with ``enable-tidb-extension=true`` (Canal-JSON's commit ts and
  watermarks; Debezium's ``tidb_type``, without which a BIGINT UNSIGNED past 2^63-1 reads
  back negative); the decoders read those from the messages, whatever their options;
* Avro with the TiDB extension too, a topic per table (its subjects follow the topic), and
  its schemas: the capture starts with the records a Confluent Schema Registry keeps in its
  topic ``_schemas`` for them (:mod:`ticdc_spark.codec.avro.schemas_topic`), which the Avro
  decoder learns from when no ``--schema-registry`` is given;
* Open Protocol and Simple (JSON, with its BOOTSTRAP messages) with TiCDC's defaults.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

from ticdc_spark.codec import make_encoder
from ticdc_spark.codec.avro.schemas_topic import schema_record
from ticdc_spark.dispatch import TopicRouter, make_dispatcher
from ticdc_spark.io.capture import write_capture
from ticdc_spark.io.producer import CaptureStreamOutput, Producer
from ticdc_spark.testing.workload import Workload

SAMPLES = Path(__file__).parent.parent / "src" / "ticdc_spark" / "samples"
START_MS = 1_700_000_000_000  # (the workload's clock, and every encoder's)
_EXTENSION = {"enable-tidb-extension": "true"}
_REGISTRY = "mock://ticdc-spark-samples"

# protocol -> (encoder options, topic expression)
PROTOCOLS: dict[str, tuple[dict[str, str], str]] = {
    "open-protocol": ({}, "ticdc-{schema}"),
    "canal-json": (_EXTENSION, "ticdc-{schema}"),
    "debezium": (_EXTENSION, "ticdc-{schema}"),
    "simple": ({}, "ticdc-{schema}"),
    "avro": ({**_EXTENSION, "schema-registry": _REGISTRY}, "ticdc-{schema}-{table}"),
}


def make(protocol: str) -> bytes:
    """The sample capture of ``protocol``, as bytes."""
    options, topic = PROTOCOLS[protocol]
    encoder = make_encoder(protocol, options)
    if hasattr(encoder, "clock"):
        encoder.clock = lambda: START_MS
    out = io.BytesIO()
    producer = Producer(
        encoder,
        CaptureStreamOutput(out),
        router=TopicRouter(topic),
        dispatcher=make_dispatcher("index-value"),
        partitions=3,
    )
    workload = Workload(seed=7, rows=40, tables=2, start_ms=START_MS, watermark_every=16)
    producer.send_all(workload.events())
    producer.close()
    if protocol == "avro":  # (the schemas its records name go first, as a registry has them)
        return _registry_records() + out.getvalue()
    return out.getvalue()


def _registry_records() -> bytes:
    """The ``_schemas`` records of every schema in the samples' registry, in id order."""
    from ticdc_spark.codec.avro.registry import registry

    client = registry(_REGISTRY)._client
    found = [
        (schema.schema_id, subject, version, schema.schema.schema_str)
        for subject in client.get_subjects()
        for version in client.get_versions(subject)
        for schema in [client.get_version(subject, version)]
    ]
    records = [schema_record(s, v, i, text) for i, s, v, text in sorted(found)]
    for offset, record in enumerate(records):
        record.partition, record.offset, record.timestamp = 0, offset, START_MS
    out = io.BytesIO()
    write_capture(records, out)
    return out.getvalue()


def main() -> None:
    for protocol in PROTOCOLS:
        path = SAMPLES / f"{protocol}.capture.jsonl"
        path.write_bytes(make(protocol))
        print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
