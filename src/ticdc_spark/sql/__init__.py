"""Reading the MySQL/TiDB DDL a CDC stream carries.

A consumer of Canal-JSON or Open Protocol learns a table's full types (DECIMAL precision,
ENUM members, fractional seconds) only from its CREATE TABLE statement, and keeps them in step
through ALTER TABLE, RENAME and index statements; every consumer needs to know which action a
DDL is.  One lexer (:mod:`.lexer`) that respects quoting, comments and parentheses, and on it:

* :mod:`.classification`: the TiDB action a statement performs (:func:`classify`);
* :mod:`.definitions`: column definitions and keys, the parts of a table definition;
* :mod:`.create_table`: the schema a CREATE TABLE creates (:func:`parse_create_table`);
* :mod:`.alter_table`: a schema after an ALTER TABLE or an index statement;
* :mod:`.targets`: the tables a statement names (DROP TABLE, RENAME TABLE, any DDL's target).

Not a full SQL parser: clauses that do not change columns or keys (table options,
partitioning, TTL, ...) are accepted and ignored, and a statement the readers cannot read
raises :class:`~ticdc_spark.errors.DDLParseError` (the classifier never raises).
"""

from ticdc_spark.sql.alter_table import alter_table, apply_alter_table, apply_index_ddl
from ticdc_spark.sql.classification import classify
from ticdc_spark.sql.create_table import parse_create_table
from ticdc_spark.sql.targets import ddl_target, dropped_tables, parse_rename_tables

__all__ = [
    "alter_table",
    "apply_alter_table",
    "apply_index_ddl",
    "classify",
    "ddl_target",
    "dropped_tables",
    "parse_create_table",
    "parse_rename_tables",
]
