"""How the apply stage scales: with the table, with the number of tables, and for DDL.

Each engine (``spark``: Spark SQL MERGE, Delta with deletion vectors, Iceberg merge-on-read;
``embedded``: delta-rs and pyiceberg on the driver) applies, through the sinks ``replicate``
uses, side by side in one run:

* ``updates``: one micro-batch of 20,000 random updates (a sysbench-like table: int key, int
  ``k``, random 120- and 60-character strings) to tables of each ``--rows`` size; the apply
  time and its growth from the smallest table to each larger one.
* ``tables``: the same 20,000 changes over 2 and over ``--tables`` tables (the runner's
  threads, as ``replicate`` applies them): rows/s and the ratio.
* ``ddl``: RENAME COLUMN, DROP COLUMN, ADD COLUMN with a DEFAULT, INT -> BIGINT on each size.

    python benchmarks/apply_scale.py --engines spark embedded --formats delta iceberg \\
        --rows 250000 4000000 --parts updates tables ddl
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ticdc_spark.model import Column, DDLType, Index, TableSchema
from ticdc_spark.pipeline.runner import run_steps
from ticdc_spark.pipeline.steps import DDLStep, TableChanges
from ticdc_spark.sinks import make_sink
from ticdc_spark.sinks.base import TableSink
from ticdc_spark.sinks.convert import typed_rows
from ticdc_spark.types import ColumnType as T

BATCH = 20_000
CHUNK = 1_000_000  # rows written at a time when a table is built
KEY = (Index("PRIMARY", ("id",), primary=True, unique=True),)


def sbtest(name: str) -> TableSchema:
    columns = (
        Column("id", T("int"), nullable=False),
        Column("k", T("int")),
        Column("c", T("char", length=120)),
        Column("pad", T("char", length=60)),
    )
    return TableSchema("bench", name, columns, KEY).with_derived_flags()


def _strings(rng: np.random.Generator, n: int, width: int) -> pa.Array:
    letters = rng.integers(97, 123, size=(n, width), dtype=np.uint8)
    strings = pa.array(letters.view(f"S{width}").ravel())  # (chunked past 16 MiB or so)
    if isinstance(strings, pa.ChunkedArray):
        strings = strings.combine_chunks()
    return strings.cast(pa.string())


def _changes(ids: np.ndarray, commit_ts: int, seed: int, op: str = "update") -> pa.Table:
    """A step's final changes: ``ids`` with random values, as the changelog's text images."""
    rng = np.random.default_rng(seed)
    n = len(ids)
    keys = np.tile(np.array(["id", "k", "c", "pad"], dtype=object), n)
    values = pa.concat_arrays(
        [
            pa.array(ids.astype(str)),
            pa.array(rng.integers(0, 1 << 30, n).astype(str)),
            _strings(rng, n, 120),
            _strings(rng, n, 60),
        ]
    )
    order = np.arange(4 * n).reshape(4, n).T.ravel()  # (interleave the four columns per row)
    images = pa.MapArray.from_arrays(
        pa.array(np.arange(0, 4 * n + 1, 4, dtype=np.int32)), pa.array(keys), values.take(order)
    )
    return pa.table(
        {
            "op": pa.array([op] * n),
            "commit_ts": pa.array(np.full(n, commit_ts, dtype=np.int64)),
            "image": images,
            "key_only": pa.array(np.zeros(n, dtype=bool)),
            "topic": pa.array(["bench"] * n),
            "partition": pa.array(np.zeros(n, dtype=np.int32)),
            "offset": pa.array(np.arange(n, dtype=np.int64)),
            "seq": pa.array(np.zeros(n, dtype=np.int32)),
        }
    )


class Bench:
    """One engine and format: makes its sink and fills its tables."""

    def __init__(self, engine: str, fmt: str, root: Path, spark: Any) -> None:
        self.engine, self.format, self.spark = engine, fmt, spark
        self.root = root / f"{engine}-{fmt}"
        self.root.mkdir(parents=True)
        target = (
            f"delta:{self.root / 'lake'}"
            if fmt == "delta"
            else f"iceberg:sqlite:///{self.root / 'catalog.db'}#file://{self.root / 'wh'}"
        )
        self.sink: TableSink = make_sink(target, "apply-scale", engine, spark)
        self.version = 0

    def next_version(self) -> int:
        self.version += 1
        return self.version

    def build(self, schema: TableSchema, rows: int) -> None:
        """A table of ``rows`` rows (ids 0..rows-1), written by the engine's own writer."""
        self.sink.create(schema)
        key = (schema.database, schema.table)
        if self.engine == "spark":
            self._build_with_spark(key, rows)
            return
        for start in range(0, rows, CHUNK):
            ids = np.arange(start, min(rows, start + CHUNK))
            typed, _ = typed_rows(schema, _changes(ids, 1, seed=start, op="insert"))
            stored = self.sink.arrow_schema(key)
            typed = typed.select([n for n in stored.names if n in typed.column_names])
            self._append(key, typed.cast(pa.schema([stored.field(n) for n in typed.column_names])))

    def _append(self, key: tuple[str, str], rows: pa.Table) -> None:
        """Rows appended by the embedded engine's library (a merge would cost more)."""
        if self.format == "delta":
            from deltalake import write_deltalake

            write_deltalake(str(self.sink.path(key)), rows, mode="append")  # type: ignore[attr-defined]
        else:
            self.sink._table(key).append(rows)
        self.sink._forget(key)  # (written around the sink's open table)

    def _build_with_spark(self, key: tuple[str, str], rows: int) -> None:
        random = "substr(repeat(md5(cast(rand({seed}) as string)), 4), 1, {width})"
        self.spark.range(rows).selectExpr(
            "cast(id as int) id",
            "cast(rand(7) * 1073741824 as int) k",
            f"{random.format(seed=1, width=120)} c",
            f"{random.format(seed=2, width=60)} pad",
            "cast(1 as bigint) _commit_ts",
        ).repartition(max(1, rows // CHUNK)).write.insertInto(self.sink.target(key))  # type: ignore[attr-defined]

    def apply(self, steps: list[Any], threads: int = 1) -> float:
        """Seconds to apply the steps (each its own version), tables at once."""
        versions = [self.next_version() for _ in steps]
        started = time.perf_counter()
        run_steps(
            steps,
            lambda n, s: (
                self.sink.apply_ddl(s, versions[n])
                if isinstance(s, DDLStep)
                else self.sink.apply_rows(s, versions[n])
            ),
            threads,
        )
        return time.perf_counter() - started


def updates(bench: Bench, sizes: list[int], repeat: int) -> dict[int, float]:
    """Median seconds of a 20,000-update micro-batch on a table of each size."""
    out = {}
    for size in sizes:
        schema = sbtest(f"u{size}")
        bench.build(schema, size)
        rng = np.random.default_rng(size)
        times = []
        for r in range(repeat + 1):  # (the first warms the table's caches up: not counted)
            ids = np.unique(rng.integers(0, size, BATCH))
            step = TableChanges("bench", schema.table, schema, _changes(ids, 10 + r, seed=r))
            seconds = bench.apply([step])
            if r:
                times.append(seconds)
        out[size] = statistics.median(times)
        print(
            f"  {bench.engine}/{bench.format} updates on {size:,} rows: {out[size]:.2f} s",
            flush=True,
        )
    return out


def tables(bench: Bench, counts: list[int], threads: int) -> dict[int, float]:
    """Rows/s of 20,000 changes (half updates of existing rows, half inserts) over each
    number of tables of 1,000 rows each."""
    out = {}
    for count in counts:
        schemas = [sbtest(f"t{count}_{i}") for i in range(count)]
        for schema in schemas:
            bench.build(schema, 1_000)
        per = BATCH // count
        warm = _table_steps(schemas, per, 10)
        bench.apply(warm, threads)
        seconds = bench.apply(_table_steps(schemas, per, 11), threads)
        out[count] = BATCH / seconds
        print(
            f"  {bench.engine}/{bench.format} {count} tables: {out[count]:,.0f} rows/s", flush=True
        )
    return out


def _table_steps(schemas: list[TableSchema], per: int, ts: int) -> list[TableChanges]:
    """``per`` changes to each table: 500 updates of its rows, the rest inserts."""
    ids = np.arange(500, 500 + per)
    return [
        TableChanges("bench", s.table, s, _changes(ids, ts, seed=ts + i))
        for i, s in enumerate(schemas)
    ]


DDLS: dict[str, Callable[[TableSchema], tuple[TableSchema, dict[str, str]]]] = {
    "rename column": lambda s: (
        replace(s, columns=(*s.columns[:2], replace(s.columns[2], name="c2"), s.columns[3])),
        {"c2": "c"},
    ),
    "drop column": lambda s: (replace(s, columns=s.columns[:3]), {}),
    "add column default": lambda s: (
        replace(s, columns=(*s.columns, Column("d", T("int"), default="7"))),
        {},
    ),
    "int -> bigint": lambda s: (
        replace(s, columns=(s.columns[0], replace(s.columns[1], type=T("bigint")), *s.columns[2:])),
        {},
    ),
}


def ddl(bench: Bench, sizes: list[int]) -> dict[tuple[str, int], float]:
    """Seconds of each DDL on a table of each size (after one of each on a small table,
    not counted: the first of a kind warms its code paths up)."""
    for name in DDLS:
        _time_ddl(bench, name, 1_000, "warm")
    out = {}
    for size in sizes:
        for name in DDLS:
            seconds = out[(name, size)] = _time_ddl(bench, name, size, "d")
            print(
                f"  {bench.engine}/{bench.format} {name}, {size:,} rows: {seconds:.2f} s",
                flush=True,
            )
    return out


def _time_ddl(bench: Bench, name: str, size: int, prefix: str) -> float:
    schema = sbtest(f"{prefix}{size}_{name.split(maxsplit=1)[0]}")
    bench.build(schema, size)
    after, renamed = DDLS[name](schema)
    step = DDLStep(
        "bench",
        schema.table,
        20,
        name,
        DDLType.MODIFY_COLUMN,
        schema,
        after.with_derived_flags(),
        renamed_columns=renamed,
    )
    return bench.apply([step])


@contextmanager
def workspace(keep: bool) -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="apply-scale-"))
    try:
        yield root
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", nargs="+", default=["spark", "embedded"])
    parser.add_argument("--formats", nargs="+", default=["delta", "iceberg"])
    parser.add_argument("--rows", nargs="+", type=int, default=[250_000, 4_000_000])
    parser.add_argument("--tables", type=int, default=100)
    parser.add_argument("--threads", type=int, default=0, help="0: each engine's default")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--parts", nargs="+", default=["updates", "tables", "ddl"])
    parser.add_argument("--keep", action="store_true", help="keep the tables")
    args = parser.parse_args()
    spark = None
    if "spark" in args.engines:
        from ticdc_spark.spark.session import local_session

        spark = local_session("apply-scale", features=tuple(args.formats))
        spark.sparkContext.setLogLevel("ERROR")
    results: dict[str, dict[str, Any]] = {}
    with workspace(args.keep) as root:
        for engine in args.engines:
            for fmt in args.formats:
                bench = Bench(engine, fmt, root, spark)
                name = f"{engine}/{fmt}"
                threads = args.threads or (8 if engine == "spark" else (4 if fmt == "delta" else 1))
                results[name] = {}
                if "updates" in args.parts:
                    results[name]["updates"] = updates(bench, sorted(args.rows), args.repeat)
                if "tables" in args.parts:
                    results[name]["tables"] = tables(bench, [2, args.tables], threads)
                if "ddl" in args.parts:
                    results[name]["ddl"] = ddl(bench, sorted(args.rows))
    report(results, sorted(args.rows), args.tables)


def report(results: dict[str, dict[str, Any]], sizes: list[int], count: int) -> None:
    print()
    small = sizes[0]
    if any("updates" in r for r in results.values()):
        print(f"20,000 random updates, seconds per micro-batch (growth vs {small:,} rows)")
        print("| engine/format | " + " | ".join(f"{s:,} rows" for s in sizes) + " |")
        print("|---" * (len(sizes) + 1) + "|")
        for name, r in results.items():
            u = r.get("updates")
            if u:
                cells = [f"{u[s]:.2f} ({u[s] / u[small]:.2f}x)" for s in sizes]
                print(f"| {name} | " + " | ".join(cells) + " |")
    if any("tables" in r for r in results.values()):
        print(f"\n20,000 changes over 2 and {count} tables, rows/s")
        print(f"| engine/format | 2 tables | {count} tables | ratio |\n|---|---|---|---|")
        for name, r in results.items():
            t = r.get("tables")
            if t:
                print(f"| {name} | {t[2]:,.0f} | {t[count]:,.0f} | {t[count] / t[2]:.2f}x |")
    if any("ddl" in r for r in results.values()):
        print(f"\nDDL, seconds (growth vs {small:,} rows)")
        print("| engine/format | DDL | " + " | ".join(f"{s:,} rows" for s in sizes) + " |")
        print("|---" * (len(sizes) + 2) + "|")
        for name, r in results.items():
            d = r.get("ddl")
            for ddl_name in DDLS if d else ():
                cells = [
                    f"{d[(ddl_name, s)]:.2f} ({d[(ddl_name, s)] / d[(ddl_name, small)]:.2f}x)"
                    for s in sizes
                ]
                print(f"| {name} | {ddl_name} | " + " | ".join(cells) + " |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
