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


def target(kind: str, root: Path) -> str:
    if kind == "delta":
        return f"delta:{root / 'lake'}"
    return f"iceberg:sqlite:///{root / 'catalog.db'}#file://{root / 'warehouse'}"


def harness_command(
    checkpoint: Path,
    target_spec: str,
    batches: Path,
    protocol: str = "canal-json",
    engine: str = "embedded",
) -> list[str]:
    return [
        sys.executable,
        str(Path(__file__).resolve()),
        str(checkpoint),
        target_spec,
        str(batches),
        protocol,
        engine,
    ]


def environment(crash_at: str | None = None) -> dict[str, str]:
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), str(HERE), env.get("PYTHONPATH", "")])
    env.pop("TICDC_SPARK_CRASH_AT", None)
    if crash_at:
        env["TICDC_SPARK_CRASH_AT"] = crash_at
    return env


def run_harness(
    checkpoint: Path,
    target_spec: str,
    batches: Path,
    crash_at: str | None,
    protocol: str = "canal-json",
    engine: str = "embedded",
) -> int:
    command = harness_command(checkpoint, target_spec, batches, protocol, engine)
    done = subprocess.run(
        command, env=environment(crash_at), capture_output=True, timeout=1800, check=False
    )
    if done.returncode not in (0, 86):
        raise AssertionError(done.stderr.decode()[-3000:])
    return done.returncode


def assert_same_tables(killed: Any, calm: Any) -> None:
    """Equal table lists, and every table equal row by row, tombstones, ``_commit_ts`` and
    ``_op`` included."""
    assert killed.tables() == calm.tables()
    for key in calm.tables():
        expected = calm.read(key).sort_by("id").to_pylist()
        assert killed.read(key).sort_by("id").to_pylist() == expected, key


def reader(target_spec: str, engine: str, spark: Any = None) -> Any:
    """A sink to read a target's tables as ``engine`` wrote them."""
    from ticdc_spark.sinks import make_sink

    return make_sink(target_spec, engine=engine, spark=spark if engine == "spark" else None)


def _harness(checkpoint: str, target_spec: str, batches: str, protocol: str, engine: str) -> None:
    """``replicate``'s serial apply over prepared micro-batches, a commit file per batch
    (the protocol's default codec options), by ``engine``."""
    import pyarrow as pa

    from ticdc_spark.pipeline.apply import Applier
    from ticdc_spark.pipeline.capabilities import Capabilities
    from ticdc_spark.pipeline.checkpoint import ChangelogLog, StateStore, spark_batches
    from ticdc_spark.pipeline.failpoints import crash_point
    from ticdc_spark.sinks import make_sink

    commits = Path(checkpoint) / "spark" / "commits"
    commits.mkdir(parents=True, exist_ok=True)
    store = StateStore(checkpoint)
    spark = None
    if engine == "spark":
        from ticdc_spark.spark.jars import engine_features
        from ticdc_spark.spark.session import local_session

        spark = local_session("kill-harness", features=engine_features(target_spec, engine))
        spark.sparkContext.setLogLevel("ERROR")
    applier = Applier(
        make_sink(target_spec, store.pipeline_id(), engine, spark),
        store,
        capabilities=Capabilities.of(protocol),
    )
    log = ChangelogLog(store.root)
    committed = max(spark_batches(commits.parent, "commits"), default=-1)
    applier.recover(log, committed)
    for path in sorted(Path(batches).glob("*.arrow"))[committed + 1 :]:
        batch = int(path.stem)
        crash_point("offsets-written", batch)
        with pa.memory_map(str(path)) as source:
            changes = pa.ipc.open_file(source).read_all()
        crash_point("decoded", batch)
        log.write(batch, changes)
        crash_point("logged", batch)
        applier.apply(changes, batch)
        log.prune(store.oldest())
        (commits / f".{batch}.tmp").write_text("v1\n")
        os.replace(commits / f".{batch}.tmp", commits / str(batch))
        crash_point("committed", batch)


if __name__ == "__main__":
    _harness(*sys.argv[1:6])
