"""A checkpoint a kill or a user left damaged: resumed exactly, or refused naming the file.

Issue 16: a kill while Spark wrote the first offsets file blocked every start; a lost
consumer-state file made the job fall back to an older state silently (rows held for the
watermark lost); a damaged one failed with a bare traceback; a kill inside a Delta drop
left a half-deleted table that blocked restarts.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pyarrow as pa
import pytest

from restart_helpers import assert_same_tables, run_harness, stream, target, write_batches
from ticdc_spark.errors import TiCDCSparkError
from ticdc_spark.pipeline.apply import Applier
from ticdc_spark.pipeline.checkpoint import (
    ChangelogLog,
    CheckpointError,
    StateStore,
    repair_spark_checkpoint,
)
from ticdc_spark.sinks import make_sink
from ticdc_spark.sinks.delta import TRASH, DeltaSink

BATCHES = 12  # records per micro-batch


@pytest.fixture(scope="module")
def batches(tmp_path_factory: pytest.TempPathFactory) -> list[pa.Table]:
    directory = tmp_path_factory.mktemp("batches") / "b"
    write_batches(stream(), directory, BATCHES)
    out = []
    for path in sorted(directory.glob("*.arrow")):
        with pa.memory_map(str(path)) as source:
            out.append(pa.ipc.open_file(source).read_all())
    return out


def _run(root: Path, batches: list[pa.Table], numbers: range, kind: str = "delta") -> Applier:
    """Apply micro-batches as replicate does: logged first, the log pruned after."""
    store = StateStore(root / "checkpoint")
    applier = Applier(make_sink(target(kind, root), app_id=store.pipeline_id()), store)
    log = ChangelogLog(store.root)
    for number in numbers:
        log.write(number, batches[number])
        applier.apply(batches[number], number)
        log.prune(store.oldest())
    return applier


def _restart(root: Path, committed: int, kind: str = "delta") -> Applier:
    store = StateStore(root / "checkpoint")
    applier = Applier(make_sink(target(kind, root), app_id=store.pipeline_id()), store)
    applier.recover(ChangelogLog(store.root), committed)
    return applier


def _calm(root: Path, batches: list[pa.Table], kind: str = "delta") -> object:
    _run(root, batches, range(len(batches)), kind)
    return make_sink(target(kind, root))


def _state(root: Path, batch: int) -> Path:
    return root / "checkpoint" / "ticdc" / f"state-{batch:012d}.json"


def _held(root: Path, batch: int) -> Path:
    return root / "checkpoint" / "ticdc" / f"held-{batch:012d}.arrow"


def _latest_with_held_rows(root: Path, batches: list[pa.Table], kind: str = "delta") -> int:
    """Apply batches until one ends with rows held for the watermark; returns its number."""
    for number in range(len(batches)):
        _run(root, batches, range(number, number + 1), kind)
        if _held(root, number).exists():
            return number
    raise AssertionError("the stream never holds rows: the test would prove nothing")


# -- 3: a missing consumer-state file --------------------------------------------------------


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_a_lost_latest_state_is_rebuilt_from_the_logged_batches(
    batches: list[pa.Table], tmp_path: Path, kind: str
) -> None:
    killed = tmp_path / "killed"
    last = _latest_with_held_rows(killed, batches, kind)
    _state(killed, last).unlink()
    _held(killed, last).unlink(missing_ok=True)
    restarted = _restart(killed, committed=last, kind=kind)
    assert [r.batch for r in restarted.reports] == [last]
    assert _state(killed, last).exists()
    _run(killed, batches, range(last + 1, len(batches)), kind)
    assert_same_tables(make_sink(target(kind, killed)), _calm(tmp_path / "calm", batches, kind))


def test_a_state_lost_beyond_the_log_is_refused_naming_it(
    batches: list[pa.Table], tmp_path: Path
) -> None:
    _run(tmp_path, batches, range(6))
    for path in (tmp_path / "checkpoint" / "ticdc").glob("state-*.json"):
        path.unlink()
    with pytest.raises(CheckpointError) as caught:
        _restart(tmp_path, committed=5)
    message = str(caught.value)
    state = _state(tmp_path, 5)
    assert f"in {state.parent} " in message and state.name in message
    assert "new checkpoint directory" in message
    assert "micro-batches 0-3" in message  # what the log would have needed


def test_a_lost_held_rows_file_is_never_read_as_no_rows(
    batches: list[pa.Table], tmp_path: Path
) -> None:
    last = _latest_with_held_rows(tmp_path, batches)
    _held(tmp_path, last).unlink()
    (tmp_path / "checkpoint" / "ticdc" / "wal" / f"changelog-{last:012d}.arrow").unlink()
    applier = Applier(DeltaSink(tmp_path / "lake"), StateStore(tmp_path / "checkpoint"))
    with pytest.raises(TiCDCSparkError, match=str(_held(tmp_path, last))):
        applier.apply(batches[last + 1], last + 1)


def test_the_next_batch_never_starts_from_an_older_state(
    batches: list[pa.Table], tmp_path: Path
) -> None:
    """Spark's next batch is 4: with state 3 gone, state 2 is not taken in its place."""
    _run(tmp_path, batches, range(4))
    _state(tmp_path, 3).unlink()
    applier = Applier(DeltaSink(tmp_path / "lake"), StateStore(tmp_path / "checkpoint"))
    with pytest.raises(TiCDCSparkError, match=f"{_state(tmp_path, 3)} is missing"):
        applier.apply(batches[4], 4)


# -- 4: a damaged consumer-state file ---------------------------------------------------------


def _garbage(path: Path) -> None:
    path.write_bytes(b'{"watermarks": {"cdc/0": 1')


def _no_watermarks(path: Path) -> None:
    path.write_bytes(path.read_bytes().replace(b'"watermarks"', b'"watermarkz"'))


def _truncated(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:100])


DAMAGE = {"json": (_state, _garbage), "key": (_state, _no_watermarks), "arrow": (_held, _truncated)}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_state_is_refused_naming_the_file_and_the_way_out(
    batches: list[pa.Table], tmp_path: Path, damage: str
) -> None:
    last = _latest_with_held_rows(tmp_path, batches)
    which, how = DAMAGE[damage]
    how(which(tmp_path, last))
    for path in (tmp_path / "checkpoint" / "ticdc" / "wal").glob("*.arrow"):
        path.unlink()  # nothing to rebuild it from
    applier = Applier(DeltaSink(tmp_path / "lake"), StateStore(tmp_path / "checkpoint"))
    with pytest.raises(TiCDCSparkError) as caught:
        applier.apply(batches[last + 1], last + 1)
    message = str(caught.value)
    assert str(which(tmp_path, last)) in message and "is damaged" in message
    assert "backup" in message and "docs/pipeline.md" in message
    with pytest.raises(CheckpointError, match=str(which(tmp_path, last))):
        _restart(tmp_path, committed=last)


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_state_is_rebuilt_when_the_log_reaches_back(
    batches: list[pa.Table], tmp_path: Path, damage: str
) -> None:
    killed = tmp_path / "killed"
    last = _latest_with_held_rows(killed, batches)
    which, how = DAMAGE[damage]
    how(which(killed, last))
    _restart(killed, committed=last)
    _run(killed, batches, range(last + 1, len(batches)))
    assert_same_tables(make_sink(target("delta", killed)), _calm(tmp_path / "calm", batches))


def test_a_damaged_pipeline_id_is_refused_naming_it(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    store.pipeline_id()
    (store.root / "pipeline.json").write_bytes(b"{")
    with pytest.raises(CheckpointError, match=r"pipeline\.json is damaged"):
        store.pipeline_id()


# -- 1: Spark's first offsets file half-written -----------------------------------------------


def _leftover_of_a_kill_before_batch_0(spark_dir: Path) -> Path:
    """What a kill while Spark writes its first offsets file leaves (issue 16)."""
    (spark_dir / "offsets").mkdir(parents=True)
    (spark_dir / "commits").mkdir()
    (spark_dir / "metadata").write_text('{"id":"00000000-0000-0000-0000-000000000000"}\n')
    leftover = spark_dir / "offsets" / f".0.{uuid.uuid4()}.tmp"
    leftover.write_bytes(b"")
    return leftover


@pytest.mark.spark
def test_a_kill_while_spark_wrote_its_first_offsets_does_not_block_the_start(
    spark, tmp_path: Path
) -> None:
    from ticdc_spark.spark.pipeline import PipelineConfig, run

    capture = tmp_path / "capture"
    from restart_helpers import write_capture_dir

    write_capture_dir(stream(), capture)
    leftover = _leftover_of_a_kill_before_batch_0(tmp_path / "checkpoint" / "spark")
    config = PipelineConfig(
        engine="embedded",
        source=str(capture),
        protocol="canal-json",
        target=target("delta", tmp_path),
        checkpoint=str(tmp_path / "checkpoint"),
        options={"enable-tidb-extension": "true"},
    )
    run(spark, config)  # failed with STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY
    assert not leftover.exists()
    calm = tmp_path / "calm"
    write_batches(stream(), calm / "batches", 1000)
    assert run_harness(calm / "checkpoint", target("delta", calm), calm / "batches", None) == 0
    assert_same_tables(make_sink(config.target), make_sink(target("delta", calm)))


def test_the_repair_touches_nothing_once_a_batch_was_committed(tmp_path: Path) -> None:
    spark_dir = tmp_path / "spark"
    leftover = _leftover_of_a_kill_before_batch_0(spark_dir)
    (spark_dir / "offsets" / "0").write_text("v1\n{}\n")
    assert repair_spark_checkpoint(spark_dir) == [] and leftover.exists()  # batch 0 to re-run
    (spark_dir / "offsets" / "1").write_text("")
    (spark_dir / "commits" / "0").write_text("v1\n{}\n")
    assert repair_spark_checkpoint(spark_dir) == []
    assert leftover.exists() and (spark_dir / "offsets" / "1").exists()


def test_the_repair_removes_only_temporary_and_empty_offsets_files(tmp_path: Path) -> None:
    spark_dir = tmp_path / "spark"
    leftover = _leftover_of_a_kill_before_batch_0(spark_dir)
    (spark_dir / "offsets" / "0").write_bytes(b"")
    assert sorted(repair_spark_checkpoint(spark_dir)) == sorted(
        [leftover, spark_dir / "offsets" / "0"]
    )
    assert (spark_dir / "metadata").exists() and not list((spark_dir / "offsets").iterdir())


def test_states_without_spark_offsets_are_refused(batches: list[pa.Table], tmp_path: Path) -> None:
    from ticdc_spark.pipeline.checkpoint import check_checkpoint

    _run(tmp_path, batches, range(2))
    with pytest.raises(CheckpointError, match="Spark's part of the checkpoint was lost"):
        check_checkpoint(tmp_path / "checkpoint")


# -- 2: a drop cut short ----------------------------------------------------------------------


def test_a_drop_cut_short_is_finished_by_the_next_sink(tmp_path: Path) -> None:
    """A table moved to the trash and half deleted (its log gone first) is no table, and
    the next sink deletes it."""
    import pyarrow as pa
    from deltalake import write_deltalake

    lake = tmp_path / "lake"
    half = lake / TRASH / "0123"
    write_deltalake(str(half), pa.table({"id": [1, 2]}))
    write_deltalake(str(lake / "db" / "t"), pa.table({"id": [1]}))
    for path in sorted((half / "_delta_log").iterdir())[:1]:
        path.unlink()
    sink = DeltaSink(lake)
    assert not (lake / TRASH / "0123").exists()
    assert sink.tables() == [("db", "t")]
