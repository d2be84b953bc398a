"""Expected table states: what every upstream table must hold once all of a workload is
applied.

:func:`~ticdc_spark.testing.produce.produce_workload` writes, next to the messages, one JSON
Lines file per table of rows in the normalized text form, and ``_schemas.json`` with each
table's columns; :mod:`.verify` reads them back to compare a sink's tables with them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from ticdc_spark.model import TableSchema, schema_from_json, schema_json
from ticdc_spark.normalized import image_to_text

__all__ = ["ExpectedTable", "TableKey", "load_expected", "write_expected"]

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
