"""The changelog: each protocol's fast path (wire text) means the same values as the generic
path (decode to canonical values, print the normalized text)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strategies import row_changes
from ticdc_spark.changelog import ChangelogBuilder, schema_from_json
from ticdc_spark.codec import make_decoder, make_encoder
from ticdc_spark.sinks.convert import convert_column

PROTOCOLS = [
    ("canal-json", {"enable-tidb-extension": "true"}),
    ("open-protocol", {}),
    ("canal-json", {"enable-tidb-extension": "true", "content-compatible": "true"}),
]


def _both_ways(protocol: str, options: dict, rows: list) -> tuple[pa.Table, pa.Table]:
    decoder = make_decoder(protocol, options)
    fast, generic = ChangelogBuilder(), ChangelogBuilder()
    for offset, message in enumerate(make_encoder(protocol, options).encode(rows)):
        message.topic, message.partition, message.offset = "t", 0, offset
        decoder.decode_changelog(message, fast)  # type: ignore[attr-defined]
        generic.add_events(decoder.decode(message), "t", 0, offset)
    return (pa.Table.from_batches([fast.to_batch()]), pa.Table.from_batches([generic.to_batch()]))


@pytest.mark.parametrize(("protocol", "options"), PROTOCOLS)
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.lists(row_changes(), min_size=1, max_size=4))
def test_fast_path_means_the_same_values(protocol: str, options: dict, rows: list) -> None:
    fast, generic = _both_ways(protocol, options, rows)
    assert fast.num_rows == generic.num_rows
    for field in ("kind", "op", "database", "table", "commit_ts", "seq"):
        assert fast[field].to_pylist() == generic[field].to_pylist()
    schemas = [s for s in generic["schema"].to_pylist() if s]
    for i in range(fast.num_rows):
        schema = schema_from_json(schemas[0], "d", "t") if len(schemas) == 1 else None
        for side in ("before", "after"):
            got, want = fast[side][i].as_py(), generic[side][i].as_py()
            assert (got is None) == (want is None)
            if got is None:
                continue
            got, want = dict(got), dict(want)
            assert got.keys() == want.keys()
            row_schema = schema or rows[i].schema
            for column in row_schema.columns:
                if column.name not in got:
                    continue
                a, _ = convert_column(column.type, pa.array([got[column.name]], pa.string()))
                b, _ = convert_column(column.type, pa.array([want[column.name]], pa.string()))
                assert a.to_pylist() == b.to_pylist(), (
                    column.name,
                    got[column.name],
                    want[column.name],
                )
