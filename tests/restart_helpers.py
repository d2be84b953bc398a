"""The kill-anywhere tests' stream, runners and table comparison.

:func:`stream` is a small Canal-JSON stream of one partition whose micro-batches go through
every multi-file operation of the sinks: rows held for the watermark (consistent mode), a
column type change (a table rewrite), a RENAME TABLE, a DROP TABLE and the table created
again.  The harness (``python restart_helpers.py CHECKPOINT TARGET BATCHES``) applies
prepared micro-batches as ``replicate`` does without Spark: the same Applier, state store,
changelog log, sinks and kill points, with a commit file per batch where Spark writes its
own; it starts in well under a second plus imports, so a test can kill it many times.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from ticdc_spark.codec import Message, make_encoder
from ticdc_spark.model import (
    Column,
    ColumnType,
    DDLEvent,
    DDLType,
    Index,
    RowChange,
    RowKind,
    TableSchema,
    Watermark,
)

OPTIONS = {"enable-tidb-extension": "true"}
HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"


def _schema(table: str, n_type: str | None = "int") -> TableSchema:
    columns = [
        Column("id", ColumnType("int", length=11), nullable=False),
        Column("v", ColumnType("varchar", length=20)),
    ]
    if n_type:
        columns.append(Column("n", ColumnType(n_type)))
    primary = (Index("PRIMARY", ("id",), primary=True, unique=True),)
    return TableSchema("kill", table, tuple(columns), primary).with_derived_flags()


def _create(schema: TableSchema, ts: int) -> DDLEvent:
    columns = ", ".join(
        f"`{c.name}` {c.type.sql()}{'' if c.nullable else ' NOT NULL'}" for c in schema.columns
    )
    sql = f"CREATE TABLE `kill`.`{schema.table}` ({columns}, PRIMARY KEY (`id`))"
    return DDLEvent(DDLType.CREATE_TABLE, sql, ts, "kill", schema.table)


class _Rows:
    """Row changes of one table, with the images it has so far."""

    def __init__(self, schema: TableSchema) -> None:
        self.schema, self.rows = schema, {}

    def insert(self, ts: int, key: int, label: str) -> RowChange:
        after = {"id": key, "v": f"{label}{key}"}
        if "n" in self.schema.column_names:
            after["n"] = key * 1000 + ts % 1000
        self.rows[key] = after
        return RowChange(RowKind.INSERT, self.schema, ts, after=after)

    def update(self, ts: int, key: int) -> RowChange:
        before = self.rows[key]
        after = self.rows[key] = {**before, "v": f"u{ts % 100_000}"}
        return RowChange(RowKind.UPDATE, self.schema, ts, before=before, after=after)

    def delete(self, ts: int, key: int) -> RowChange:
        return RowChange(RowKind.DELETE, self.schema, ts, before=self.rows.pop(key))


def stream() -> list[Message]:
    """The Canal-JSON messages of the kill-anywhere stream (one partition, offsets set)."""
    clock = iter(range(1, 10_000))

    def ts() -> int:
        return (1_700_000_000_000 + next(clock) * 10) << 18

    a, b = _Rows(_schema("a")), _Rows(_schema("b"))
    events: list[Any] = [_create(a.schema, ts()), _create(b.schema, ts()), Watermark(ts())]

    def churn(tables: list[_Rows], start: int, count: int, label: str) -> None:
        for i in range(start, start + count):
            commit = ts()
            for table in tables:
                events.append(table.insert(commit, i, label))
                if i % 3 == 0 and i - 1 in table.rows:
                    events.append(table.update(commit, i - 1))
                if i % 4 == 0 and i - 2 in table.rows:
                    events.append(table.delete(commit, i - 2))
            if i % 3 == 2:
                events.append(Watermark(ts()))

    churn([a, b], 0, 12, "x")
    widened = _schema("a", "bigint")
    events.append(
        DDLEvent(
            DDLType.MODIFY_COLUMN,
            "ALTER TABLE `kill`.`a` MODIFY COLUMN `n` bigint",
            ts(),
            "kill",
            "a",
        )
    )
    a.schema = widened
    churn([a, b], 12, 6, "y")
    events.append(
        DDLEvent(DDLType.RENAME_TABLE, "RENAME TABLE `kill`.`b` TO `kill`.`c`", ts(), "kill", "b")
    )
    c = _Rows(_schema("c"))
    c.rows = b.rows
    churn([a, c], 18, 6, "z")
    events.append(DDLEvent(DDLType.DROP_TABLE, "DROP TABLE `kill`.`a`", ts(), "kill", "a"))
    again = _Rows(_schema("a", None))
    events.append(_create(again.schema, ts()))
    churn([again, c], 24, 8, "w")
    events.append(Watermark(ts()))
    messages = make_encoder("canal-json", OPTIONS).encode(events)
    for offset, message in enumerate(messages):
        message.topic, message.partition, message.offset = "cdc", 0, offset
    return messages


def write_capture_dir(messages: list[Message], directory: Path) -> None:
    from ticdc_spark.io.capture import write_capture

    directory.mkdir(parents=True)
    with open(directory / "part-0000.jsonl", "wb") as out:
        write_capture(messages, out)


def write_batches(messages: list[Message], directory: Path, records: int) -> int:
    """The stream's micro-batches of ``records`` messages, decoded, as Arrow files."""
    cuts = [messages[start : start + records] for start in range(0, len(messages), records)]
    return write_batch_list(cuts, directory, "canal-json", OPTIONS)


def write_batch_list(
    batches: list[list[Message]], directory: Path, protocol: str, options: dict[str, str]
) -> int:
    """Micro-batches of messages, decoded as the Spark decode stage would, as Arrow files."""
    import pyarrow as pa

    from pipeline_helpers import changelog

    directory.mkdir(parents=True)
    for number, messages in enumerate(batches):
        table = changelog(messages, protocol, options)
        path = directory / f"{number:06d}.arrow"
        with pa.OSFile(str(path), "wb") as raw, pa.ipc.new_file(raw, table.schema) as out:
            out.write_table(table)
    return len(batches)


def target(kind: str, root: Path, tables: str | None = None) -> str:
    """A Delta lake or an Iceberg warehouse under ``root``; with ``tables`` (a URI such as
    ``s3://lake/x``) the tables there, the Iceberg catalog still under ``root``."""
    if kind == "delta":
        return f"delta:{tables or root}/lake"
    warehouse = f"{tables}/warehouse" if tables else f"file://{root / 'warehouse'}"
    return f"iceberg:sqlite:///{root / 'catalog.db'}#{warehouse}"


def harness_command(
    checkpoint: Path | str,
    target_spec: str,
    batches: Path,
    protocol: str = "canal-json",
    mode: str = "consistent",
    changelog_tables: bool = False,
    engine: str = "embedded",
) -> list[str]:
    return [
        sys.executable,
        str(Path(__file__).resolve()),
        str(checkpoint),
        target_spec,
        str(batches),
        protocol,
        mode,
        "changelog-tables" if changelog_tables else "",
        engine,
    ]


def environment(
    crash_at: str | None = None, storage: dict[str, str] | None = None
) -> dict[str, str]:
    """The environment of a pipeline subprocess: this one's, a kill point, and the
    standard storage variables (``AWS_ENDPOINT_URL``, ...) of ``storage``."""
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", **(storage or {})}
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), str(HERE), env.get("PYTHONPATH", "")])
    env.pop("TICDC_SPARK_CRASH_AT", None)
    if crash_at:
        env["TICDC_SPARK_CRASH_AT"] = crash_at
    return env


HARNESS_STORAGE = "HARNESS_STORAGE"  # the harness's storage options, as JSON


def harness_environment(
    crash_at: str | None = None, storage: dict[str, str] | None = None
) -> dict[str, str]:
    """The harness's environment: a kill point, and its storage options (any of
    ``--storage-option``'s, such as MAX_RETRIES)."""
    import orjson

    return {**environment(crash_at), HARNESS_STORAGE: orjson.dumps(storage or {}).decode()}


def run_harness(
    checkpoint: Path | str,
    target_spec: str,
    batches: Path,
    crash_at: str | None,
    protocol: str = "canal-json",
    mode: str = "consistent",
    changelog_tables: bool = False,
    storage: dict[str, str] | None = None,
    engine: str = "embedded",
) -> int:
    command = harness_command(
        checkpoint, target_spec, batches, protocol, mode, changelog_tables, engine
    )
    env = harness_environment(crash_at, storage)
    # (a safety net: a hung harness fails the test instead of the suite)
    done = subprocess.run(command, env=env, capture_output=True, timeout=1800, check=False)
    if done.returncode not in (0, 86):
        raise AssertionError(done.stderr.decode()[-3000:])
    return done.returncode


def assert_same_tables(killed: Any, calm: Any) -> None:
    """Equal table lists, and every table equal row by row, ``_commit_ts`` included; live
    tables (no ``_op``: a delete deleted its row), but changelog tables (``T__changes``)."""
    assert killed.tables() == calm.tables()
    for key in calm.tables():
        order = ["id", "_commit_ts", "_op"] if key[1].endswith("__changes") else ["id"]
        expected = calm.read(key).sort_by([(name, "ascending") for name in order])
        assert ("_op" in expected.column_names) == (len(order) > 1), key
        actual = killed.read(key).sort_by([(name, "ascending") for name in order])
        assert actual.to_pylist() == expected.to_pylist(), key


def reader(target_spec: str, engine: str, spark: Any = None) -> Any:
    """A sink to read a target's tables as ``engine`` wrote them."""
    from ticdc_spark.sinks import make_sink

    return make_sink(target_spec, engine=engine, spark=spark if engine == "spark" else None)


def _harness(
    checkpoint: str,
    target_spec: str,
    batches: str,
    protocol: str,
    mode: str = "consistent",
    changelog_tables: str = "",
    engine: str = "embedded",
) -> None:
    """``replicate``'s serial apply over prepared micro-batches, a commit file per batch
    (the protocol's default codec options), by ``engine``, tables with tombstones migrated
    first; the checkpoint and the tables local or on an object store (configured by the
    environment)."""
    import orjson
    import pyarrow as pa

    from ticdc_spark.pipeline.apply import Applier
    from ticdc_spark.pipeline.capabilities import Capabilities
    from ticdc_spark.pipeline.checkpoint import ChangelogLog, StateStore, spark_batches
    from ticdc_spark.pipeline.failpoints import crash_point
    from ticdc_spark.pipeline.tombstones import migrate_tombstones
    from ticdc_spark.sinks import make_sink
    from ticdc_spark.storage import StorageOptions, join, open_store

    engine, _, planner = engine.partition("+")  # ("spark+executors": planned there)
    storage = StorageOptions.from_environment(orjson.loads(os.environ.get(HARNESS_STORAGE, "{}")))
    spark_part = open_store(join(checkpoint, "spark"), storage)
    store = StateStore(checkpoint, storage=storage)
    session = None
    if engine == "spark":
        from ticdc_spark.spark.jars import engine_features
        from ticdc_spark.spark.session import local_session

        session = local_session("kill-harness", features=engine_features(target_spec, engine))
        session.sparkContext.setLogLevel("ERROR")
    applier = Applier(
        make_sink(target_spec, store.pipeline_id(), engine, session, storage),
        store,
        mode=mode,
        capabilities=Capabilities.of(protocol),
        planning=_planning(planner, session, store),
    )
    applier.sink.changelog_tables = bool(changelog_tables)
    _pause_when_asked()
    log: Any = ChangelogLog(store.root, storage)
    if planner:
        from ticdc_spark.spark.planning import PlannedLog

        log = PlannedLog(session, store)
    migrate_tombstones(applier)
    committed = max(spark_batches(spark_part, "commits"), default=-1)
    applier.recover(log, committed)
    for path in sorted(Path(batches).glob("*.arrow"))[committed + 1 :]:
        batch = int(path.stem)
        crash_point("offsets-written", batch)
        with pa.memory_map(str(path)) as source:
            changes = pa.ipc.open_file(source).read_all()
        crash_point("decoded", batch)
        log.write(batch, session.createDataFrame(changes) if planner else changes)
        crash_point("logged", batch)
        applier.apply(log.read(batch) if planner else changes, batch)
        log.prune(store.oldest())
        spark_part.write(f"commits/{batch}", b"v1\n")  # (written whole, as Spark's)
        crash_point("committed", batch)


def _planning(planner: str, session: Any, store: Any) -> Any:
    """Planning on the executors (``planner``: "executors"), or None: on the driver."""
    if not planner:
        return None
    from ticdc_spark.pipeline.planning import PartsPlanning
    from ticdc_spark.spark.planning import SparkRunner

    return PartsPlanning(SparkRunner(session, str(store.root), store.storage))


PAUSE_AT = "HARNESS_PAUSE_AT"  # POINT:BATCH:NTH of a kill point, and a directory: see below


def _pause_when_asked() -> None:
    """With ``HARNESS_PAUSE_AT=POINT:BATCH:NTH@DIR``, the harness stops at that kill point
    of the apply path (without dying): it creates ``DIR/reached`` and goes on once the test
    creates ``DIR/go`` (so that a test can stop the S3 server in the middle of a batch)."""
    spec = os.environ.get(PAUSE_AT)
    if not spec:
        return
    import time

    from ticdc_spark.pipeline import apply

    point, _, directory = spec.partition("@")
    name, batch, nth = point.split(":")
    seen = {"count": 0}
    original = apply.crash_point

    def pausing(at: str, at_batch: int | None = None) -> None:
        original(at, at_batch)
        if at != name or apply_batch() != int(batch):
            return
        seen["count"] += 1
        if seen["count"] == int(nth):
            (Path(directory) / "reached").touch()
            while not (Path(directory) / "go").exists():
                time.sleep(0.05)

    def apply_batch() -> int | None:
        from ticdc_spark.pipeline import failpoints

        return getattr(failpoints._state, "batch", None)

    apply.crash_point = pausing  # type: ignore[assignment]


if __name__ == "__main__":
    _harness(*sys.argv[1:8])
