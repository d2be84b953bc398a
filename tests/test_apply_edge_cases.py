"""Applying hand-written changelogs: the cases a workload rarely produces (composite and
missing keys, key changes, type changes, updates TiCDC splits in two, renames), on the real
sinks.  Found by a review of the apply layer; each failed before its fix."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pytest

from ticdc_spark.model import DDLEvent, DDLType, Watermark
from ticdc_spark.pipeline.apply import Applier
from ticdc_spark.pipeline.changelog import ChangelogBuilder
from ticdc_spark.pipeline.checkpoint import StateStore
from ticdc_spark.pipeline.planner import Planner
from ticdc_spark.pipeline.steps import TableChanges
from ticdc_spark.sinks.base import live
from ticdc_spark.sinks.delta import DeltaSink
from ticdc_spark.sinks.iceberg import IcebergSink


def _schema(columns: list[list[str]], pk: list[str]) -> str:
    return orjson.dumps({"columns": columns, "pk": pk}).decode()


ID_V = _schema([["id", "int"], ["v", "varchar(10)"]], ["id"])
TWO_KEYS = _schema([["a", "int"], ["b", "int"], ["v", "int"]], ["a", "b"])
NO_KEY = _schema([["a", "int"], ["b", "varchar(10)"]], [])


class Script:
    """A changelog written by hand, message by message, each partition with its own offsets.
    ``table()`` is everything written so far (applying it again is a replay)."""

    def __init__(self) -> None:
        self.builder = ChangelogBuilder()
        self.offsets: dict[int, int] = {}

    def _position(self, partition: int) -> tuple[str, int, int]:
        offset = self.offsets.get(partition, 0)
        self.offsets[partition] = offset + 1
        return "cdc", partition, offset

    def row(self, op: str, ts: int, before: Any, after: Any, p: int = 0, **kw: Any) -> Script:
        schema, table = kw.get("schema", ID_V), kw.get("table", "t")
        self.builder.append_row(op, "db", table, ts, before, after, schema, (*self._position(p), 0))
        return self

    def insert(self, ts: int, image: dict, p: int = 0, **kw: Any) -> Script:
        return self.row("INSERT", ts, None, image, p, **kw)

    def update(self, ts: int, before: dict, after: dict, p: int = 0, **kw: Any) -> Script:
        return self.row("UPDATE", ts, before, after, p, **kw)

    def delete(self, ts: int, image: dict, p: int = 0, **kw: Any) -> Script:
        return self.row("DELETE", ts, image, None, p, **kw)

    def ddl(self, ts: int, sql: str, kind: DDLType, table: str = "t") -> Script:
        self.builder.add_events([DDLEvent(kind, sql, ts, "db", table)], *self._position(0))
        return self

    def watermark(self, ts: int, *partitions: int) -> Script:
        for p in partitions:
            self.builder.add_events([Watermark(ts)], *self._position(p))
        return self

    def table(self) -> pa.Table:
        return pa.Table.from_batches([self.builder.to_batch()])


def _sink(kind: str, root: Path) -> Any:
    if kind == "delta":
        return DeltaSink(root / "lake")
    return IcebergSink(f"sqlite:///{root / 'catalog.db'}", f"file://{root / 'warehouse'}")


def _applier(root: Path, kind: str = "delta", mode: str = "eventual") -> Applier:
    return Applier(_sink(kind, root), StateStore(root / "checkpoint"), mode=mode)


def _rows(applier: Applier, table: str = "t") -> list[dict]:
    return sorted(live(applier.sink.read(("db", table))).to_pylist(), key=str)


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_a_table_with_a_composite_key_merges(kind: str, tmp_path: Path) -> None:
    """delta-rs read the unbracketed `IS NOT DISTINCT FROM ... AND ...` predicate wrongly."""
    script = Script().insert(100, {"a": "1", "b": "2", "v": "1"}, schema=TWO_KEYS)
    script.insert(100, {"a": "1", "b": "3", "v": "1"}, schema=TWO_KEYS)
    applier = _applier(tmp_path, kind)
    applier.apply(script.table(), 0)
    script.update(200, {"a": "1", "b": "2", "v": "1"}, {"a": "1", "b": "2", "v": "2"},
                  schema=TWO_KEYS)  # fmt: skip
    script.delete(200, {"a": "1", "b": "3", "v": "1"}, schema=TWO_KEYS)
    applier.apply(script.table(), 1)
    assert _rows(applier) == [{"a": 1, "b": 2, "v": 2}]


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_an_update_that_changes_the_key_moves_the_row(kind: str, tmp_path: Path) -> None:
    """The planner concatenated chunked key columns and failed on any moved key."""
    script = Script().insert(100, {"id": "1", "v": "a"})
    script.update(200, {"id": "1", "v": "a"}, {"id": "2", "v": "a"}).insert(
        300, {"id": "1", "v": "b"}
    )
    applier = _applier(tmp_path, kind)
    applier.apply(script.table(), 0)
    assert _rows(applier) == [{"id": 1, "v": "b"}, {"id": 2, "v": "a"}]


def test_an_update_of_a_table_without_a_key_is_planned() -> None:
    """Without a key all columns are the key: every update moves the row."""
    plan = Planner("eventual").plan(
        Script().update(200, {"a": "1", "b": "x"}, {"a": "1", "b": "y"}, schema=NO_KEY).table()
    )
    changes = [s for s in plan.steps if isinstance(s, TableChanges)]
    assert sorted(r["op"] for s in changes for r in s.rows.to_pylist()) == ["delete", "update"]


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_modify_column_changes_the_column_type(kind: str, tmp_path: Path) -> None:
    """The type comparison compared each column with itself: the table kept INT."""
    wide = _schema([["id", "int"], ["n", "bigint"]], ["id"])
    script = Script().ddl(50, "CREATE TABLE `db`.`t` (`id` int PRIMARY KEY, `n` int)",
                          DDLType.CREATE_TABLE)  # fmt: skip
    script.insert(100, {"id": "1", "n": "1"}, schema=_schema([["id", "int"], ["n", "int"]], ["id"]))
    script.ddl(200, "ALTER TABLE `db`.`t` MODIFY COLUMN `n` bigint", DDLType.MODIFY_COLUMN)
    script.insert(300, {"id": "2", "n": "3000000000"}, schema=wide)
    applier = _applier(tmp_path, kind)
    applier.apply(script.table(), 0)
    assert applier.sink.arrow_schema(("db", "t")).field("n").type == pa.int64()
    assert _rows(applier) == [{"id": 1, "n": 1}, {"id": 2, "n": 3000000000}]


@pytest.mark.parametrize("mode", ["consistent", "eventual"])
def test_an_update_split_in_two_across_partitions_keeps_the_row(mode: str, tmp_path: Path) -> None:
    """TiCDC splits an update of a unique key into a DELETE and an INSERT of the same row at
    one commit ts; dispatched by that column they reach different partitions.  The INSERT is
    the final state whatever the partition numbers."""
    unique = _schema([["id", "int"], ["u", "varchar(10)"]], ["id"])
    script = Script().insert(100, {"id": "1", "u": "x"}, schema=unique).watermark(150, 0, 1)
    applier = _applier(tmp_path, mode=mode)
    applier.apply(script.table(), 0)
    script.insert(200, {"id": "1", "u": "y"}, p=0, schema=unique)
    script.delete(200, {"id": "1", "u": "x"}, p=1, schema=unique).watermark(300, 0, 1)
    applier.apply(script.table(), 1)
    assert _rows(applier) == [{"id": 1, "u": "y"}]


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_the_insert_half_of_a_split_update_in_a_later_batch_lands(
    kind: str, tmp_path: Path
) -> None:
    """Eventual mode, the DELETE and the INSERT of a split update in two micro-batches: the
    INSERT equals the tombstone's commit ts and must still apply (and a replay must not)."""
    applier = _applier(tmp_path, kind)
    script = Script().insert(100, {"id": "1", "v": "x"})
    applier.apply(script.table(), 0)
    applier.apply(Script().delete(200, {"id": "1", "v": "x"}).table(), 1)
    applier.apply(Script().insert(200, {"id": "1", "v": "y"}).table(), 2)
    assert _rows(applier) == [{"id": 1, "v": "y"}]
    applier.apply(Script().insert(200, {"id": "1", "v": "y"}).table(), 3)  # a replay
    applier.apply(Script().delete(200, {"id": "1", "v": "x"}).table(), 4)  # a replay
    assert _rows(applier) == [{"id": 1, "v": "y"}]


def test_a_late_row_of_a_renamed_table_does_not_recreate_it(tmp_path: Path) -> None:
    script = Script().insert(100, {"id": "1", "v": "a"})
    script.ddl(200, "RENAME TABLE `db`.`t` TO `db`.`t2`", DDLType.RENAME_TABLE, table="t2")
    applier = _applier(tmp_path)
    applier.apply(script.table(), 0)
    applier.apply(Script().insert(100, {"id": "1", "v": "a"}).table(), 1)  # a duplicate
    assert applier.sink.tables() == [("db", "t2")]


def test_float_with_a_precision_over_24_is_a_double(tmp_path: Path) -> None:
    """MySQL: FLOAT(p) with p of 25 to 53 is a DOUBLE (it was stored as float32)."""
    script = Script().ddl(50, "CREATE TABLE `db`.`t` (`id` int PRIMARY KEY, `f` float(53))",
                          DDLType.CREATE_TABLE)  # fmt: skip
    script.insert(100, {"id": "1", "f": "0.1234567890123"},
                  schema=_schema([["id", "int"], ["f", "double"]], ["id"]))  # fmt: skip
    applier = _applier(tmp_path)
    applier.apply(script.table(), 0)
    assert _rows(applier) == [{"id": 1, "f": 0.1234567890123}]


_CREATE = "CREATE TABLE `db`.`t` (`id` int PRIMARY KEY, `v` varchar(10))"


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
@pytest.mark.parametrize(
    "alter",
    [
        "ALTER TABLE `db`.`t` RENAME COLUMN `v` TO `w`",
        "ALTER TABLE `db`.`t` CHANGE COLUMN `V` `w` varchar(10)",
        "ALTER TABLE `db`.`t` RENAME COLUMN `v` TO `x`, RENAME COLUMN `x` TO `w`",
    ],
)
def test_a_renamed_column_keeps_its_values(kind: str, alter: str, tmp_path: Path) -> None:
    """The rewrite copied columns by name, so a renamed one came out empty."""
    script = Script().ddl(50, _CREATE, DDLType.CREATE_TABLE).insert(100, {"id": "1", "v": "a"})
    script.ddl(200, alter, DDLType.MODIFY_COLUMN)
    applier = _applier(tmp_path, kind)
    applier.apply(script.table(), 0)
    assert _rows(applier) == [{"id": 1, "w": "a"}]


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_an_added_column_gives_existing_rows_its_default(kind: str, tmp_path: Path) -> None:
    """Upstream's existing rows take a new column's DEFAULT and TiCDC sends no change for
    them; a default that is an expression stays null (its value is not known here)."""
    script = Script().ddl(50, _CREATE, DDLType.CREATE_TABLE).insert(100, {"id": "1", "v": "a"})
    script.ddl(200, "ALTER TABLE `db`.`t` ADD COLUMN `c` int NOT NULL DEFAULT -5, "
               "ADD COLUMN `s` varchar(4) DEFAULT 'it''s', ADD COLUMN `d` decimal(4,1) "
               "DEFAULT 1.5, ADD COLUMN `at` datetime DEFAULT CURRENT_TIMESTAMP",
               DDLType.ADD_COLUMNS)  # fmt: skip
    applier = _applier(tmp_path, kind)
    applier.apply(script.table(), 0)
    (row,) = _rows(applier)
    assert row == {"id": 1, "v": "a", "c": -5, "s": "it's", "d": Decimal("1.5"), "at": None}


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_a_table_without_a_key_takes_rows_holding_nulls(kind: str, tmp_path: Path) -> None:
    """All columns are the key, matched null-safely (pyiceberg's upsert refused a null)."""
    applier = _applier(tmp_path, kind)
    first = Script().insert(100, {"a": "1", "b": None}, schema=NO_KEY)
    first.insert(100, {"a": "2", "b": "x"}, schema=NO_KEY)
    applier.apply(first.table(), 0)
    applier.apply(first.table(), 1)  # a replay
    assert _rows(applier) == [{"a": 1, "b": None}, {"a": 2, "b": "x"}]
    applier.apply(Script().delete(200, {"a": "1", "b": None}, schema=NO_KEY).table(), 2)
    applier.apply(first.table(), 3)  # a late replay of the insert must not bring it back
    assert _rows(applier) == [{"a": 2, "b": "x"}]


def test_a_late_row_from_before_a_drop_column_does_not_bring_the_column_back(
    tmp_path: Path,
) -> None:
    """Eventual mode: partition 1's DROP COLUMN is applied before partition 0's older row,
    whose schema still has the column; the row must not add it to the table again."""
    with_c = _schema([["id", "int"], ["v", "varchar(10)"], ["c", "int"]], ["id"])
    create = "CREATE TABLE `db`.`t` (`id` int PRIMARY KEY, `v` varchar(10), `c` int)"
    drop = "ALTER TABLE `db`.`t` DROP COLUMN `c`"
    script = Script().ddl(50, create, DDLType.CREATE_TABLE)
    script.insert(60, {"id": "2", "v": "b", "c": "2"}, p=1, schema=with_c)
    script.ddl(200, drop, DDLType.DROP_COLUMN)
    applier = _applier(tmp_path)
    applier.apply(script.table(), 0)
    late = Script().insert(100, {"id": "1", "v": "a", "c": "1"}, schema=with_c)
    applier.apply(late.table(), 1)
    assert _rows(applier) == [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]


@pytest.mark.parametrize("swap_first", [True, False])
def test_a_transaction_shifting_keys_keeps_every_row(swap_first: bool, tmp_path: Path) -> None:
    """One transaction moves key 1 to 2 and key 0 to 1 (updates TiCDC did not split): key 1
    must survive in whichever order the two updates arrive (a moved key's delete goes
    first among its commit ts's changes)."""
    script = Script().insert(100, {"id": "0", "v": "a"}).insert(100, {"id": "1", "v": "b"})
    one_to_two = ({"id": "1", "v": "b"}, {"id": "2", "v": "b"})
    zero_to_one = ({"id": "0", "v": "a"}, {"id": "1", "v": "a"})
    for before, after in (one_to_two, zero_to_one) if swap_first else (zero_to_one, one_to_two):
        script.update(200, before, after)
    applier = _applier(tmp_path)
    applier.apply(script.table(), 0)
    assert _rows(applier) == [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_adding_columns_and_indexes_does_not_rewrite_the_table(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A column added in place sits after the bookkeeping ones, and Iceberg stores TINYINT as
    int and strings as large strings: none of that may make every later DDL rewrite the
    whole table (it did, on both formats)."""
    applier = _applier(tmp_path, kind)
    rewrites: list[str] = []
    original = type(applier.sink).rewrite

    def counted(self: Any, schema: Any, *args: Any) -> None:
        rewrites.append(schema.table)
        original(self, schema, *args)

    monkeypatch.setattr(type(applier.sink), "rewrite", counted)
    small = _schema([["id", "int"], ["v", "varchar(10)"], ["s", "tinyint"]], ["id"])
    script = Script().ddl(50, "CREATE TABLE `db`.`t` (`id` int PRIMARY KEY, `v` varchar(10), "
                          "`s` tinyint)", DDLType.CREATE_TABLE)  # fmt: skip
    script.insert(100, {"id": "1", "v": "a", "s": "1"}, schema=small)
    script.ddl(200, "ALTER TABLE `db`.`t` ADD COLUMN `c` int", DDLType.ADD_COLUMN)
    script.ddl(300, "ALTER TABLE `db`.`t` ADD COLUMN `d` int", DDLType.ADD_COLUMN)
    script.ddl(400, "ALTER TABLE `db`.`t` ADD INDEX `i` (`v`)", DDLType.ADD_INDEX)
    script.ddl(500, "ALTER TABLE `db`.`t` DROP COLUMN `c`", DDLType.DROP_COLUMN)
    applier.apply(script.table(), 0)
    assert rewrites == ["t"]  # the DROP COLUMN only
    assert _rows(applier) == [{"id": 1, "v": "a", "s": 1, "d": None}]


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_two_keys_moved_by_one_transaction_both_move(kind: str, tmp_path: Path) -> None:
    """Two moved keys' deletes at one commit ts must not share an order (one was picked
    twice and the other lost: a failed Delta merge, a stale Iceberg row)."""
    applier = _applier(tmp_path, kind)
    applier.apply(Script().insert(100, {"id": "1", "v": "a"}).insert(100, {"id": "2", "v": "b"})
                  .table(), 0)  # fmt: skip
    script = Script().update(200, {"id": "1", "v": "a"}, {"id": "11", "v": "a"})
    script.update(200, {"id": "2", "v": "b"}, {"id": "12", "v": "b"})
    applier.apply(script.table(), 1)
    assert _rows(applier) == [{"id": 11, "v": "a"}, {"id": 12, "v": "b"}]


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_a_binary_column_default_is_its_literal_bytes(kind: str, tmp_path: Path) -> None:
    """The DEFAULT of a binary column is bytes as written (changelog text is base64)."""
    script = Script().ddl(50, _CREATE, DDLType.CREATE_TABLE).insert(100, {"id": "1", "v": "a"})
    script.ddl(200, "ALTER TABLE `db`.`t` ADD COLUMN `c` varbinary(8) DEFAULT 'abcd', "
               "ADD COLUMN `b` binary(3) DEFAULT 'x'", DDLType.ADD_COLUMNS)  # fmt: skip
    applier = _applier(tmp_path, kind)
    applier.apply(script.table(), 0)
    (row,) = _rows(applier)
    assert (row["c"], row["b"]) == (b"abcd", b"x\0\0")
