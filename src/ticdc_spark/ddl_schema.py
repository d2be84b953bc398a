"""Moved to :mod:`ticdc_spark.sql` (CREATE TABLE, ALTER TABLE and the statement targets).

Kept while the pipeline modules (``consume``, being split on another branch) still import
this name; the lead removes it at the merge, once they import ``ticdc_spark.sql``.
"""

from ticdc_spark.sql import (
    alter_table,
    apply_alter_table,
    apply_index_ddl,
    ddl_target,
    dropped_tables,
    parse_create_table,
    parse_rename_tables,
)

__all__ = [
    "alter_table",
    "apply_alter_table",
    "apply_index_ddl",
    "ddl_target",
    "dropped_tables",
    "parse_create_table",
    "parse_rename_tables",
]
