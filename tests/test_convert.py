"""Row images (maps of text) to typed columns."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

from ticdc_spark.sinks.convert import image_columns

MAP = pa.map_(pa.string(), pa.string())
NAMES = ["id", "k", "c"]

images = st.lists(
    st.one_of(
        # the common shape: every column, in order
        st.tuples(*(st.one_of(st.none(), st.text(max_size=3)) for _ in NAMES)).map(
            lambda v: list(zip(NAMES, v, strict=True))
        ),
        # anything else: some columns, any order, now and then a repeated or unknown one
        st.lists(
            st.tuples(st.sampled_from([*NAMES, "zz"]), st.one_of(st.none(), st.text(max_size=3))),
            max_size=5,
        ),
        st.none(),
    ),
    max_size=12,
)


@settings(max_examples=200, deadline=None)
@given(rows=images, cut=st.integers(0, 3))
def test_image_columns_read_like_map_lookup(rows: list, cut: int) -> None:
    array = pa.array(rows, MAP).slice(min(cut, len(rows)))
    chunked = pa.chunked_array([array.slice(0, 2), array.slice(2)], MAP)
    for source in (array, chunked):
        got = image_columns(source, NAMES)
        for name in NAMES:
            want = pc.map_lookup(array, name, "first")
            assert got[name].to_pylist() == want.to_pylist(), name


def test_full_images_take_the_strided_path() -> None:
    rows = [[("id", str(i)), ("k", None), ("c", "x" * i)] for i in range(50)]
    got = image_columns(pa.array(rows, MAP).slice(5), NAMES)
    assert got["id"].to_pylist() == [str(i) for i in range(5, 50)]
    assert got["k"].null_count == 45
    assert got["c"].to_pylist()[-1] == "x" * 49


@settings(max_examples=100, deadline=None)
@given(
    order=st.permutations([*NAMES, "extra"]).map(lambda p: p[: len(p) - 1]),
    values=st.lists(st.lists(st.one_of(st.none(), st.text(max_size=3)), min_size=4, max_size=4)),
)
def test_one_shape_in_wire_order(order: list, values: list) -> None:
    """Every row with the same keys, in an order other than the schema's (Open Protocol sends
    columns sorted by name), perhaps lacking one column or holding one the schema lacks."""
    array = pa.array([list(zip(order, v, strict=False)) for v in values], MAP)
    got = image_columns(array, NAMES)
    for name in NAMES:
        assert got[name].to_pylist() == pc.map_lookup(array, name, "first").to_pylist()
