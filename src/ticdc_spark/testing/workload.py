"""A deterministic workload: the change stream a TiDB cluster under test would produce.

Two table shapes: ``sbtest`` (sysbench's ``id, k, c, pad``) and ``alltypes`` (one column of
every MySQL type).  The same seed always gives the same events, in commit-ts order:
CREATE TABLE first, then transactions of inserts, updates (some changing the primary key, sent
as DELETE + INSERT as TiCDC splits them), deletes, the occasional ADD COLUMN, and watermarks.
:meth:`Workload.final_state` is what the tables must hold once everything is applied.
"""

from __future__ import annotations

import datetime as dt
import random
import string
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Context, Decimal
from typing import Any

from ticdc_spark.model import (
    Column,
    DDLEvent,
    DDLType,
    Event,
    Index,
    RowChange,
    RowKind,
    TableSchema,
    Watermark,
    compose_ts,
)
from ticdc_spark.types import ColumnType, Family, ZeroDate, parse_column_type, to_float32

__all__ = ["ALLTYPES_COLUMNS", "Workload", "alltypes_schema", "sbtest_schema"]

ALLTYPES_COLUMNS: tuple[tuple[str, str], ...] = (
    ("id", "bigint"),
    ("c_tinyint", "tinyint"),
    ("c_tinyint_u", "tinyint unsigned"),
    ("c_bool", "tinyint(1)"),
    ("c_smallint", "smallint"),
    ("c_smallint_u", "smallint unsigned"),
    ("c_mediumint", "mediumint"),
    ("c_mediumint_u", "mediumint unsigned"),
    ("c_int", "int"),
    ("c_int_u", "int unsigned"),
    ("c_bigint", "bigint"),
    ("c_bigint_u", "bigint unsigned"),
    ("c_float", "float"),
    ("c_double", "double"),
    ("c_decimal", "decimal(20,6)"),
    ("c_decimal_wide", "decimal(65,30)"),
    ("c_char", "char(16)"),
    ("c_varchar", "varchar(64)"),
    ("c_tinytext", "tinytext"),
    ("c_text", "text"),
    ("c_mediumtext", "mediumtext"),
    ("c_longtext", "longtext"),
    ("c_binary", "binary(8)"),
    ("c_varbinary", "varbinary(32)"),
    ("c_tinyblob", "tinyblob"),
    ("c_blob", "blob"),
    ("c_mediumblob", "mediumblob"),
    ("c_longblob", "longblob"),
    ("c_date", "date"),
    ("c_datetime", "datetime"),
    ("c_datetime6", "datetime(6)"),
    ("c_timestamp", "timestamp(3)"),
    ("c_time", "time(2)"),
    ("c_year", "year"),
    ("c_enum", "enum('red','green','blue')"),
    ("c_set", "set('a','b','c','d')"),
    ("c_bit", "bit(12)"),
    ("c_bit64", "bit(64)"),
    ("c_json", "json"),
)


def sbtest_schema(
    database: str = "sbtest", table: str = "sbtest1", table_id: int = 0
) -> TableSchema:
    columns = (
        Column("id", ColumnType("int", length=11), nullable=False),
        Column("k", ColumnType("int", length=11), nullable=False),
        Column("c", ColumnType("char", length=120), nullable=False),
        Column("pad", ColumnType("char", length=60), nullable=False),
    )
    indexes = (Index("PRIMARY", ("id",), primary=True, unique=True), Index("k_1", ("k",)))
    return TableSchema(database, table, columns, indexes, table_id).with_derived_flags()


def alltypes_schema(
    database: str = "test", table: str = "alltypes", table_id: int = 0
) -> TableSchema:
    columns = tuple(
        Column(name, parse_column_type(sql), nullable=name != "id")
        for name, sql in ALLTYPES_COLUMNS
    )
    indexes = (Index("PRIMARY", ("id",), primary=True, unique=True),)
    return TableSchema(database, table, columns, indexes, table_id).with_derived_flags()


def create_table_sql(schema: TableSchema) -> str:
    columns = ", ".join(
        f"`{c.name}` {c.type.sql()}{'' if c.nullable else ' NOT NULL'}" for c in schema.columns
    )
    pk = ", ".join(f"`{n}`" for n in schema.primary_key)
    return f"CREATE TABLE `{schema.database}`.`{schema.table}` ({columns}, PRIMARY KEY ({pk}))"


@dataclass
class Workload:
    """A seeded stream of change events over ``tables`` tables.

    Tables alternate between the sbtest and alltypes shapes (``sbtest1``, ``alltypes2``, ...).
    ``rows`` is the number of row changes to produce.
    """

    seed: int = 1
    rows: int = 1000
    tables: int = 2
    start_ms: int = 1_700_000_000_000
    txn_size: int = 4
    watermark_every: int = 16
    ddl_every: int = 0  # 0: no DDL after the CREATE TABLEs
    live_clock: bool = False  # commit ts from the wall clock (start_ms is then a floor)
    _state: dict[str, dict[Any, dict[str, Any]]] = field(default_factory=dict, init=False)
    _schemas: dict[str, TableSchema] = field(default_factory=dict, init=False)
    _pools: dict[str, _KeyPool] = field(default_factory=dict, init=False)
    _names: list[str] = field(default_factory=list, init=False)
    _touched: set[Any] = field(default_factory=set, init=False)

    def table_schemas(self) -> list[TableSchema]:
        out = []
        for i in range(1, self.tables + 1):
            if i % 2:
                out.append(sbtest_schema("sbtest", f"sbtest{i}", table_id=100 + i))
            else:
                out.append(alltypes_schema("test", f"alltypes{i}", table_id=100 + i))
        return out

    def events(self) -> Iterator[Event]:
        rng = random.Random(self.seed)
        clock = _Clock(self.start_ms, self.live_clock)
        self._state, self._schemas, self._pools = {}, {}, {}
        for schema in self.table_schemas():
            self._schemas[schema.qualified_name] = schema
            self._state[schema.qualified_name] = {}
            self._pools[schema.qualified_name] = _KeyPool()
            yield DDLEvent(
                DDLType.CREATE_TABLE,
                create_table_sql(schema),
                clock.next(),
                schema.database,
                schema.table,
                schema,
            )
        self._names = sorted(self._schemas)
        yield Watermark(clock.next())
        produced, txns = 0, 0
        while produced < self.rows:
            commit_ts = clock.next()
            txns += 1
            self._touched = set()
            for _ in range(min(self.txn_size, self.rows - produced)):
                for event in self._change(rng, commit_ts):
                    produced += 1
                    yield event
            if self.ddl_every and txns % self.ddl_every == 0:
                yield from self._add_column(rng, clock.next())
            if txns % self.watermark_every == 0:
                yield Watermark(clock.next())
        yield Watermark(clock.next())

    def final_state(self) -> dict[str, dict[Any, dict[str, Any]]]:
        """Table -> primary key -> row, once :meth:`events` has been consumed."""
        return self._state

    def final_schemas(self) -> dict[str, TableSchema]:
        return self._schemas

    # ------------------------------------------------------------------------------------

    def _change(self, rng: random.Random, commit_ts: int) -> list[RowChange]:
        """One statement's changes.  A row changes at most once per transaction, as in
        TiCDC's output (it merges a transaction's changes to one row into one event)."""
        name = self._names[rng.randrange(len(self._names))]
        schema = self._schemas[name]
        rows, pool = self._state[name], self._pools[name]
        roll = rng.random()
        key = pool.pick(rng, self._touched) if rows and roll >= 0.55 else None
        if key is None:
            return [self._insert(rng, schema, name, commit_ts)]
        self._touched.add(key)
        if roll < 0.80:
            return [self._update(rng, schema, rows, key, commit_ts)]
        before = rows.pop(key)
        pool.remove(key)
        if roll < 0.88:  # a primary-key change: TiCDC sends DELETE + INSERT
            return [
                RowChange(RowKind.DELETE, schema, commit_ts, before=before),
                self._insert(rng, schema, name, commit_ts),
            ]
        return [RowChange(RowKind.DELETE, schema, commit_ts, before=before)]

    def _insert(
        self, rng: random.Random, schema: TableSchema, name: str, commit_ts: int
    ) -> RowChange:
        rows = self._state[name]
        key = self._fresh_key(rng, rows)
        while key in self._touched:
            key = self._fresh_key(rng, rows)
        self._touched.add(key)
        after = self._random_row(rng, schema, key)
        rows[key] = after
        self._pools[name].add(key)
        return RowChange(RowKind.INSERT, schema, commit_ts, after=after)

    def _update(
        self,
        rng: random.Random,
        schema: TableSchema,
        rows: dict[Any, Any],
        key: Any,
        commit_ts: int,
    ) -> RowChange:
        before = rows[key]
        fresh = self._random_row(rng, schema, key)
        changed = rng.sample(list(schema.column_names[1:]), k=min(2, len(schema.columns) - 1))
        after = {**before, **{c: fresh[c] for c in changed}}
        rows[key] = after
        return RowChange(RowKind.UPDATE, schema, commit_ts, before=before, after=after)

    def _add_column(self, rng: random.Random, commit_ts: int) -> Iterator[Event]:
        name = rng.choice(sorted(self._schemas))
        schema = self._schemas[name]
        column = Column(f"extra_{len(schema.columns)}", ColumnType("varchar", length=32))
        new = TableSchema(
            schema.database,
            schema.table,
            (*schema.columns, column),
            schema.indexes,
            schema.table_id,
            schema.version + 1,
        ).with_derived_flags()
        self._schemas[name] = new
        rows = self._state[name]
        for key, row in rows.items():  # new dicts: events handed out keep their images
            rows[key] = {**row, column.name: None}
        sql = (
            f"ALTER TABLE `{schema.database}`.`{schema.table}` ADD COLUMN `{column.name}` "
            f"{column.type.sql()}"
        )
        yield DDLEvent(
            DDLType.ADD_COLUMN, sql, commit_ts, schema.database, schema.table, new, schema
        )

    @staticmethod
    def _fresh_key(rng: random.Random, rows: dict[Any, Any]) -> int:
        while True:
            key = rng.randrange(1, 2**31 - 1)
            if key not in rows:
                return key

    @staticmethod
    def _random_row(rng: random.Random, schema: TableSchema, key: int) -> dict[str, Any]:
        row: dict[str, Any] = {}
        for column in schema.columns:
            if column.name == "id":
                row["id"] = key
            elif column.nullable and rng.random() < 0.05:
                row[column.name] = None
            else:
                row[column.name] = random_value(rng, column.type)
        return row


class _KeyPool:
    """The live keys of a table, with O(1) random pick and removal."""

    def __init__(self) -> None:
        self.keys: list[Any] = []
        self.where: dict[Any, int] = {}

    def add(self, key: Any) -> None:
        self.where[key] = len(self.keys)
        self.keys.append(key)

    def remove(self, key: Any) -> None:
        index = self.where.pop(key)
        last = self.keys.pop()
        if index < len(self.keys):
            self.keys[index] = last
            self.where[last] = index

    def pick(self, rng: random.Random, avoid: set[Any]) -> Any:
        """A random key not in ``avoid`` (None after a few unlucky tries)."""
        for _ in range(4):
            key = self.keys[rng.randrange(len(self.keys))]
            if key not in avoid:
                return key
        return None


class _Clock:
    """Commit timestamps: milliseconds advance, the logical part counts within a millisecond.

    A live clock follows the wall clock (never going back), for latency measurements."""

    def __init__(self, start_ms: int, live: bool = False) -> None:
        self.ms = start_ms
        self.logical = 0
        self.live = live

    def next(self) -> int:
        if self.live:
            now = int(time.time() * 1000)
            if now > self.ms:
                self.ms, self.logical = now, 0
                return compose_ts(self.ms, 0)
        self.logical += 1
        if self.logical >= 4:
            self.ms += 1
            self.logical = 0
        return compose_ts(self.ms, self.logical)


_WORDS = string.ascii_letters + string.digits + " -_"
_UNICODE = "äöüßçéñ中文测试🙂"


def random_value(rng: random.Random, ctype: ColumnType) -> Any:
    """A random canonical value of a column type (deterministic for a seeded ``rng``)."""
    return _VALUE_MAKERS[ctype.family](rng, ctype)


def _int(rng: random.Random, ctype: ColumnType) -> int:
    low, high = ctype.int_range()
    if ctype.length == 1 and ctype.name == "tinyint":
        return rng.randint(0, 1)
    small = rng.randint(max(low, -1000), min(high, 1000))
    return rng.choice((low, high, 0, rng.randint(low, high), small))


def _text(rng: random.Random, ctype: ColumnType) -> str:
    if ctype.name == "char" and ctype.length == 120:  # sbtest's c column
        return "-".join(f"{rng.randrange(10**11):011d}" for _ in range(10))
    if ctype.name == "char" and ctype.length == 60:
        return "-".join(f"{rng.randrange(10**11):011d}" for _ in range(5))
    size = rng.randint(0, min(ctype.length or 40, 40))
    chars = _WORDS + (_UNICODE if rng.random() < 0.3 else "")
    return "".join(rng.choice(chars) for _ in range(size)).rstrip(" ")


def _bytes(rng: random.Random, ctype: ColumnType) -> bytes:
    if ctype.name == "binary":
        return bytes(rng.randrange(256) for _ in range(ctype.length or 1))
    return bytes(rng.randrange(256) for _ in range(rng.randint(0, 24)))


_EXACT = Context(prec=100)


def _decimal(rng: random.Random, ctype: ColumnType) -> Decimal:
    precision, scale = ctype.length or 10, ctype.decimal or 0
    digits = rng.randrange(10 ** min(precision, 30))
    # exact, with the column's scale as TiDB keeps it (the default context would round a
    # DECIMAL(65,30) value to 28 digits and a coarser scale)
    return Decimal(rng.choice(("", "-")) + str(digits)).scaleb(-scale, _EXACT)


def _datetime(rng: random.Random, ctype: ColumnType) -> dt.datetime | ZeroDate:
    if rng.random() < 0.02:
        return ZeroDate(0, 0, 0)
    fsp = ctype.decimal or 0
    micro = rng.randrange(10**6)
    micro -= micro % 10 ** (6 - fsp)
    base = dt.datetime(1971, 1, 1) + dt.timedelta(seconds=rng.randrange(2_000_000_000))
    return base.replace(microsecond=micro)


def _date(rng: random.Random, ctype: ColumnType) -> dt.date | ZeroDate:
    if rng.random() < 0.02:
        return ZeroDate(0, 0, 0)
    return dt.date(1000, 1, 1) + dt.timedelta(days=rng.randrange(3_000_000))


def _time(rng: random.Random, ctype: ColumnType) -> dt.timedelta:
    fsp = ctype.decimal or 0
    micros = rng.randrange(-838 * 3600 * 10**6, 838 * 3600 * 10**6)
    sign = -1 if micros < 0 else 1
    micros = abs(micros)
    return dt.timedelta(microseconds=sign * (micros - micros % 10 ** (6 - fsp)))


_VALUE_MAKERS: dict[Family, Any] = {
    Family.INTEGER: _int,
    Family.FLOAT: lambda r, t: to_float32(round(r.uniform(-1e6, 1e6), r.randint(0, 4))),
    Family.DOUBLE: lambda r, t: r.choice((r.uniform(-1e12, 1e12), r.random(), 1e-9, 1e21)),
    Family.DECIMAL: _decimal,
    Family.STRING: _text,
    Family.BYTES: _bytes,
    Family.DATE: _date,
    Family.DATETIME: _datetime,
    Family.TIME: _time,
    Family.YEAR: lambda r, t: r.choice((0, r.randint(1901, 2155))),
    Family.ENUM: lambda r, t: r.randint(1, len(t.elements)),
    Family.SET: lambda r, t: r.randrange(1 << len(t.elements)),
    Family.BIT: lambda r, t: r.randrange(1 << (t.length or 1)),
    Family.JSON: lambda r, t: f'{{"k": {r.randrange(1000)}, "tags": ["a", "b"], "ok": true}}',
    Family.UNKNOWN: lambda r, t: "",
}
