"""Codec throughput beside the parse-only floor of the same bytes.

For each protocol and table shape (sysbench-like, all-types) it encodes a fixed workload and
decodes the messages, and times ``orjson.loads`` over the JSON documents of those same messages
(the decode floor) and ``orjson.dumps`` of the parsed documents (the encode floor).  The ratio
column is floor time / codec time: 1.0 would mean the protocol logic is free, 0.5 that it
costs as much as the parsing.  Simple-Avro holds no JSON: its floors are fastavro's
``schemaless_writer`` of the same records prepared beforehand (values already converted to
fastavro's union notation), and ``schemaless_reader`` of the same messages.  Times are CPU
time of the benchmark's thread.  Run it as::

    python benchmarks/codec_bench.py [--rows 20000] [--repeat 3] [--python] [--only debezium]

``--python`` keeps the codecs' compiled loops (``ticdc_spark.codec.compiled``) out of use, to
see what they buy.  Machines here are noisy: compare the ratios, measured side by side in
one run.
"""

from __future__ import annotations

import argparse
import gc
import io
import struct
import time
from collections.abc import Callable
from typing import Any

import fastavro
import orjson

from ticdc_spark.codec import Message, compiled, make_decoder, make_encoder
from ticdc_spark.codec.simple import avro as simple_avro
from ticdc_spark.codec.simple.dialect import avro_dialect
from ticdc_spark.model import RowChange, RowKind, TableSchema
from ticdc_spark.testing.workload import Workload, alltypes_schema, sbtest_schema

# (row label, protocol, options)
PROTOCOLS: list[tuple[str, str, dict[str, str]]] = [
    ("open-protocol", "open-protocol", {}),
    ("canal-json", "canal-json", {"enable-tidb-extension": "true"}),
    ("debezium", "debezium", {}),
    ("debezium-noschema", "debezium", {"debezium-disable-schema": "true"}),
    # (the TiDB extension's tidb_type says DECIMAL: those tables' numbers are read exactly)
    ("debezium-tidb", "debezium", {"enable-tidb-extension": "true"}),
    ("simple", "simple", {}),
    ("simple-avro", "simple", {"encoding-format": "avro"}),  # (no JSON: fastavro is its floor)
]


def rows_for(schema: TableSchema, count: int) -> list[RowChange]:
    """``count`` row changes of one table from the deterministic workload."""
    workload = Workload(seed=7, rows=count * 3, tables=2)
    wanted = "sbtest" if schema.table.startswith("sbtest") else "alltypes"
    rows = [e for e in workload.events() if isinstance(e, RowChange) and e.table.startswith(wanted)]
    return rows[:count]


def json_documents(protocol: str, messages: list[Message]) -> list[bytes]:
    """The JSON texts inside the messages: what a parse-only consumer would load."""
    if protocol == "debezium":  # (its decoder reads the key's JSON too: the key columns)
        return [d for m in messages for d in (m.key, m.value) if d]
    if protocol == "simple":  # the row messages (not the bootstraps); Avro holds no JSON
        return [m.value for m in messages if m.value and m.rows and m.value[:1] == b"{"]
    if protocol != "open-protocol":
        return [m.value for m in messages if m.value]
    docs = []
    for message in messages:
        for data, start in ((message.key or b"", 8), (message.value or b"", 0)):
            pos = start
            while pos < len(data):
                (length,) = struct.unpack_from(">Q", data, pos)
                if length:
                    docs.append(data[pos + 8 : pos + 8 + length])
                pos += 8 + length
    return docs


def _drain(results: Any) -> None:
    for _ in results:
        pass


def best_of(repeat: int, funcs: dict[str, Callable[[], Any]]) -> dict[str, float]:
    """Each function's least CPU time of this thread over ``repeat`` rounds, the functions
    taking turns within a round (the machine's noise then hits a codec and its floor alike;
    on a machine shared with other work, wall time would count their turns too)."""
    best = dict.fromkeys(funcs, float("inf"))
    for _ in range(repeat):
        for name, func in funcs.items():
            gc.collect()
            start = time.thread_time()
            func()
            best[name] = min(best[name], time.thread_time() - start)
    return best


def simple_avro_records(rows: list[RowChange], build_ts: int) -> list[Any]:
    """The Simple-Avro messages of ``rows`` as fastavro's records, values already converted by
    the Avro dialect (fastavro's ``(branch, value)`` union notation): what the encoder would
    hand fastavro if fastavro wrote the messages."""
    values = avro_dialect("UTC")
    records = []
    for row in rows:
        encoders = {c.name: values.encoder(c.type) for c in row.schema.columns}

        def image(values: dict[str, Any] | None, encoders: dict[str, Any] = encoders) -> Any:
            if values is None:
                return None
            ordered = sorted(values.items(), key=lambda item: item[0].encode())
            return {name: None if v is None else encoders[name](v) for name, v in ordered}

        payload = {"version": 1, "database": row.database, "table": row.table}
        payload.update(tableID=row.schema.table_id, type=row.kind.value, commitTs=row.commit_ts)
        payload.update(buildTs=build_ts, schemaVersion=row.schema.version)
        payload.update(claimCheckLocation=None, handleKeyOnly=None, checksum=None)
        payload["data"] = None if row.kind is RowKind.DELETE else image(row.after)
        payload["old"] = None if row.kind is RowKind.INSERT else image(row.before)
        message = {"type": "DML", "payload": ("com.pingcap.simple.avro.DML", payload)}
        records.append(("com.pingcap.simple.avro.Message", message))
    return records


def fastavro_floors(
    rows: list[RowChange], messages: list[Message], repeat: int
) -> tuple[float, float]:
    """Seconds for fastavro to write the rows' prepared records and to read the messages."""
    schema = simple_avro.SCHEMA
    records = simple_avro_records(rows, 1795533857970)
    values = [m.value for m in messages if m.rows]

    def write() -> None:
        for record in records:
            fastavro.schemaless_writer(io.BytesIO(), schema, record)

    def read() -> None:
        for value in values:
            fastavro.schemaless_reader(io.BytesIO(value), schema, None)

    best = best_of(repeat, {"write": write, "read": read})
    return best["write"], best["read"]


def measure(
    protocol: str, options: dict[str, str], rows: list[RowChange], repeat: int
) -> dict[str, float]:
    encoder = make_encoder(protocol, options)
    messages = encoder.encode(rows)
    decoder = make_decoder(protocol, options)
    docs = json_documents(protocol, messages)
    parsed = [orjson.loads(d) for d in docs]
    size = sum(m.size for m in messages)
    events = sum(isinstance(e, RowChange) for m in messages for e in decoder.decode(m))
    assert events == len(rows), (events, len(rows))

    # Results are dropped as they come (no list of them): keeping 20,000 parsed documents alive
    # makes the garbage collector slow every side down, the floor most of all.
    rows_only = [m for m in messages if m.rows]  # (Simple: its decoder holds the schemas)
    best = best_of(
        repeat,
        {
            "encode": lambda: encoder.encode(rows),
            "dumps": lambda: _drain(orjson.dumps(p) for p in parsed),
            "decode": lambda: _drain(decoder.decode(m) for m in rows_only),
            "loads": lambda: _drain(orjson.loads(d) for d in docs),
        },
    )
    encode, dumps, decode, loads = (best[k] for k in ("encode", "dumps", "decode", "loads"))
    if protocol == "simple" and options.get("encoding-format") == "avro":
        # (no JSON: fastavro writing and reading the same records are the floors)
        dumps, loads = fastavro_floors(rows, messages, repeat)
    return {
        "messages": len(messages),
        "rows": len(rows),
        "mb": size / 1e6,
        "encode_s": encode,
        "decode_s": decode,
        "loads_s": loads,
        "dumps_s": dumps,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", help="the protocols whose name starts with this")
    parser.add_argument("--python", action="store_true", help="the Python loops only")
    args = parser.parse_args()
    if args.python:
        for module in compiled.users():
            module.compiled_values = None  # type: ignore[attr-defined]
    print(f"codecs' compiled loops: {'off' if args.python else compiled.native()}")

    header = (
        f"{'protocol':<17} {'table':<9} {'rows':>6} {'msgs':>6} {'MB':>6} | "
        f"{'enc rows/s':>10} {'enc MB/s':>8} {'dumps MB/s':>10} {'ratio':>5} | "
        f"{'dec rows/s':>10} {'dec MB/s':>8} {'loads MB/s':>10} {'ratio':>5}"
    )
    print(header)
    print("-" * len(header))
    totals: dict[str, list[float]] = {}
    for table, schema in (("sysbench", sbtest_schema()), ("alltypes", alltypes_schema())):
        rows = rows_for(schema, args.rows)
        for label, protocol, options in PROTOCOLS:
            if args.only and not label.startswith(args.only):
                continue
            r = measure(protocol, options, rows, args.repeat)
            for floor in ("loads_s", "dumps_s"):  # (none for Avro: shown as 0)
                r[floor] = max(r[floor], 1e-12) if r["mb"] else r[floor]
            acc = totals.setdefault(label, [0.0, 0.0, 0.0, 0.0])
            for i, k in enumerate(("encode_s", "dumps_s", "decode_s", "loads_s")):
                acc[i] += r[k]
            print(
                f"{label:<17} {table:<9} {r['rows']:>6} {r['messages']:>6} {r['mb']:>6.1f} | "
                f"{r['rows'] / r['encode_s']:>10,.0f} {r['mb'] / r['encode_s']:>8.1f} "
                f"{r['mb'] / r['dumps_s']:>10.1f} {r['dumps_s'] / r['encode_s']:>5.2f} | "
                f"{r['rows'] / r['decode_s']:>10,.0f} {r['mb'] / r['decode_s']:>8.1f} "
                f"{r['mb'] / r['loads_s']:>10.1f} {r['loads_s'] / r['decode_s']:>5.2f}"
            )
    print()
    print("whole workload (both tables): ratio = floor time / codec time")
    for label, (enc, dumps, dec, loads) in totals.items():
        print(f"  {label:<17} encode {dumps / enc:.2f}   decode {loads / dec:.2f}")


if __name__ == "__main__":
    main()
