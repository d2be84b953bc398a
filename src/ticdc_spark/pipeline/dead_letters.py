"""Dead letters: records that could not be decoded or applied, kept with the reason.

One shape wherever they come from (a message that failed to decode, a change the planner
cannot apply, a value a table column cannot hold): the record's position, the reason, and
the raw message where there is one.  Written per micro-batch as JSON Lines (the capture
format plus ``error``), so that a person can find the message and feed it again.
"""

from __future__ import annotations

import base64
from pathlib import Path

import orjson
import pyarrow as pa

from ticdc_spark.pipeline.checkpoint.files import atomic_write

__all__ = ["DEAD_LETTER_FIELDS", "DeadLetterWriter", "dead_letters"]

DEAD_LETTER_FIELDS = ("topic", "partition", "offset", "error", "key", "value")


def dead_letters(rows: pa.Table | None, reason: str | None = None) -> pa.Table | None:
    """Rows in the dead-letter shape (:data:`DEAD_LETTER_FIELDS`), each with ``reason``
    or, without one, its own ``error`` column; None for no rows."""
    if rows is None or not rows.num_rows:
        return None
    n = rows.num_rows
    names = rows.column_names

    def column(name: str, arrow_type: pa.DataType) -> pa.Array | pa.ChunkedArray:
        return rows[name] if name in names else pa.nulls(n, arrow_type)

    error = pa.array([reason] * n, pa.string()) if reason else column("error", pa.string())
    return pa.table(
        {
            "topic": rows["topic"],
            "partition": rows["partition"],
            "offset": rows["offset"],
            "error": error,
            "key": column("key", pa.binary()),
            "value": column("value", pa.binary()),
        }
    )


class DeadLetterWriter:
    """Dead letters as JSON Lines (the capture format plus ``error``), one file per batch."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)

    def write(self, batch: int, rows: pa.Table | None) -> int:
        """Write a batch's dead letters (key and value in base64); how many there were."""
        if rows is None or not rows.num_rows:
            return 0
        self.directory.mkdir(parents=True, exist_ok=True)
        lines = []
        for row in rows.to_pylist():
            for name in ("key", "value"):
                if row.get(name) is not None:
                    row[name] = base64.b64encode(row[name]).decode("ascii")
            lines.append(orjson.dumps(row) + b"\n")
        atomic_write(self.directory / f"dead-letters-{batch:012d}.jsonl", b"".join(lines))
        return len(lines)
