"""Arrow IPC files as bytes, for the checkpoint's stores.

The held rows and the changelog log are Arrow IPC files written whole through a
:class:`~ticdc_spark.storage.Store`: on a local disk a synced temporary file renamed into
place (and the directory synced), on an object store a single PUT.  Either way a reader
finds the old file or the whole new one, never a torn one.
"""

from __future__ import annotations

import pyarrow as pa

__all__ = ["arrow_bytes", "arrow_table"]


def arrow_bytes(table: pa.Table) -> bytes:
    """``table`` as an Arrow IPC file."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema) as out:
        out.write_table(table)
    return bytes(sink.getvalue())


def arrow_table(data: bytes) -> pa.Table:
    """The table of an Arrow IPC file (:class:`pyarrow.ArrowInvalid` if it is not one)."""
    return pa.ipc.open_file(pa.py_buffer(data)).read_all()
