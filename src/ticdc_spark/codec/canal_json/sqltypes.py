"""Canal's type vocabulary: Java SQL type codes (``sqlType``) and DDL type names.

TiCDC writes ``sqlType`` as ``java.sql.Types`` codes, value-dependent for unsigned integers
(a value past the signed Java type's range gets the next wider code), and names a DDL's type
with fewer words than TiDB has actions (the decoder refines it from the SQL where it can).
"""

from __future__ import annotations

from typing import Any

from ticdc_spark.codec.common import DDL_KIND
from ticdc_spark.model import DDLType
from ticdc_spark.types import ColumnType

__all__ = ["DDL_TYPE_OF_NAME", "PROMOTION", "canal_ddl_type", "java_sql_type"]

JAVA_TYPE: dict[str, int] = {
    "tinyint": -6,
    "smallint": 5,
    "mediumint": 4,
    "int": 4,
    "bigint": -5,
    "float": 7,
    "double": 8,
    "decimal": 3,
    "date": 91,
    "datetime": 93,
    "timestamp": 93,
    "time": 92,
    "year": 12,
    "char": 1,
    "varchar": 12,
    "binary": 2004,
    "varbinary": 2004,
    "tinytext": 2005,
    "text": 2005,
    "mediumtext": 2005,
    "longtext": 2005,
    "tinyblob": 2004,
    "blob": 2004,
    "mediumblob": 2004,
    "longblob": 2004,
    "enum": 4,
    "set": -7,
    "bit": -7,
    "json": 12,
    "vector": 12,
    "geometry": -2,
}
# Unsigned integers whose value no longer fits the signed Java type get the next wider code.
PROMOTION: dict[str, tuple[int, int]] = {
    "tinyint": (127, 5),
    "smallint": (32767, 4),
    "int": (2147483647, -5),
    "bigint": (9223372036854775807, 3),
}
DDL_TYPE_NAME = DDL_KIND  # (shared with Simple: TiCDC's getDDLType)
# A canal DDL type names fewer actions than TiDB has; the SQL refines it where it can.
DDL_TYPE_OF_NAME: dict[str, DDLType] = {
    "CREATE": DDLType.CREATE_TABLE,
    "ERASE": DDLType.DROP_TABLE,
    "TRUNCATE": DDLType.TRUNCATE_TABLE,
    "RENAME": DDLType.RENAME_TABLE,
    "CINDEX": DDLType.ADD_INDEX,
    "DINDEX": DDLType.DROP_INDEX,
}


def java_sql_type(ctype: ColumnType, value: Any = None) -> int:
    """The ``sqlType`` code TiCDC writes for a column holding ``value``."""
    code = JAVA_TYPE.get(ctype.name, 12)
    if ctype.unsigned and type(value) is int:
        promotion = PROMOTION.get(ctype.name)
        if promotion is not None and value > promotion[0]:
            return promotion[1]
    return code


def canal_ddl_type(ddl_type: DDLType) -> str:
    return DDL_TYPE_NAME.get(ddl_type, "QUERY")
