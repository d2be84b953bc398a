"""The MySQL type system: column types, their canonical Python values, and their text form.

Every codec converts between its wire form and *one* canonical Python value per type; none
invents its own.  The canonical values are:

==========================================  ===================================================
MySQL type                                  canonical Python value
==========================================  ===================================================
TINYINT .. BIGINT, signed and unsigned,     ``int`` (unsigned BIGINT up to 2**64-1)
BOOL (= TINYINT(1)), YEAR
FLOAT                                       ``float`` holding a float32 value (rounded on entry)
DOUBLE                                      ``float``
DECIMAL(M,D)                                ``decimal.Decimal``, exact, keeps its scale
CHAR, VARCHAR, TINYTEXT .. LONGTEXT         ``str``
BINARY, VARBINARY, TINYBLOB .. LONGBLOB     ``bytes``
DATE                                        ``datetime.date`` or :class:`ZeroDate`
DATETIME, TIMESTAMP                         naive ``datetime.datetime`` or :class:`ZeroDate`
TIME                                        ``datetime.timedelta`` (negative and > 24 h allowed)
ENUM                                        ``int``: the 1-based index (0 is MySQL's '' error)
SET                                         ``int``: the bitmask of the members
BIT(M)                                      ``int``, unsigned
JSON                                        ``str``: the JSON text as TiDB prints it
NULL                                        ``None``
==========================================  ===================================================

ENUM and SET names are available through :meth:`ColumnType.enum_name` and
:meth:`ColumnType.set_names` when the column's elements are known.  Fractional seconds live
in the value (microseconds); how many digits to print (the fsp) lives in
``ColumnType.decimal``.  TIMESTAMP values are wall-clock times in the time zone the producer
used (TiCDC's changefeed time zone); they carry no zone of their own.

The *text form* of a value is MySQL's own rendering of it, as TiCDC writes it in its
all-string protocols: integers in decimal, DECIMAL without exponent, temporal values with the
column's fsp, ENUM as its index and SET as its bitmask, BIT as an unsigned integer.  Binary
values have no text form here: every protocol encodes bytes its own way (Latin-1, base64,
Go-quoted), so codecs supply that converter themselves.

The package, by concern: :mod:`.column` (the column type and reading its text),
:mod:`.tidb` (TiDB's type codes and type texts), :mod:`.numbers` and :mod:`.temporal` (the
canonical values and their text), :mod:`.text` (text form <-> value per family),
:mod:`.misfit` (why a value does not fit its column).  Everything is importable from here.
"""

from ticdc_spark.types.column import (
    INT_BITS,
    ColumnType,
    Family,
    escape_element,
    parse_column_type,
)
from ticdc_spark.types.misfit import value_misfit
from ticdc_spark.types.numbers import (
    format_decimal,
    format_float,
    format_float32,
    format_float64,
    int64_cast,
    parse_decimal,
    parse_float,
    positional,
    shortest_digits,
    to_float32,
)
from ticdc_spark.types.temporal import (
    ZeroDate,
    format_date,
    format_datetime,
    format_time,
    infer_fsp,
    parse_date,
    parse_datetime,
    parse_time,
)
from ticdc_spark.types.text import text_formatter, text_parser
from ticdc_spark.types.tidb import (
    BLOB_CODES,
    TYPE_CODE,
    TYPE_NAMES,
    full_type_desc,
    plain_type_desc,
)

__all__ = [
    "BLOB_CODES",
    "INT_BITS",
    "TYPE_CODE",
    "TYPE_NAMES",
    "ColumnType",
    "Family",
    "ZeroDate",
    "escape_element",
    "format_date",
    "format_datetime",
    "format_decimal",
    "format_float",
    "format_float32",
    "format_float64",
    "format_time",
    "full_type_desc",
    "infer_fsp",
    "int64_cast",
    "parse_column_type",
    "parse_date",
    "parse_datetime",
    "parse_decimal",
    "parse_float",
    "parse_time",
    "plain_type_desc",
    "positional",
    "shortest_digits",
    "text_formatter",
    "text_parser",
    "to_float32",
    "value_misfit",
]
