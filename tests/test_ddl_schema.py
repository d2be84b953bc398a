"""Applying CREATE/ALTER/RENAME/index DDL to table schemas."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings

from strategies import schemas
from ticdc_spark.errors import DDLParseError
from ticdc_spark.model import ColumnFlag, TableSchema
from ticdc_spark.pipeline.state import ConsumerState
from ticdc_spark.sql import (
    alter_table,
    apply_alter_table,
    apply_index_ddl,
    ddl_target,
    dropped_tables,
    parse_create_table,
    parse_rename_tables,
)
from ticdc_spark.testing.workload import alltypes_schema, create_table_sql, sbtest_schema

TIDB_DDL = """CREATE TABLE `t` (
  `id` bigint(20) NOT NULL /*T![auto_rand] AUTO_RANDOM(5) */,
  `key` varchar(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT 'a''b',
  `ts` timestamp(3) NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  `v` int GENERATED ALWAYS AS (`id` + 1) VIRTUAL,
  `s` int AS (`id` * 2) STORED,
  `e` enum('x','y z') DEFAULT 'x' COMMENT 'an, enum',
  PRIMARY KEY (`id`) /*T![clustered_index] CLUSTERED */,
  UNIQUE KEY `uk` (`key`(10), `ts` DESC),
  KEY `idx` (`e`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"""


def test_tidb_show_create_table() -> None:
    schema = parse_create_table(TIDB_DDL, "db")
    assert schema is not None
    assert (schema.database, schema.table) == ("db", "t")
    assert [(c.name, c.type.sql(), c.nullable) for c in schema.columns] == [
        ("id", "bigint(20)", False),
        ("key", "varchar(20)", True),
        ("ts", "timestamp(3)", True),
        ("s", "int", True),
        ("e", "enum('x','y z')", True),
    ]  # the VIRTUAL generated column is not replicated by TiCDC, so not kept
    assert schema.column("key").type.collation == "utf8mb4_bin"
    assert schema.column("key").default == "a'b"
    assert schema.column("s").generated
    assert schema.primary_key == ("id",)
    assert [(i.name, i.columns, i.unique) for i in schema.indexes[1:]] == [
        ("uk", ("key", "ts"), True),
        ("idx", ("e",), False),
    ]


def test_golden_all_types_table(golden_dir: Path) -> None:
    sql = (golden_dir / "debezium" / "datatype.ddl.sql").read_text()
    schema = parse_create_table(sql, "test")
    assert schema is not None and len(schema.columns) == 51
    types = {c.name: c.type.sql() for c in schema.columns}
    assert types["col_dt_fsp_4"] == "datetime(4)"
    assert types["col_numeric"] == "decimal(10,5)"
    assert types["col_bigint_unsigned"] == "bigint unsigned"
    assert types["col_enum"] == "enum('a','b','c')"
    assert types["col_bit_60"] == "bit(60)"
    assert schema.primary_key == ("pk",)


def test_workload_tables_round_trip_through_their_ddl() -> None:
    for schema in (sbtest_schema(), alltypes_schema()):
        parsed = parse_create_table(create_table_sql(schema))
        assert parsed is not None
        assert [(c.name, c.type) for c in parsed.columns] == [
            (c.name, c.type) for c in schema.columns
        ]
        assert parsed.primary_key == schema.primary_key


@settings(max_examples=60, deadline=None)
@given(schema=schemas())
def test_random_schemas_round_trip(schema) -> None:  # type: ignore[no-untyped-def]
    parsed = parse_create_table(create_table_sql(schema))
    assert parsed is not None
    assert [(c.name, c.type.sql()) for c in parsed.columns] == [
        (c.name, c.type.sql()) for c in schema.columns
    ]


def test_alter_clauses() -> None:
    schema = parse_create_table(TIDB_DDL, "db")
    assert schema is not None
    altered = apply_alter_table(
        schema,
        (
            "ALTER TABLE t ADD COLUMN n decimal(10,2) NOT NULL DEFAULT 0 AFTER id, DROP COLUMN s, "
            "MODIFY e enum('x','y z','w'), CHANGE `key` k2 varchar(30), RENAME COLUMN ts TO ts2, "
            "ADD INDEX i2 (n), ADD COLUMN (a int, b text), ALTER COLUMN a SET DEFAULT 5, "
            "COMMENT = 'x', ENGINE = InnoDB, DROP INDEX idx"
        ),
    )
    assert [(c.name, c.type.sql()) for c in altered.columns] == [
        ("id", "bigint(20)"),
        ("n", "decimal(10,2)"),
        ("k2", "varchar(30)"),
        ("ts2", "timestamp(3)"),
        ("e", "enum('x','y z','w')"),
        ("a", "int"),
        ("b", "text"),
    ]
    assert altered.column("a").default == "5"
    assert [(i.name, i.columns) for i in altered.indexes] == [
        ("PRIMARY", ("id",)),
        ("uk", ("k2", "ts2")),
        ("i2", ("n",)),
    ]
    moved = apply_alter_table(altered, "ALTER TABLE t ADD COLUMN z int FIRST, RENAME TO db2.t2")
    assert moved.column_names[0] == "z" and (moved.database, moved.table) == ("db2", "t2")


def test_dropping_a_key_column_drops_it_from_the_index() -> None:
    schema = parse_create_table(
        "CREATE TABLE t (a int, b int, c int, UNIQUE KEY u (a, b), KEY k (b))"
    )
    assert schema is not None
    altered = apply_alter_table(schema, "ALTER TABLE t DROP COLUMN b")
    assert [(i.name, i.columns) for i in altered.indexes] == [("u", ("a",))]


def test_primary_key_changes() -> None:
    schema = parse_create_table("CREATE TABLE t (a int NOT NULL, b int NOT NULL)")
    assert schema is not None and schema.primary_key == ()
    keyed = apply_alter_table(schema, "ALTER TABLE t ADD PRIMARY KEY (a, b)")
    assert keyed.primary_key == ("a", "b")
    assert apply_alter_table(keyed, "ALTER TABLE t DROP PRIMARY KEY").primary_key == ()


def test_index_statements() -> None:
    schema = parse_create_table("CREATE TABLE t (a int NOT NULL, b int)")
    assert schema is not None
    indexed = apply_index_ddl(schema, "CREATE UNIQUE INDEX ua ON t (a)")
    assert indexed.handle_key == ("a",)
    assert apply_index_ddl(indexed, "DROP INDEX ua ON t").indexes == ()


def test_targets_and_renames() -> None:
    assert parse_rename_tables("RENAME TABLE a TO b, c.d TO e.f") == [
        (("", "a"), ("", "b")),
        (("c", "d"), ("e", "f")),
    ]
    assert ddl_target("CREATE INDEX i ON d.t (a)") == ("d", "t")
    assert ddl_target("DROP DATABASE IF EXISTS x") == ("x", "")
    assert ddl_target("TRUNCATE TABLE t", "d") == ("d", "t")
    assert ddl_target("ALTER TABLE `s`.`t` ADD c int") == ("s", "t")
    assert dropped_tables("DROP TABLE IF EXISTS a, b.c", "d") == [("d", "a"), ("b", "c")]


def test_like_and_select_have_no_columns() -> None:
    assert parse_create_table("CREATE TABLE t LIKE u") is None
    assert parse_create_table("CREATE TABLE t AS SELECT 1") is None


@pytest.mark.parametrize(
    "sql",
    [
        "CREATE TABLE t (a int",
        "ALTER TABLE t MODIFY nope int",
        "CREATE TABLE t (a ?)",
        "CREATE VIEW v AS SELECT 1",
    ],
)
def test_unreadable_statements_raise(sql: str) -> None:
    schema = parse_create_table("CREATE TABLE t (a int)")
    assert schema is not None
    with pytest.raises(DDLParseError):
        if sql.startswith("ALTER"):
            apply_alter_table(schema, sql)
        else:
            parse_create_table(sql)


def test_key_changes_move_the_handle_key_even_where_flags_named_it() -> None:
    """A protocol's column flags can name the handle key with no index to go with it; DROP
    INDEX of the handle's index and ADD PRIMARY KEY must still move it (flags kept it)."""
    from ticdc_spark.model import TableSchema
    from ticdc_spark.sql import alter_table, parse_create_table

    schema = parse_create_table(
        "CREATE TABLE t (a int NOT NULL, b int NOT NULL, UNIQUE KEY uk (a))", "db"
    )
    assert schema is not None and schema.handle_key == ("a",)
    assert alter_table(schema, "ALTER TABLE t DROP INDEX uk")[0].handle_key == ()
    moved = alter_table(schema, "ALTER TABLE t ADD PRIMARY KEY (b)")[0]
    assert moved.handle_key == ("b",) and moved.primary_key == ("b",)
    flagged = TableSchema("db", "t", schema.columns, ())  # flags only, as Open Protocol has
    assert flagged.handle_key == ("a",)
    assert alter_table(flagged, "ALTER TABLE t ADD PRIMARY KEY (b)")[0].handle_key == ("b",)


# --------------------------------------------------------------------------------------------
# VIRTUAL generated columns: TiCDC never sends them (tiflow ``IsColCDCVisible``), and a unique
# index over one never identifies rows (tiflow ``IsIndexUnique``).

_GENERATED = """CREATE TABLE t (
  id int NOT NULL, a int NOT NULL, b int NOT NULL,
  v int AS (a + 1) VIRTUAL NOT NULL, s int AS (a * 2) STORED,
  PRIMARY KEY (id))"""


def _generated() -> TableSchema:
    schema = parse_create_table(_GENERATED, "db")
    assert schema is not None
    return schema


def test_modify_and_change_make_a_column_virtual() -> None:
    schema = _generated()
    assert schema.column_names == ("id", "a", "b", "s")
    assert schema.virtual_columns == ("v",)
    modified = apply_alter_table(schema, "ALTER TABLE t MODIFY COLUMN b int AS (a + 2) VIRTUAL")
    assert modified.column_names == ("id", "a", "s")
    assert modified.virtual_columns == ("v", "b")
    changed, renamed = alter_table(schema, "ALTER TABLE t CHANGE s s2 bigint AS (a * 3) VIRTUAL")
    assert changed.column_names == ("id", "a", "b")
    assert changed.virtual_columns == ("v", "s2")
    assert renamed == {"s2": "s"}


def test_modify_change_and_rename_of_a_virtual_column_keep_it_virtual() -> None:
    schema = _generated()
    # (this failed with "column 'v' does not exist": the column is not among the replicated)
    modified = apply_alter_table(schema, "ALTER TABLE t MODIFY v bigint AS (a + 5) VIRTUAL")
    assert modified.column_names == schema.column_names
    assert modified.virtual_columns == ("v",)
    changed = apply_alter_table(schema, "ALTER TABLE t CHANGE COLUMN `V` w int AS (a) VIRTUAL")
    assert (changed.column_names, changed.virtual_columns) == (schema.column_names, ("w",))
    renamed = apply_alter_table(schema, "ALTER TABLE t RENAME COLUMN v TO w")
    assert (renamed.column_names, renamed.virtual_columns) == (schema.column_names, ("w",))
    dropped = apply_alter_table(renamed, "ALTER TABLE t DROP COLUMN w")
    assert dropped.virtual_columns == ()
    with pytest.raises(DDLParseError, match="'nope' does not exist"):
        apply_alter_table(schema, "ALTER TABLE t MODIFY nope int AS (a) VIRTUAL")


def test_a_virtual_column_made_stored_rejoins_the_replicated_columns() -> None:
    schema = _generated()
    stored = apply_alter_table(schema, "ALTER TABLE t MODIFY v int AS (a + 1) STORED AFTER a")
    assert stored.column_names == ("id", "a", "v", "b", "s")
    assert stored.virtual_columns == ()
    assert stored.column("v").generated
    plain = apply_alter_table(schema, "ALTER TABLE t CHANGE v v int")
    assert plain.column_names == ("id", "a", "b", "s", "v")
    assert not plain.column("v").generated


def test_a_unique_key_over_a_virtual_column_is_never_the_handle_key() -> None:
    unkeyed = _generated()
    schema = apply_alter_table(unkeyed, "ALTER TABLE t DROP PRIMARY KEY")
    assert schema.handle_key == ()
    for sql in (
        "ALTER TABLE t ADD UNIQUE KEY uv (v)",
        "ALTER TABLE t ADD UNIQUE KEY uav (a, v)",
        "ALTER TABLE t ADD COLUMN w int AS (b + 1) VIRTUAL NOT NULL UNIQUE",
        "ALTER TABLE t ADD UNIQUE KEY ue ((a + b))",  # TiDB: a hidden virtual column
    ):
        assert apply_alter_table(schema, sql).handle_key == (), sql
    keyed = apply_alter_table(schema, "ALTER TABLE t ADD UNIQUE KEY uv (v), ADD UNIQUE KEY ub (b)")
    assert keyed.handle_key == ("b",)
    # the unique key over the virtual column still flags the replicated columns in it
    both = apply_alter_table(schema, "ALTER TABLE t ADD UNIQUE KEY uav (a, v)")
    assert both.column("a").flags & ColumnFlag.UNIQUE_KEY


def test_a_column_made_virtual_stops_being_the_handle_key() -> None:
    schema = apply_alter_table(_generated(), "ALTER TABLE t DROP PRIMARY KEY, ADD UNIQUE (b)")
    assert schema.handle_key == ("b",)
    virtual = apply_alter_table(schema, "ALTER TABLE t MODIFY b int AS (a) VIRTUAL NOT NULL")
    assert virtual.handle_key == ()


def test_the_handle_key_is_the_unique_index_with_fewest_columns() -> None:
    schema = parse_create_table(
        "CREATE TABLE t (a int NOT NULL, b int NOT NULL, c int NOT NULL,"
        " UNIQUE KEY ab (a, b), UNIQUE KEY c (c), UNIQUE KEY b (b))"
    )
    assert schema is not None and schema.handle_key == ("c",)  # tiflow findHandleIndex


def test_expression_indexes_name_tidb_hidden_columns() -> None:
    schema = parse_create_table(
        "CREATE TABLE t (a int NOT NULL, b int NOT NULL, UNIQUE KEY ((a + 1)), KEY k (b, (a * 2)))"
    )
    assert schema is not None
    assert [(i.name, i.columns) for i in schema.indexes] == [
        ("expression_index", ("_V$_expression_index_0",)),
        ("k", ("b", "_V$_k_1")),
    ]
    assert schema.virtual_columns == ("_V$_expression_index_0", "_V$_k_1")
    assert schema.handle_key == ()
    unindexed = apply_index_ddl(schema, "DROP INDEX expression_index ON t")
    assert unindexed.virtual_columns == ("_V$_k_1",)


def test_the_consumer_state_keeps_virtual_columns_across_a_restart() -> None:
    # (a restarted consumer that forgot them would take a unique key over one as the handle)
    schema = apply_alter_table(_generated(), "ALTER TABLE t DROP PRIMARY KEY, ADD UNIQUE (v)")
    state = ConsumerState(tables={("db", "t"): schema})
    restored = ConsumerState.from_json(state.to_json()).tables[("db", "t")]
    assert restored.virtual_columns == ("v",)
    assert restored.handle_key == ()
