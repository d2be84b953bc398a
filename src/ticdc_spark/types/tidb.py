"""The facts about MySQL types that protocols write: TiDB's type codes (``mysql.Type*``
bytes), and the full type text TiDB prints (``GetTypeDesc``) or the plain one."""

from __future__ import annotations

from ticdc_spark.types.column import NO_LENGTH, ColumnType, elements_sql

__all__ = ["BLOB_CODES", "TYPE_CODE", "TYPE_NAMES", "full_type_desc", "plain_type_desc"]

# The type code TiDB gives each type name (CHAR/BINARY, VARCHAR/VARBINARY and TEXT/BLOB
# share theirs: the binary flag tells them apart).
TYPE_CODE: dict[str, int] = {
    "tinyint": 1,
    "smallint": 2,
    "int": 3,
    "float": 4,
    "double": 5,
    "timestamp": 7,
    "bigint": 8,
    "mediumint": 9,
    "date": 10,
    "time": 11,
    "datetime": 12,
    "year": 13,
    "varchar": 15,
    "varbinary": 15,
    "bit": 16,
    "vector": 225,
    "json": 245,
    "decimal": 246,
    "enum": 247,
    "set": 248,
    "tinytext": 249,
    "tinyblob": 249,
    "mediumtext": 250,
    "mediumblob": 250,
    "longtext": 251,
    "longblob": 251,
    "text": 252,
    "blob": 252,
    "char": 254,
    "binary": 254,
    "geometry": 255,
}
# code -> (name without the binary flag, name with it)
TYPE_NAMES: dict[int, tuple[str, str]] = {
    1: ("tinyint",) * 2,
    2: ("smallint",) * 2,
    3: ("int",) * 2,
    4: ("float",) * 2,
    5: ("double",) * 2,
    6: ("null",) * 2,
    7: ("timestamp",) * 2,
    8: ("bigint",) * 2,
    9: ("mediumint",) * 2,
    10: ("date",) * 2,
    11: ("time",) * 2,
    12: ("datetime",) * 2,
    13: ("year",) * 2,
    14: ("date",) * 2,
    15: ("varchar", "varbinary"),
    16: ("bit",) * 2,
    225: ("vector",) * 2,
    245: ("json",) * 2,
    246: ("decimal",) * 2,
    247: ("enum",) * 2,
    248: ("set",) * 2,
    249: ("tinytext", "tinyblob"),
    250: ("mediumtext", "mediumblob"),
    251: ("longtext", "longblob"),
    252: ("text", "blob"),
    253: ("varchar", "varbinary"),
    254: ("char", "binary"),
    255: ("geometry",) * 2,
}
# The codes whose values TiDB keeps as bytes in any charset (the TEXT and BLOB family).
BLOB_CODES = frozenset((249, 250, 251, 252))


def full_type_desc(ctype: ColumnType) -> str:
    """TiDB's full column type (``GetTypeDesc``), as content-compatible mode writes it.

    Where the type carries no length, TiDB's defaults fill in (``int(11)``, ``int(10)
    unsigned``, ``decimal(10,0)``, ``bit(1)``, ``year(4)``).
    """
    name = ctype.name
    length = ctype.length
    if length is None:
        length = _DEFAULT_WIDTH.get(name)
        if length is not None and ctype.unsigned and name in _NARROWER_UNSIGNED:
            length -= 1
    decimal = ctype.decimal
    if name == "decimal":
        params = f"({length if length is not None else 10},{decimal or 0})"
    elif name in ("float", "double"):
        params = f"({length},{decimal})" if decimal and length is not None else ""
    elif name in ("enum", "set"):
        params = elements_sql(ctype.elements)
    elif name in ("datetime", "timestamp", "time"):
        params = f"({decimal})" if decimal else ""
    elif name in NO_LENGTH or length is None:
        params = ""
    else:
        params = f"({length})"
    suffix = ""
    if ctype.unsigned and name not in ("bit", "year"):
        suffix += " unsigned"
    if ctype.zerofill and name != "year":
        suffix += " zerofill"
    return name + params + suffix


_DEFAULT_WIDTH = {
    "tinyint": 4,
    "smallint": 6,
    "mediumint": 9,
    "int": 11,
    "bigint": 20,
    "bit": 1,
    "year": 4,
    "char": 1,
    "binary": 1,
}
_NARROWER_UNSIGNED = frozenset(("tinyint", "smallint", "mediumint", "int"))


def plain_type_desc(ctype: ColumnType) -> str:
    """The ``mysqlType`` TiCDC writes by default: no parameters, ``unsigned``/``zerofill`` kept."""
    name = ctype.name
    if ctype.unsigned and name not in ("bit", "year"):
        name += " unsigned"
    if ctype.zerofill and ctype.name != "year":
        name += " zerofill"
    return name
