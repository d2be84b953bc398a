"""Coverage-guided fuzzing of the compiled Canal-JSON scanner (``_canal_scan``) on untrusted
bytes, with atheris; run by ``.ci/sanitizers`` against the ASan/UBSan build.

Each input is up to eight Kafka message values separated by ``\\x1e`` (a lone ``\\x00`` is a
null value), so that what one message leaves in the batch (shape numbers, the last column
names) meets the next.  Per input:

* ``_canal_scan.scan`` over the Arrow column must return (or, with sound offsets, never raise),
  and every buffer it returns must be consistent with its message count;
* the decode stage's Arrow path (the scanner plus its Python side) must give exactly the
  changelog of the careful Python decoder whenever it returns one: the rows the scanner
  claims as fast are the careful decoder's rows.

Seeds are real Canal-JSON messages (TiCDC's, with and without the ``_tidb`` extension, and the
same rows re-spelled as other JSON writers spell them).  Besides libFuzzer's byte mutations,
a custom mutator edits messages as JSON: values of other types, keys renamed or dropped,
rows added or emptied, escapes, numbers at the edges of int64.

GCC (this project's compiler) cannot emit the edge coverage libFuzzer reads from C code, so
coverage here is the Python decoder's (atheris instruments it) plus the structural mutator;
the C code runs under the sanitizers, which turn any memory or undefined-behaviour error into
a crash.  Run as::

    python tests/fuzz/fuzz_canal_scan.py [libFuzzer flags, e.g. -max_total_time=90] [corpus]
    python tests/fuzz/fuzz_canal_scan.py --replay   # the seeds once, without atheris
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

import orjson

SEPARATOR = b"\x1e"
OPTIONS = {"enable-tidb-extension": "true"}
KEYS = ["id", "database", "table", "pkNames", "isDdl", "type", "es", "ts", "sql", "sqlType"]
KEYS += ["mysqlType", "old", "data", "_tidb", "commitTs", "onlyHandleKey", "claimCheckLocation"]
ODD_VALUES: list[Any] = [None, True, False, 0, -1, 1.5, 1e300, -(2**63), 2**63, 2**64, "", "x"]
ODD_VALUES += ["\u00e9\u4e2d\U0001f600", '"\\', "\u2028", "9" * 40, [], {}, [None], {"a": 1}]
ODD_VALUES += ["INSERT", "UPDATE", "DELETE", "QUERY", "TIDB_WATERMARK", "BOOTSTRAP"]


def seeds() -> list[bytes]:
    """Real messages: TiCDC's for both workload tables, and re-spelled rows."""
    from ticdc_spark.codec import make_encoder
    from ticdc_spark.testing.workload import Workload

    out: list[bytes] = []
    for options in (OPTIONS, {}):
        encoder = make_encoder("canal-json", options)
        events = list(Workload(seed=5, rows=40, tables=2).events())
        out += [m.value for m in encoder.encode(events) if m.value]
    for value in out[:30]:
        obj = orjson.loads(value)
        out.append(json.dumps(obj).encode())  # spaces, \\u escapes
        obj.pop("_tidb", None)
        out.append(json.dumps(obj, indent=1).encode())  # newlines; the commit ts from es
    return out


def split(data: bytes) -> list[bytes | None]:
    return [None if part == b"\x00" else part for part in data.split(SEPARATOR)[:8]]


def check_scan(values: list[bytes | None]) -> None:
    """The raw scanner on the column: no error, and buffers of the right sizes."""
    import numpy as np
    import pyarrow as pa

    from ticdc_spark import _canal_scan  # type: ignore[attr-defined]

    column = pa.array(values, pa.binary())
    _, offsets, data = column.buffers()
    n = len(values)
    out = _canal_scan.scan(data if data is not None else b"", np.frombuffer(offsets, np.int32))
    assert len(out.slow) == len(out.ops) == len(out.key_only) == n
    assert len(out.commit_ts) == 8 * n and len(out.shape_ids) == 4 * n
    for image in (out.before, out.after):
        assert len(image.map_offsets) == 4 * (n + 1) and len(image.nulls) == n
        entries = np.frombuffer(image.map_offsets, np.int32)
        assert (np.diff(entries) >= 0).all() and entries[-1] == len(image.key_offsets) // 4 - 1
        assert len(image.key_offsets) == len(image.value_offsets)


def check_decode(values: list[bytes | None]) -> None:
    """The Arrow path's changelog, when it gives one, is the careful decoder's."""
    import pyarrow as pa

    from ticdc_spark.codec import make_decoder
    from ticdc_spark.pipeline.changelog import arrow_schema
    from ticdc_spark.spark.decode import _UNFIT, _Records, decode_batches

    batch = pa.RecordBatch.from_pydict(
        {
            "key": pa.nulls(len(values), pa.binary()),
            "value": pa.array(values, pa.binary()),
            "topic": pa.array(["cdc"] * len(values), pa.string()),
            "partition": pa.array([0] * len(values), pa.int32()),
            "offset": pa.array(range(len(values)), pa.int64()),
        }
    )
    decoder = make_decoder("canal-json", OPTIONS)
    records = _Records(batch, decoder, False)
    try:
        fast = decoder.decode_arrow_batch(batch, records.decode_one, records.builder)
    except _UNFIT:  # a careful row no changelog column holds: the stage falls back, as here
        return
    careful = decode_batches(iter([batch]), "canal-json", OPTIONS, compiled=False)
    schema = arrow_schema()
    expected = pa.Table.from_batches(list(careful), schema=schema).to_pylist()
    assert pa.Table.from_batches([fast], schema=schema).to_pylist() == expected


def one_input(data: bytes) -> None:
    values = split(data)
    check_scan(values)
    check_decode(values)


def mutate_json(obj: Any, rnd: random.Random) -> Any:
    """One structural edit somewhere in a parsed message."""
    if isinstance(obj, dict) and obj and rnd.random() < 0.7:
        key = rnd.choice(list(obj))
        action = rnd.randrange(4)
        if action == 0:
            del obj[key]
        elif action == 1:
            obj[rnd.choice(KEYS)] = obj.pop(key)
        elif action == 2:
            obj[key] = rnd.choice(ODD_VALUES)
        else:
            obj[key] = mutate_json(obj[key], rnd)
        return obj
    if isinstance(obj, list) and obj and rnd.random() < 0.7:
        i = rnd.randrange(len(obj))
        action = rnd.randrange(3)
        if action == 0:
            obj.append(obj[i])
        elif action == 1:
            del obj[i]
        else:
            obj[i] = mutate_json(obj[i], rnd)
        return obj
    return rnd.choice(ODD_VALUES)


def dump(obj: Any, rnd: random.Random) -> bytes:
    if rnd.random() < 0.5:
        return orjson.dumps(obj)
    return json.dumps(
        obj, ensure_ascii=rnd.random() < 0.5, indent=rnd.choice([None, 0, 2])
    ).encode()


def make_mutator(corpus: list[bytes]) -> Any:
    import atheris

    def mutator(data: bytes, max_size: int, seed: int) -> bytes:
        rnd = random.Random(seed)
        if rnd.random() < 0.4:
            return atheris.Mutate(data, max_size)
        parts = data.split(SEPARATOR)
        i = rnd.randrange(len(parts))
        try:
            parts[i] = dump(mutate_json(orjson.loads(parts[i]), rnd), rnd)
        except (orjson.JSONDecodeError, TypeError, ValueError, OverflowError):
            parts[i] = rnd.choice(corpus)
        if rnd.random() < 0.2 and len(parts) < 8:
            parts.insert(rnd.randrange(len(parts) + 1), rnd.choice(corpus))
        return SEPARATOR.join(parts)[:max_size]

    return mutator


def main() -> None:
    if "--replay" in sys.argv:
        corpus = seeds()
        for value in corpus:
            one_input(value)
        one_input(SEPARATOR.join(corpus[:8]))
        print(f"replayed {len(corpus) + 1} inputs")
        return
    import atheris

    # before anything imports the package: atheris instruments modules as they are imported
    with atheris.instrument_imports(include=["ticdc_spark"]):
        import ticdc_spark.codec.canal_json
        import ticdc_spark.codec.canal_json.arrow
        import ticdc_spark.spark.decode  # noqa: F401

    corpus = seeds()
    directories = [Path(a) for a in sys.argv[1:] if not a.startswith("-")]
    for directory in directories[:1]:  # libFuzzer's first corpus directory gets the seeds
        directory.mkdir(parents=True, exist_ok=True)
        if not any(directory.iterdir()):
            for i, value in enumerate(corpus):
                (directory / f"seed-{i:03}").write_bytes(value)
    atheris.Setup(sys.argv, one_input, custom_mutator=make_mutator(corpus))
    atheris.Fuzz()


if __name__ == "__main__":
    main()
