"""Kafka Connect schemas: the field schemas TiCDC writes, and column types read back from them.

Writing follows TiCDC (``writeDebeziumFieldSchema``): Connect type, ``optional``, the
Debezium semantic ``name``/``version``/``parameters``, ``field``; with the TiDB extension a
``tidb_type`` first.

Reading takes any Debezium MySQL connector's schema (1.x and 2.x) as well as TiCDC's.  The
column type comes, in order of preference, from TiCDC's ``tidb_type``, from the
``__debezium.source.column.type`` parameters Debezium adds with
``column.propagate.source.type``, else from the Connect type and semantic name, which say
less: an ``int64`` may have been BIGINT or INT UNSIGNED (read as ``bigint``: a BIGINT
UNSIGNED over 2^63-1 stays negative), a ``string`` CHAR, TEXT, binary base64 (TiCDC) or a
DECIMAL (``decimal.handling.mode=string``), a ``double`` DOUBLE or DECIMAL.  The value
reader is chosen by the semantic name (which says the unit: days, ms, µs, ns; Connect
Decimal bytes; ...), else by the column type through :data:`.dialect.DEBEZIUM`.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from ticdc_spark.codec.convert import Converter
from ticdc_spark.codec.debezium.dialect import (
    DEBEZIUM,
    base64_bytes,
    bits_from_bytes,
    days_to_date,
    exact_decimal,
    micros_to_datetime,
    micros_to_time,
    zoned_timestamp,
)
from ticdc_spark.model import Column
from ticdc_spark.types import ColumnType, Family, parse_column_type

__all__ = ["field_schema", "read_field", "sign_unknown"]

_DBZ = "io.debezium."
_CONNECT = "org.apache.kafka.connect.data."
_SOURCE_TYPE = "__debezium.source.column.type"
_SOURCE_LENGTH = "__debezium.source.column.length"
_SOURCE_SCALE = "__debezium.source.column.scale"


# -- writing ---------------------------------------------------------------------------------


def _escape_element(element: str) -> str:
    return element.replace(",", "\\,")


def _named(connect: str, name: str, parameters: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"type": connect, "name": name, "version": 1}
    if parameters is not None:
        spec["parameters"] = parameters
    return spec


# The Connect integer type TiCDC gives each integer type: (signed, unsigned); BIGINT int64.
_INTEGERS = {
    "tinyint": ("int16", "int16"),
    "smallint": ("int16", "int32"),
    "mediumint": ("int32", "int32"),
    "int": ("int32", "int64"),
}


def _integer(ctype: ColumnType) -> dict[str, Any]:
    signed, unsigned = _INTEGERS.get(ctype.name, ("int64", "int64"))
    return {"type": unsigned if ctype.unsigned else signed}


def _bit(ctype: ColumnType) -> dict[str, Any]:
    length = ctype.length or 1
    if length == 1:
        return {"type": "boolean"}
    return _named("bytes", _DBZ + "data.Bits", {"length": str(length)})


def _enum(ctype: ColumnType) -> dict[str, Any]:
    allowed = ",".join(_escape_element(e) for e in ctype.elements)
    return _named("string", _DBZ + "data.Enum", {"allowed": allowed})


def _set(ctype: ColumnType) -> dict[str, Any]:  # (TiCDC does not escape SET members)
    return _named("string", _DBZ + "data.EnumSet", {"allowed": ",".join(ctype.elements)})


def _datetime(ctype: ColumnType) -> dict[str, Any]:
    if ctype.name == "timestamp":
        return _named("string", _DBZ + "time.ZonedTimestamp")
    millis = ctype.decimal is None or ctype.decimal <= 3
    return _named("int64", _DBZ + ("time.Timestamp" if millis else "time.MicroTimestamp"))


def _float(ctype: ColumnType) -> dict[str, Any]:
    return {"type": "float" if ctype.decimal is None else "double"}


# Per family, the Connect type and semantic name TiCDC writes (without optional/field); any
# other family (CHAR/TEXT, binary as base64, what TiCDC does not know) is a string.
_CONNECT_TYPES: dict[Family, Callable[[ColumnType], dict[str, Any]]] = {
    Family.INTEGER: _integer,
    Family.BIT: _bit,
    Family.ENUM: _enum,
    Family.SET: _set,
    Family.DATE: lambda _: _named("int32", _DBZ + "time.Date"),
    Family.DATETIME: _datetime,
    Family.TIME: lambda _: _named("int64", _DBZ + "time.MicroTime"),
    Family.JSON: lambda _: _named("string", _DBZ + "data.Json"),
    Family.YEAR: lambda _: _named("int32", _DBZ + "time.Year"),
    Family.FLOAT: _float,
    Family.DOUBLE: lambda _: {"type": "double"},
    Family.DECIMAL: lambda _: {"type": "double"},
}


def _connect_type(ctype: ColumnType) -> dict[str, Any]:
    """The Connect type and semantic name TiCDC gives a column (without optional/field)."""
    build = _CONNECT_TYPES.get(ctype.family)
    return {"type": "string"} if build is None else build(ctype)


def tidb_type(ctype: ColumnType) -> str:
    """TiCDC's ``tidb_type``: the type name, ``unsigned`` but for YEAR, BIT, DECIMAL."""
    if ctype.unsigned and ctype.family not in (Family.YEAR, Family.BIT, Family.DECIMAL):
        return ctype.name + " unsigned"
    return ctype.name


def field_schema(column: Column, extension: bool, optional: bool | None = None) -> dict[str, Any]:
    """One column's field in a ``before``/``after``/key struct, as TiCDC writes it."""
    spec: dict[str, Any] = {"tidb_type": tidb_type(column.type)} if extension else {}
    connect = _connect_type(column.type)
    spec["type"] = connect.pop("type")
    spec["optional"] = column.nullable if optional is None else optional
    spec.update(connect)
    spec["field"] = column.name
    return spec


# -- reading ---------------------------------------------------------------------------------

# Column types a bare Connect type stands for (the widest MySQL type it could hold).
_BY_CONNECT_TYPE = {
    "int8": ColumnType("tinyint"),
    "int16": ColumnType("smallint"),
    "int32": ColumnType("int"),
    "int64": ColumnType("bigint"),
    "float": ColumnType("float"),
    "float32": ColumnType("float"),
    "double": ColumnType("double"),
    "float64": ColumnType("double"),
    "boolean": ColumnType("bit", length=1),
    "string": ColumnType("longtext"),
    "bytes": ColumnType("longblob"),
}

# Column types of Debezium's semantic names (refined from parameters below).
_BY_NAME = {
    _DBZ + "time.Date": ColumnType("date"),
    _CONNECT + "Date": ColumnType("date"),
    _DBZ + "time.Timestamp": ColumnType("datetime"),
    # (µs: an fsp over 3, read as 6 so that writing the value back keeps its digits)
    _DBZ + "time.MicroTimestamp": ColumnType("datetime", decimal=6),
    _DBZ + "time.NanoTimestamp": ColumnType("datetime", decimal=6),
    _CONNECT + "Timestamp": ColumnType("datetime"),
    _DBZ + "time.ZonedTimestamp": ColumnType("timestamp"),
    _DBZ + "time.Time": ColumnType("time"),
    _DBZ + "time.MicroTime": ColumnType("time"),
    _DBZ + "time.NanoTime": ColumnType("time"),
    _CONNECT + "Time": ColumnType("time"),
    _DBZ + "time.Year": ColumnType("year"),
    _DBZ + "data.Json": ColumnType("json"),
    _DBZ + "data.Bits": ColumnType("bit"),
    _DBZ + "data.Enum": ColumnType("enum"),
    _DBZ + "data.EnumSet": ColumnType("set"),
    _CONNECT + "Decimal": ColumnType("decimal"),
    _DBZ + "data.VariableScaleDecimal": ColumnType("decimal"),
    _DBZ + "data.geometry.Geometry": ColumnType("longblob"),
    _DBZ + "data.geometry.Point": ColumnType("longblob"),
}


_MICROS_NAMES = frozenset((_DBZ + "time.MicroTimestamp", _DBZ + "time.NanoTimestamp"))


def _scaled(scale: int) -> Converter:
    def read(value: Any) -> Decimal:
        if isinstance(value, str):  # base64 of the unscaled big-endian two's complement
            unscaled = int.from_bytes(base64_bytes(value), "big", signed=True)
            return Decimal(f"{unscaled}E-{scale}")  # (exact: scaleb rounds to 28 digits)
        kind = type(value)  # (a number: Kafka's JsonConverter decimal.format=NUMERIC)
        if kind is Decimal or kind is int:  # (read exactly from its text: .typed)
            return exact_decimal(Decimal(value))
        if kind is float:
            return Decimal(repr(value))
        raise ValueError(f"expected a Connect Decimal, got {value!r}")

    return read


def _variable_scale(value: Any) -> Decimal:
    """io.debezium.data.VariableScaleDecimal: ``{"scale": s, "value": base64}``."""
    scale = value["scale"]
    if type(scale) is not int:
        raise ValueError(f"VariableScaleDecimal scale is not an integer: {scale!r}")
    result: Decimal = _scaled(scale)(value["value"])
    return result


def _geometry(value: Any) -> bytes:
    """Debezium's ``{"wkb": base64, "srid": n}`` as MySQL stores geometry: SRID (uint32
    little-endian) then the WKB."""
    wkb = base64_bytes(value["wkb"])
    srid = value.get("srid") or 0
    if type(srid) is not int:
        raise ValueError(f"geometry srid is not an integer: {srid!r}")
    return struct.pack("<I", srid & 0xFFFFFFFF) + wkb


def _int(value: Any) -> int:
    if type(value) is not int:
        raise ValueError(f"expected an integer, got {value!r}")
    return value


def _readers() -> dict[str, Callable[[Any], Any]]:
    return {
        _DBZ + "time.Date": days_to_date,
        _CONNECT + "Date": days_to_date,
        _DBZ + "time.Timestamp": lambda v: micros_to_datetime(_int(v) * 1000),
        _CONNECT + "Timestamp": lambda v: micros_to_datetime(_int(v) * 1000),
        _DBZ + "time.MicroTimestamp": micros_to_datetime,
        _DBZ + "time.NanoTimestamp": lambda v: micros_to_datetime(_exact_micros(v)),
        _DBZ + "time.ZonedTimestamp": zoned_timestamp,
        _DBZ + "time.Time": lambda v: micros_to_time(_int(v) * 1000),
        _CONNECT + "Time": lambda v: micros_to_time(_int(v) * 1000),
        _DBZ + "time.MicroTime": micros_to_time,
        _DBZ + "time.NanoTime": lambda v: micros_to_time(_exact_micros(v)),
        _DBZ + "data.Bits": lambda v: bits_from_bytes(base64_bytes(v)),
        _DBZ + "data.VariableScaleDecimal": _variable_scale,
        _DBZ + "data.geometry.Geometry": _geometry,
        _DBZ + "data.geometry.Point": _geometry,
    }


def _exact_micros(nanos: Any) -> int:
    micros, rest = divmod(_int(nanos), 1000)
    if rest:
        raise ValueError(f"{nanos} ns is finer than MySQL's microseconds")
    return micros


_READERS = _readers()
_ELEMENT_SPLIT = re.compile(r"(?<!\\),")


def _elements(allowed: Any) -> tuple[str, ...]:
    if not isinstance(allowed, str):
        raise ValueError(f"'allowed' must be a string, got {allowed!r}")
    if allowed == "":
        return ()
    return tuple(e.replace("\\,", ",") for e in _ELEMENT_SPLIT.split(allowed))


def _int_parameter(parameters: dict[str, Any], key: str) -> int | None:
    value = parameters.get(key)
    if value is None:
        return None
    number = int(value)  # (Connect parameters are strings)
    if not 0 <= number <= 1 << 16:
        raise ValueError(f"parameter {key}={value!r} is out of range")
    return number


def _column_type(field: dict[str, Any], connect: str, name: str | None) -> ColumnType:
    parameters = field.get("parameters") or {}
    if not isinstance(parameters, dict):
        raise ValueError("field 'parameters' must be an object")
    tidb = field.get("tidb_type")
    source = parameters.get(_SOURCE_TYPE)
    if isinstance(tidb, str):
        ctype = parse_column_type(tidb)
    elif isinstance(source, str):
        ctype = _source_type(source, parameters)
    else:
        found = _BY_NAME.get(name) if name else None
        found = found or _BY_CONNECT_TYPE.get(connect)
        if found is None:
            raise ValueError(f"unknown Connect type {connect!r}")
        ctype = found
    return _refined(ctype, connect, name, parameters)


def _source_type(source: str, parameters: dict[str, Any]) -> ColumnType:
    """The type Debezium's ``column.propagate.source.type`` names (``DECIMAL``, ``BIGINT
    UNSIGNED``) with its length and scale parameters."""
    ctype = parse_column_type(source.lower())
    length = _int_parameter(parameters, _SOURCE_LENGTH)
    scale = _int_parameter(parameters, _SOURCE_SCALE)
    if ctype.family is Family.DECIMAL or ctype.family in (Family.DATETIME, Family.TIME):
        fsp_or_scale = scale if ctype.family is Family.DECIMAL else length
        return ColumnType(
            ctype.name,
            ctype.unsigned,
            length=length if ctype.family is Family.DECIMAL else None,
            decimal=fsp_or_scale if fsp_or_scale is not None else ctype.decimal,
        )
    if ctype.family in (Family.BIT, Family.STRING, Family.BYTES) and length is not None:
        return ColumnType(ctype.name, ctype.unsigned, length=length)
    return ctype


def _refined(
    ctype: ColumnType, connect: str, name: str | None, parameters: dict[str, Any]
) -> ColumnType:
    """The type with what the field's parameters add: ENUM/SET members, BIT width, DECIMAL
    precision and scale, BIT(1) from a boolean."""
    family = ctype.family
    if family is Family.DATETIME and ctype.decimal is None and name in _MICROS_NAMES:
        return ColumnType(ctype.name, decimal=6)
    if family in (Family.ENUM, Family.SET) and "allowed" in parameters:
        return ColumnType(ctype.name, elements=_elements(parameters["allowed"]))
    if family is Family.BIT:
        length = 1 if connect == "boolean" else _int_parameter(parameters, "length")
        return ColumnType("bit", length=length if length is not None else ctype.length)
    if family is Family.DECIMAL and name == _CONNECT + "Decimal":
        scale = _int_parameter(parameters, "scale")
        precision = _int_parameter(parameters, "connect.decimal.precision")
        return ColumnType(
            "decimal",
            ctype.unsigned,
            length=precision if precision is not None else ctype.length,
            decimal=scale if scale is not None else ctype.decimal,
        )
    return ctype


def sign_unknown(field: Any) -> bool:
    """Whether a field is a bare Connect ``int64``, which a BIGINT and a BIGINT UNSIGNED both
    are without ``tidb_type`` or the source type (TiCDC without ``enable-tidb-extension``;
    Debezium's ``bigint.unsigned.handling.mode=long``): one past 2^63-1 is sent negative."""
    parameters = field.get("parameters") if isinstance(field, dict) else None
    return (
        isinstance(field, dict)
        and field.get("type") == "int64"
        and not field.get("name")
        and not isinstance(field.get("tidb_type"), str)
        and not (isinstance(parameters, dict) and _SOURCE_TYPE in parameters)
    )


def read_field(field: Any) -> tuple[Column, Converter]:
    """A column (its name, type and nullability) and its value reader, from one field of a
    ``before``/``after``/key struct."""
    if not isinstance(field, dict):
        raise ValueError("a schema field must be an object")
    column_name, connect = field["field"], field["type"]
    if not isinstance(column_name, str) or not isinstance(connect, str):
        raise ValueError("schema field 'field' and 'type' must be strings")
    name = field.get("name")
    name = name if isinstance(name, str) else None
    ctype = _column_type(field, connect, name)
    reader = _READERS.get(name) if name else None
    if reader is None:
        if name == _CONNECT + "Decimal":
            reader = _scaled(ctype.decimal or 0)
        elif ctype.family is Family.DECIMAL and connect == "bytes":
            raise ValueError(f"DECIMAL field {column_name!r} as bytes without a Connect Decimal")
        elif ctype.family is Family.BIT and connect == "boolean":
            reader = _bool_bit
        else:
            reader = DEBEZIUM.decoder(ctype)
    optional = field.get("optional", True)
    return Column(column_name, ctype, nullable=optional is not False), reader


def _bool_bit(value: Any) -> int:
    if type(value) is not bool:
        raise ValueError(f"expected a boolean, got {value!r}")
    return int(value)
