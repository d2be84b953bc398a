"""Classifying DDL statements into TiDB actions."""

from __future__ import annotations

import pytest

from ticdc_spark.model import DDLType
from ticdc_spark.sql import classify


@pytest.mark.parametrize(
    ("sql", "action"),
    [
        ("CREATE TABLE test.t1(id int primary key, val varchar(16))", DDLType.CREATE_TABLE),
        ("create table if not exists `a`.`b` (x int)", DDLType.CREATE_TABLE),
        ("drop database if exists test", DDLType.DROP_SCHEMA),
        ("CREATE DATABASE `d` /* comment */", DDLType.CREATE_SCHEMA),
        ("DROP TABLE `s`.`t`", DDLType.DROP_TABLE),
        ("TRUNCATE TABLE t", DDLType.TRUNCATE_TABLE),
        ("RENAME TABLE `a`.`b` TO `c`.`d`", DDLType.RENAME_TABLE),
        ("ALTER TABLE t RENAME TO u", DDLType.RENAME_TABLE),
        ("ALTER TABLE `user` ADD COLUMN `createTime` TIMESTAMP", DDLType.ADD_COLUMN),
        ("alter table t add c int", DDLType.ADD_COLUMN),
        ("ALTER TABLE t DROP COLUMN c", DDLType.DROP_COLUMN),
        ("ALTER TABLE t MODIFY COLUMN c bigint", DDLType.MODIFY_COLUMN),
        ("ALTER TABLE t CHANGE c d bigint", DDLType.MODIFY_COLUMN),
        ("ALTER TABLE t ADD INDEX idx (c)", DDLType.ADD_INDEX),
        ("CREATE UNIQUE INDEX u ON t (c)", DDLType.ADD_INDEX),
        ("ALTER TABLE t DROP INDEX idx", DDLType.DROP_INDEX),
        ("ALTER TABLE t ADD PRIMARY KEY (id)", DDLType.ADD_PRIMARY_KEY),
        ("ALTER TABLE t ADD COLUMN a int, ADD COLUMN `b,c` int", DDLType.ADD_COLUMN),
        ("ALTER TABLE t ADD COLUMN a int, DROP COLUMN b", DDLType.ACTION_MULTI_SCHEMA_CHANGE),
        ("ALTER TABLE t COMMENT = 'drop column x'", DDLType.MODIFY_TABLE_COMMENT),
        ("CREATE VIEW v AS SELECT 1", DDLType.CREATE_VIEW),
        ("GRANT ALL ON *.* TO u", DDLType.NONE),
    ],
)
def test_classify(sql: str, action: DDLType) -> None:
    assert classify(sql) is action


def test_the_saved_consumer_state_keeps_the_whole_catalog() -> None:
    """After a restart DDLs work from the saved catalog: it keeps unique indexes (a DROP INDEX
    of the handle key's index must find it), nullability and defaults, not only the handle
    key the changelog's schema JSON carries."""
    from ticdc_spark.pipeline.state import ConsumerState
    from ticdc_spark.sql import alter_table, parse_create_table

    schema = parse_create_table(
        "CREATE TABLE `db`.`t` (`a` int NOT NULL, `b` varchar(8) DEFAULT 'x''y', "
        "`c` datetime DEFAULT CURRENT_TIMESTAMP, `e` enum('p\\\\','q') NOT NULL, "
        "UNIQUE KEY `uk` (`a`), KEY `k` (`b`))",
        "db",
    )
    assert schema is not None and schema.handle_key == ("a",)
    saved = ConsumerState(tables={("db", "t"): schema}).to_json()
    restored = ConsumerState.from_json(saved).tables[("db", "t")]
    assert restored == schema
    dropped, _ = alter_table(restored, "ALTER TABLE `db`.`t` DROP INDEX `uk`")
    assert dropped.handle_key == ()
