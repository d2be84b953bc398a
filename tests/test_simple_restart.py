"""Simple, killed while rows wait for their schema, started again: the held rows are in the
checkpointed consumer state, so the tables equal those of a run that never stopped (no row
lost, none applied twice).  Kills through the kill-point harness (the pipeline's apply path
without Spark, see restart_helpers), as the kill-anywhere tests do."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

import simple_stream
from restart_helpers import assert_same_tables, run_harness, target, write_batch_list
from ticdc_spark.pipeline.failpoints import CRASH_EXIT_CODE
from ticdc_spark.sinks import make_sink
from ticdc_spark.sinks.base import live

# In stream order: the first kill comes right after batch 0's state, which holds every row of
# batch 0, was saved; batch 1's state (users' row still held) is then lost and rebuilt from
# the logged micro-batches.
POINTS = [
    "state-saved:0",
    "decoded:1",
    "step:1:1",
    "state-saved:1",
    "step:2:2",
    "committed:2",
    "decoded:3",
]


def _held_wire_rows(checkpoint: Path, batch: int) -> int:
    path = checkpoint / "ticdc" / f"held-{batch:012d}.arrow"
    with pa.memory_map(str(path)) as source:
        held = pa.ipc.open_file(source).read_all()
    return held["value"].is_valid().to_pylist().count(True)


def test_killed_while_rows_wait_for_their_schema(tmp_path: Path) -> None:
    batches = tmp_path / "batches"
    write_batch_list(simple_stream.batches(), batches, "simple", {})
    calm_root = tmp_path / "calm"
    assert run_harness(calm_root / "ck", target("delta", calm_root), batches, None, "simple") == 0

    checkpoint, spec = tmp_path / "ck", target("delta", tmp_path)
    for point in POINTS:
        code = run_harness(checkpoint, spec, batches, point, "simple")
        assert code == CRASH_EXIT_CODE, f"{point} was never reached"
        if point == "state-saved:0":
            assert _held_wire_rows(checkpoint, 0) == 5  # killed while all five rows wait
        if point == "state-saved:1":
            assert _held_wire_rows(checkpoint, 1) == 1
            (checkpoint / "ticdc" / f"state-{1:012d}.json").unlink()
            (checkpoint / "ticdc" / f"held-{1:012d}.arrow").unlink()
    assert run_harness(checkpoint, spec, batches, None, "simple") == 0
    killed, calm = make_sink(spec), make_sink(target("delta", calm_root))
    assert_same_tables(killed, calm)
    orders = sorted(live(killed.read(("shop", "orders"))).to_pylist(), key=lambda r: r["id"])
    assert orders == simple_stream.ORDERS
