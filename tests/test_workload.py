"""The workload generator: what its events promise to those who collect them."""

from __future__ import annotations

from ticdc_spark.model import DDLEvent, RowChange
from ticdc_spark.testing.workload import Workload


def test_workload_events_keep_their_images_after_later_ddl() -> None:
    """Events collected before encoding: a later ADD COLUMN must not add the column to the
    images of rows already handed out (their schema does not have it)."""
    events = list(Workload(seed=12, rows=600, tables=2, ddl_every=40).events())
    added = [e for e in events if isinstance(e, DDLEvent) and "ADD COLUMN" in e.query]
    assert added
    for event in events:
        if isinstance(event, RowChange):
            names = set(event.schema.column_names)
            for image in (event.before, event.after):
                assert set(image or {}) <= names, event.schema.qualified_name
