"""Planning on Spark's executors: the parts of a micro-batch (:mod:`ticdc_spark.pipeline.parts`)
planned where its rows are, so that no row of it goes through the driver.

Per micro-batch (:class:`SparkRunner`, the runner of :class:`~ticdc_spark.pipeline.planning.
PartsPlanning`):

1. the batch is logged first, as Parquet written by the executors
   (:class:`PlannedLog`, ``CHECKPOINT/ticdc/log/batch-N``), each row with its place in the
   batch (``_order``); everything after reads the log, so the source is read and decoded
   once, and a batch can be planned again after a crash;
2. the driver collects the *control rows* (watermarks, DDLs, bootstraps, errors: few) and
   which tables and partitions the rows come from, and plans the control part;
3. one ``cogroup(...).applyInArrow`` plans each table group's part on an executor: its rows,
   the rows it held back and its guards (both from the previous batch's output), with the
   same planner; one Parquet write (``CHECKPOINT/ticdc/parts/batch-N``, by ``_part``) keeps
   every part's planned changes, rows held back, guards, dead letters and result;
4. the driver reads the results (a few per table group) and the dead letters, and puts the
   plan together: each row step is a :class:`~ticdc_spark.pipeline.steps.PlannedChanges`
   naming its rows in the parts' output, which the sink reads, types and merges on the
   executors (:mod:`ticdc_spark.sinks.spark.planned`).

The consumer state names the parts' output it continues from (``parts``); the state of
batch N-1 and the log of batch N plan batch N again, exactly, after any crash.  The driver's
memory holds the control rows and the per-group results only, whatever the size of a batch.
At 100x the rows the driver's work is unchanged; each executor plans the groups it is given
(one table's rows of the batch at most: a table's rows are planned together).
"""

from __future__ import annotations

import pickle
import shutil
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ticdc_spark.errors import CHECKPOINT_WAY_OUT, CheckpointError, TiCDCSparkError
from ticdc_spark.pipeline.arrow import concat
from ticdc_spark.pipeline.changelog import ROW, arrow_schema
from ticdc_spark.pipeline.checkpoint import StateStore
from ticdc_spark.pipeline.dead_letters import DEAD_LETTER_FIELDS
from ticdc_spark.pipeline.failpoints import crash_point
from ticdc_spark.pipeline.guards import Guards
from ticdc_spark.pipeline.parts import ORDER, PartInput, PartResult, PlannedPart, plan_part
from ticdc_spark.pipeline.planning import Carried, PartsOutcome
from ticdc_spark.pipeline.state import ConsumerState
from ticdc_spark.pipeline.steps import PlannedChanges, Step, TableChanges, TableKey
from ticdc_spark.sinks.convert import convertible
from ticdc_spark.spark.bad_lines import without_bad_lines
from ticdc_spark.storage import StorageOptions, is_local, join, open_store
from ticdc_spark.storage.store import local_path

__all__ = ["PlannedLog", "SparkRunner"]

GROUP, PART, STEP = "_group", "_part", "_step"
_HELD = "_held"
_GUARD_KEY, _NAMES, _META = "guard_key", "names", "meta"
_GUARD_COLUMNS = ("database", "table", _NAMES, _GUARD_KEY, "commit_ts")


def _wide_schema() -> pa.Schema:
    """The parts' output: every kind of row in one schema (``_part`` says which)."""
    return pa.schema(
        [
            *arrow_schema(),
            (ORDER, pa.int64()),
            ("image", pa.map_(pa.string(), pa.string())),
            (_NAMES, pa.string()),
            (_GUARD_KEY, pa.string()),
            (_META, pa.binary()),
            (PART, pa.string()),
            (GROUP, pa.int32()),
            (STEP, pa.int32()),
        ]
    )


WIDE = _wide_schema()


def _widened(rows: pa.Table | None, part: str, group: int, step: int = -1) -> pa.Table | None:
    """Rows of one kind in the wide schema (the columns they lack null)."""
    if rows is None or not rows.num_rows:
        return None
    n = rows.num_rows
    labels = {PART: pa.array([part] * n, pa.string()), GROUP: pa.array([group] * n, pa.int32())}
    labels[STEP] = pa.array([step] * n, pa.int32())
    columns = [
        labels[f.name]
        if f.name in labels
        else rows[f.name].cast(f.type)
        if f.name in rows.column_names
        else pa.nulls(n, f.type)
        for f in WIDE
    ]
    return pa.Table.from_arrays(columns, schema=WIDE)


def _output(planned: PlannedPart) -> pa.Table:
    """A part's plan as wide rows: its result, changes, rows held back, dead letters and
    guards."""
    result = planned.result
    group = result.group
    meta = pa.table({_META: [pickle.dumps(result)]})
    guards = planned.guards.to_arrow()
    if guards is not None:
        guards = guards.rename_columns(list(_GUARD_COLUMNS))
    pieces = [
        _widened(meta, "meta", group),
        *(_widened(rows, "change", group, n) for n, rows in sorted(planned.changes.items())),
        _widened(planned.held, "held", group),
        _widened(planned.dead_letters, "dead", group),
        _widened(guards, "guard", group),
    ]
    return pa.concat_tables([p for p in pieces if p is not None])


def _screened(planned: PlannedPart) -> PlannedPart:
    """A part's changes without those with a value their column cannot hold, which become
    its dead letters here (the driver's steps find them when applied, sinks.base): the sink
    then types and merges the rest in one pass."""
    dead = [planned.dead_letters]
    for number, rows in planned.changes.items():
        step = planned.result.steps[number]
        assert isinstance(step, TableChanges)
        kept, failed = convertible(step.schema, rows)
        if failed is not None:
            planned.changes[number] = kept
            planned.result.sizes[number] = kept.num_rows
            dead.append(failed)
    planned.dead_letters = concat(dead)
    return planned


def plan_group(part: PartInput, groups: dict[int, frozenset[TableKey]]) -> Any:
    """The function each group's part runs in (on an executor): its rows (this batch's
    and those it held back), its guards -> its output rows."""
    names = [f.name for f in arrow_schema()]

    def run(rows: pa.Table, guards: pa.Table) -> pa.Table:
        if not rows.num_rows:  # (a group a rename made, without rows: its guards kept)
            group = int(guards[GROUP][0].as_py()) if guards.num_rows else -1
            kept = _widened(guards.select(list(_GUARD_COLUMNS)), "guard", group)
            return WIDE.empty_table() if kept is None else kept
        group = int(rows[GROUP][0].as_py())
        is_held = rows[_HELD]
        batch = rows.filter(pc.invert(is_held)).select([*names, ORDER])
        held = rows.filter(is_held).select([*names, ORDER])
        saved = guards.select(list(_GUARD_COLUMNS)).rename_columns(
            ["database", "table", "names", "key", "commit_ts"]
        )
        saved = saved.sort_by(
            [("database", "ascending"), ("table", "ascending"), ("names", "ascending")]
        )
        planned = plan_part(
            part,
            group,
            groups[group],
            batch,
            held if held.num_rows else None,
            Guards.from_arrow(saved),
        )
        return _output(_screened(planned))

    return run


class SparkRunner:
    """Runs the parts of a micro-batch on Spark's executors (see the module's doc)."""

    def __init__(self, spark: Any, checkpoint_root: str, storage: StorageOptions) -> None:
        self.spark = spark
        self.root = checkpoint_root  # CHECKPOINT/ticdc (a path or a URI)
        self.storage = storage

    def location(self, batch: int) -> str:
        return join(self.root, f"parts/batch-{batch:012d}")

    def control(self, changelog: Any) -> tuple[pa.Table, list[tuple[TableKey, str]]]:
        from pyspark.sql.functions import col

        control = changelog.filter(col("kind") != ROW).toArrow()
        sources = (
            changelog.filter(col("kind") == ROW)
            .select("database", "table", "topic", "partition")
            .distinct()
            .toArrow()
        )
        pairs = [
            ((r["database"], r["table"]), f"{r['topic']}/{r['partition']}")
            for r in sources.to_pylist()
        ]
        return control, sorted(pairs)

    def run(
        self,
        changelog: Any,
        batch: int,
        part: PartInput,
        groups: dict[TableKey, int],
        state: ConsumerState,
        carried: Carried | None,
    ) -> PartsOutcome:
        if not groups and carried is None:  # (no rows, none held: the guards stay)
            return _nothing_planned(state)
        by_group: dict[int, set[TableKey]] = {}
        for key, group in groups.items():
            by_group.setdefault(group, set()).add(key)
        frozen = {g: frozenset(keys) for g, keys in by_group.items()}
        pairs = [(db, t, g) for (db, t), g in groups.items()]

        def mapping() -> Any:  # (one per join: a DataFrame joined twice is ambiguous)
            from pyspark.sql.functions import broadcast

            frame = self.spark.createDataFrame(pairs, "database string, table string, _group int")
            return broadcast(frame)

        rows, guards, untouched = self._inputs(changelog, mapping, state)
        if carried is not None:  # (what planning on the driver kept in the state)
            rows, guards, untouched = self._with_carried(carried, mapping, rows, guards, untouched)
        planned = (
            rows.groupBy(GROUP)
            .cogroup(guards.groupBy(GROUP))
            .applyInArrow(plan_group(part, frozen), _spark_schema())
        )
        location = self.location(batch)
        out = planned if untouched is None else planned.unionByName(untouched)
        out.write.mode("overwrite").partitionBy(PART).parquet(location)
        crash_point("planned", batch)
        return self._outcome(location, batch, untouched is not None)

    def _inputs(
        self, changelog: Any, mapping: Callable[[], Any], state: ConsumerState
    ) -> tuple[Any, Any, Any]:
        """Each group's rows (this batch's, then those held back), its guards as kept, and
        the guards of tables without rows (None: none), in the wide schema."""
        from pyspark.sql.functions import col, lit

        names = [f.name for f in arrow_schema()]
        rows = changelog.filter(col("kind") == ROW).select(*names, ORDER)
        rows = rows.join(mapping(), ["database", "table"]).withColumn(_HELD, lit(False))
        previous = self._previous(state)
        empty_guards = self.spark.createDataFrame([], _spark_schema()).select(
            GROUP, *_GUARD_COLUMNS
        )
        if not previous:
            return rows, empty_guards, None
        if state.parts.get("held"):
            held = self.spark.read.parquet(join(previous, f"{PART}=held")).select(*names, ORDER)
            held = held.join(mapping(), ["database", "table"]).withColumn(_HELD, lit(True))
            rows = rows.unionByName(held)
        if not state.parts.get("guards"):
            return rows, empty_guards, None
        kept = self._guards_kept(join(previous, f"{PART}=guard"), state)
        touched = kept.join(mapping(), ["database", "table"])
        others = kept.join(mapping(), ["database", "table"], "left_anti")
        return rows, touched, _wide_frame(others, "guard")

    def _with_carried(
        self, carried: Carried, mapping: Callable[[], Any], rows: Any, guards: Any, untouched: Any
    ) -> tuple[Any, Any, Any]:
        """The inputs with the rows held back and guards planning on the driver kept (in
        the driver's memory already: read from its state once, at the switch)."""
        from pyspark.sql.functions import lit

        if carried.held is not None:
            held = self.spark.createDataFrame(carried.held).join(mapping(), ["database", "table"])
            rows = rows.unionByName(held.withColumn(_HELD, lit(True)))
        if carried.guards is not None:
            saved = self.spark.createDataFrame(carried.guards.rename_columns(list(_GUARD_COLUMNS)))
            guards = guards.unionByName(saved.join(mapping(), ["database", "table"]))
            others = _wide_frame(saved.join(mapping(), ["database", "table"], "left_anti"), "guard")
            untouched = others if untouched is None else untouched.unionByName(others)
        return rows, guards, untouched

    def _previous(self, state: ConsumerState) -> str | None:
        """The parts' output the state continues from (None: none), which must be whole
        when it keeps rows held back or guards."""
        location = state.parts.get("location")
        if not location or not (state.parts.get("held") or state.parts.get("guards")):
            return location if location else None
        if not open_store(location, self.storage).exists("_SUCCESS"):
            raise CheckpointError(
                f"{location} is missing or incomplete: it holds the rows held back and the "
                f"guards the consumer state of batch {state.parts.get('batch')} continues "
                f"from. {CHECKPOINT_WAY_OUT}"
            )
        return str(location)

    def _guards_kept(self, location: str, state: ConsumerState) -> Any:
        """The guards saved there, collected as one planner would have at the end of the
        batch that saved them (see pipeline.planning.guards_kept)."""
        from pyspark.sql.functions import col

        guards = self.spark.read.parquet(location).select(*_GUARD_COLUMNS)
        keep = col("commit_ts") > int(state.parts.get("guard_floor", -1))
        for (database, table), floor in state.floors.items():
            mine = (col("database") == database) & (col("table") == table)
            keep = keep & ~(mine & (col("commit_ts") <= int(floor)))
        return guards.filter(keep)

    def _outcome(self, location: str, batch: int, untouched: bool) -> PartsOutcome:
        """The parts' results and dead letters, read back; where the rest stays."""
        frame = self.spark.read.parquet(location)
        small = (
            frame.filter(frame[PART].isin("meta", "dead"))
            .select(PART, _META, *DEAD_LETTER_FIELDS)
            .toArrow()
        )
        metas = small.filter(pc.equal(small[PART], "meta"))[_META].to_pylist()
        results: list[PartResult] = sorted((pickle.loads(m) for m in metas), key=lambda r: r.group)
        dead = small.filter(pc.equal(small[PART], "dead")).select(list(DEAD_LETTER_FIELDS))
        guards = sum(r.guards for r in results)
        if untouched:  # (guards of tables without rows written too: counted)
            guards = frame.filter(frame[PART] == "guard").count()
        kept = {"location": location, "batch": batch}
        return PartsOutcome(
            results,
            dead if dead.num_rows else None,
            lambda group, number: (location, group, number),
            kept,
            guards - sum(r.guards for r in results),
        )

    def steps_of(self, step: TableChanges, changes: Any, rows: int) -> Step:
        location, group, number = changes
        return PlannedChanges(
            step.database,
            step.table,
            step.schema,
            join(location, f"{PART}=change"),
            group,
            number,
            rows,
        )


def _nothing_planned(state: ConsumerState) -> PartsOutcome:
    """The outcome of a batch without rows (watermarks only, say): no part to run; the
    guards kept where the last output has them."""
    guards = int(state.parts.get("guards", 0))
    kept = {
        "location": state.parts.get("location"),
        "batch": state.parts.get("batch", -1),  # (the batch that wrote it: PlannedLog.prune)
    }
    return PartsOutcome([], None, _no_changes, kept, guards)


def _no_changes(group: int, number: int) -> Any:
    raise AssertionError(f"no part planned step {number} of group {group}")


def _spark_schema() -> Any:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(WIDE)


def _wide_frame(frame: Any, part: str) -> Any:
    """A frame's rows in the wide schema (as ``part`` rows of no group)."""
    from pyspark.sql.functions import col, lit

    columns = []
    for f in _spark_schema().fields:
        if f.name == PART:
            columns.append(lit(part).alias(PART))
        elif f.name in frame.columns:
            columns.append(col(f.name).cast(f.dataType).alias(f.name))
        else:
            columns.append(lit(None).cast(f.dataType).alias(f.name))
    return frame.select(*columns)


class PlannedLog:
    """The changelog of each micro-batch as Parquet written by the executors (planning on
    the executors reads it; a crash replays from it): the interface of
    :class:`~ticdc_spark.pipeline.checkpoint.ChangelogLog`."""

    def __init__(self, spark: Any, store: StateStore) -> None:
        checkpoint_root = str(store.root)
        self.spark, self.store = spark, store
        self.root = join(checkpoint_root, "log")
        self.parts_root = join(checkpoint_root, "parts")
        self.checkpoint_root = checkpoint_root
        self.files = open_store(checkpoint_root, store.storage)
        self.skip_bad_lines = False  # (onBadRecord=skip)

    def location(self, batch: int) -> str:
        return join(self.root, f"batch-{batch:012d}")

    def write(self, batch: int, changelog: Any) -> None:
        """Log a micro-batch, once: a batch Spark runs again after a crash keeps the log
        it planned from (its rows' places, ``_order``, follow Spark's partitions)."""
        from pyspark.sql.functions import monotonically_increasing_id

        if self.files.exists(f"log/batch-{batch:012d}/_SUCCESS"):
            return
        ordered = changelog.withColumn(ORDER, monotonically_increasing_id())
        ordered.write.mode("overwrite").parquet(self.location(batch))

    def read(self, batch: int) -> Any:
        """A logged micro-batch (without the capture lines that are not records, when they
        are skipped: see :func:`~ticdc_spark.spark.bad_lines.skip_bad_frame_lines`)."""
        frame = self.spark.read.parquet(self.location(batch))
        return without_bad_lines(frame) if self.skip_bad_lines else frame

    def batches(self) -> list[int]:
        done = [k for k in self.files.list_keys("log/") if k.endswith("/_SUCCESS")]
        return sorted(int(k.split("/")[-2].removeprefix("batch-")) for k in done)

    def prune(self, through: int) -> None:
        """Forget the logs up to ``through`` (the oldest state kept) and the parts' outputs
        older than the one that state names (a batch without rows names its predecessor's).
        Nothing when that state does not read: it is rebuilt from older ones, which need
        theirs."""
        if through < 0:
            return
        try:
            named = int(self.store.read(through).parts.get("batch", through))
        except TiCDCSparkError:
            return
        for prefix, last in (("log/", through), ("parts/", min(named, through) - 1)):
            for batch in {_batch_of(k, prefix) for k in self.files.list_keys(prefix)}:
                if batch <= last:
                    self._remove(f"{prefix}batch-{batch:012d}")

    def _remove(self, directory: str) -> None:
        """A Parquet directory gone (with the checksum files Spark writes beside)."""
        location = join(self.checkpoint_root, directory)
        if is_local(location):
            shutil.rmtree(local_path(location), ignore_errors=True)
        else:
            self.files.delete(self.files.list_keys(f"{directory}/"))


def _batch_of(key: str, prefix: str) -> int:
    return int(key[len(prefix) :].split("/", maxsplit=1)[0].removeprefix("batch-"))
