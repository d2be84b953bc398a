"""Comparing target tables with an expected state (:mod:`.expected`): a sink's live rows
and the expected rows, value by value, after converting both to the target types."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from ticdc_spark.model import TableSchema
from ticdc_spark.sinks.base import TableSink, live
from ticdc_spark.sinks.convert import convert_column
from ticdc_spark.storage import StorageOptions
from ticdc_spark.testing.expected import ExpectedTable, load_expected
from ticdc_spark.types import Family, parse_time

__all__ = ["TableReport", "compare_tables", "verify_sink"]


SAMPLE = 3  # the rows a summary shows of each kind of difference


@dataclass
class TableReport:
    """How one table compares with its expected rows: every difference counted, and a few
    kept to show (a summary must not pass off the length of its sample as the count)."""

    database: str
    table: str
    expected: int = 0
    actual: int = 0
    missing: list[Any] = field(default_factory=list)  # keys expected but absent
    extra: list[Any] = field(default_factory=list)  # keys present but not expected
    # (key, column, expected, actual) of the values that differ, every one
    different: list[tuple[Any, str, Any, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.missing or self.extra or self.different)

    @property
    def different_rows(self) -> int:
        """How many rows hold a value that differs."""
        return len({key for key, *_ in self.different})

    def summary(self) -> str:
        head = f"{self.database}.{self.table}: {self.actual}/{self.expected} rows"
        if self.ok:
            return head + " ok"
        parts = [
            f"missing {len(self.missing)}",
            f"extra {len(self.extra)}",
            f"different {self.different_rows} ({len(self.different)} values)",
        ]
        return f"{head}; {', '.join(parts)}{self._samples()}"

    def _samples(self) -> str:
        shown = [
            f"{what} {items[:SAMPLE]}"
            for what, items in (
                ("missing keys", self.missing),
                ("extra keys", self.extra),
                ("different (key, column, expected, actual)", self.different),
            )
            if items
        ]
        return "; first " + "; ".join(shown) if shown else ""


def compare_tables(expected: ExpectedTable, actual: pa.Table | None) -> TableReport:
    """Compare expected text rows with a table's live rows (None: no table)."""
    schema, rows = expected
    report = TableReport(schema.database, schema.table, expected=len(rows))
    columns: dict[str, pa.Array] = {}
    for column in schema.columns:
        text = pa.array([r.get(column.name) for r in rows], pa.string())
        columns[column.name], _ = convert_column(column.type, text)
    want = _by_key(schema, pa.table(columns) if rows else None)
    have = _by_key(schema, actual)
    report.actual = len(have)
    report.missing = sorted(set(want) - set(have), key=repr)
    report.extra = sorted(set(have) - set(want), key=repr)
    # TIME is kept as text: compared by value, as a protocol may not carry its fsp (Debezium)
    times = {c.name for c in schema.columns if c.type.family is Family.TIME}
    for key in set(want) & set(have):
        for name, value in want[key].items():
            got = have[key].get(name)
            if got != value and not (name in times and _same_time(value, got)):
                report.different.append((key, name, value, got))
    report.different = sorted(report.different, key=repr)
    return report


def _same_time(left: Any, right: Any) -> bool:
    if not isinstance(left, str) or not isinstance(right, str):
        return False
    try:
        return parse_time(left) == parse_time(right)
    except ValueError:
        return False


def _by_key(schema: TableSchema, table: pa.Table | None) -> dict[Any, dict[str, Any]]:
    if table is None or not table.num_rows:
        return {}
    keys = list(schema.handle_key) or list(schema.column_names)
    names = [c.name for c in schema.columns if c.name in table.column_names]
    out = {}
    for row in table.select(names).to_pylist():
        out[tuple(row.get(k) for k in keys)] = row
    return out


def verify_sink(sink: Any, expected_dir: str | Path) -> list[TableReport]:
    """Compare every expected table with the sink's live rows."""
    reports = []
    for key, expected in sorted(load_expected(expected_dir).items()):
        actual = live(sink.read(key)) if sink.exists(key) else None
        reports.append(compare_tables(expected, actual))
    return reports


def target_sink(
    target: str, engine: str | None = None, storage: StorageOptions | None = None
) -> TableSink:
    """A sink to read a target's tables as ``engine`` wrote them (by default spark: through
    a local Spark session with the format's jars, and S3A's for tables on ``s3://``)."""
    from ticdc_spark.sinks import make_sink
    from ticdc_spark.spark.jars import engine_features
    from ticdc_spark.spark.session import local_session
    from ticdc_spark.storage.hadoop import s3a_settings

    engine = engine or "spark"
    storage = storage or StorageOptions.from_environment()
    features = engine_features(target, engine)
    spark = None
    if features:
        settings = s3a_settings(features, storage)
        spark = local_session("ticdc-spark verify", features=features, settings=settings)
        spark.sparkContext.setLogLevel("ERROR")
    return make_sink(target, engine=engine, spark=spark, storage=storage)
