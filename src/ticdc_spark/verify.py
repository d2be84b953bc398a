"""Expected table states, and comparing target tables with them.

``produce`` writes, next to the messages, what every upstream table must hold once all of it
is applied: one JSON Lines file per table of rows in the normalized text form, and
``_schemas.json`` with each table's columns.  ``verify`` reads a sink's live rows and compares
them with that, value by value, after converting both to the target types.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ticdc_spark.model import TableSchema, schema_from_json, schema_json
from ticdc_spark.normalized import image_to_text
from ticdc_spark.types import Family, parse_time

__all__ = ["TableReport", "compare_tables", "load_expected", "verify_sink", "write_expected"]

TableKey = tuple[str, str]
SCHEMAS_FILE = "_schemas.json"


def write_expected(
    directory: str | Path,
    schemas: Mapping[str, TableSchema],
    state: Mapping[str, Mapping[Any, Mapping[str, Any]]],
) -> None:
    """Write the expected final rows (canonical values) of every table."""
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    index = []
    for name, schema in sorted(schemas.items()):
        file_name = f"{schema.database}.{schema.table}.jsonl"
        index.append(
            {
                "database": schema.database,
                "table": schema.table,
                "file": file_name,
                "schema": schema_json(schema),
            }
        )
        with open(root / file_name, "wb") as out:
            for row in state.get(name, {}).values():
                out.write(orjson.dumps(image_to_text(schema, row)) + b"\n")
    (root / SCHEMAS_FILE).write_bytes(orjson.dumps(index, option=orjson.OPT_INDENT_2))


ExpectedTable = tuple[TableSchema, list[dict[str, Any]]]


def load_expected(directory: str | Path) -> dict[TableKey, ExpectedTable]:
    """Read what :func:`write_expected` wrote: table -> (schema, rows as text)."""
    root = Path(directory)
    out = {}
    for entry in orjson.loads((root / SCHEMAS_FILE).read_bytes()):
        key = (entry["database"], entry["table"])
        schema = schema_from_json(entry["schema"], *key)
        lines = (root / entry["file"]).read_bytes().splitlines()
        out[key] = (schema, [orjson.loads(line) for line in lines if line.strip()])
    return out


@dataclass
class TableReport:
    """How one table compares with its expected rows."""

    database: str
    table: str
    expected: int = 0
    actual: int = 0
    missing: list[Any] = field(default_factory=list)  # keys expected but absent
    extra: list[Any] = field(default_factory=list)  # keys present but not expected
    different: list[tuple[Any, str, Any, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.missing or self.extra or self.different)

    def summary(self) -> str:
        head = f"{self.database}.{self.table}: {self.actual}/{self.expected} rows"
        if self.ok:
            return head + " ok"
        return (
            f"{head}; missing {len(self.missing)}, extra {len(self.extra)}, "
            f"different {len(self.different)} (first: "
            f"{(self.missing or self.extra or self.different)[:3]})"
        )


def compare_tables(expected: ExpectedTable, actual: Any) -> TableReport:
    """Compare expected text rows with a table's live rows (a pyarrow Table or None)."""
    import pyarrow as pa

    from ticdc_spark.sinks.convert import convert_column

    schema, rows = expected
    report = TableReport(schema.database, schema.table, expected=len(rows))
    columns = {}
    for column in schema.columns:
        text = pa.array([r.get(column.name) for r in rows], pa.string())
        columns[column.name], _ = convert_column(column.type, text)
    want = _by_key(schema, pa.table(columns) if rows else None)
    have = _by_key(schema, actual)
    report.actual = len(have)
    report.missing = sorted(set(want) - set(have), key=repr)[:20]
    report.extra = sorted(set(have) - set(want), key=repr)[:20]
    # TIME is kept as text: compared by value, as a protocol may not carry its fsp (Debezium)
    times = {c.name for c in schema.columns if c.type.family is Family.TIME}
    for key in set(want) & set(have):
        for name, value in want[key].items():
            got = have[key].get(name)
            if got != value and not (name in times and _same_time(value, got)):
                report.different.append((key, name, value, got))
    report.different = sorted(report.different, key=repr)[:20]
    return report


def _same_time(left: Any, right: Any) -> bool:
    if not isinstance(left, str) or not isinstance(right, str):
        return False
    try:
        return parse_time(left) == parse_time(right)
    except ValueError:
        return False


def _by_key(schema: TableSchema, table: Any) -> dict[Any, dict[str, Any]]:
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
    from ticdc_spark.sinks.base import live

    reports = []
    for key, expected in sorted(load_expected(expected_dir).items()):
        actual = live(sink.read(key)) if sink.exists(key) else None
        reports.append(compare_tables(expected, actual))
    return reports
