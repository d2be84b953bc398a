"""Change events and table schemas: the one model every codec, dispatcher and sink shares.

No protocol's own op strings or layouts appear here.  A decoder produces these events, an
encoder consumes them, and the pipeline applies them.  Row images map column names to the
canonical values of :mod:`ticdc_spark.types`.
"""

from __future__ import annotations

import datetime as _dt
import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from ticdc_spark.types import ColumnType, Family

__all__ = [
    "UNKNOWN_COMMIT_TS",
    "Bootstrap",
    "Column",
    "ColumnFlag",
    "DDLEvent",
    "DDLType",
    "Event",
    "Index",
    "RowChange",
    "RowChecksum",
    "RowKind",
    "TableSchema",
    "Watermark",
    "compose_ts",
    "physical_ms",
    "ts_to_datetime",
]

# --------------------------------------------------------------------------------------------
# TSO: TiDB's hybrid timestamps.

_LOGICAL_BITS = 18


def physical_ms(ts: int) -> int:
    """The wall-clock milliseconds of a TSO (``ts >> 18``)."""
    return ts >> _LOGICAL_BITS


def compose_ts(physical: int, logical: int = 0) -> int:
    """Build a TSO from milliseconds since the epoch and a logical counter."""
    return (physical << _LOGICAL_BITS) | (logical & ((1 << _LOGICAL_BITS) - 1))


# The commit ts of a row whose protocol carries none (genuine Debezium: its source block holds
# a binlog position, not a TiDB commit ts).  Such rows are ordered by where they were read
# (topic partition and offset), not by commit ts.
UNKNOWN_COMMIT_TS = 0


def ts_to_datetime(ts: int) -> _dt.datetime:
    """The UTC time of a TSO's physical part."""
    return _dt.datetime.fromtimestamp(physical_ms(ts) / 1000, tz=_dt.UTC)


# --------------------------------------------------------------------------------------------
# Schemas.


class ColumnFlag(enum.IntFlag):
    """TiCDC's column flag bits (Open Protocol ``f``; also derived from schemas)."""

    NONE = 0
    BINARY = 1
    HANDLE_KEY = 2
    GENERATED = 4
    PRIMARY_KEY = 8
    UNIQUE_KEY = 16
    MULTIPLE_KEY = 32
    NULLABLE = 64
    UNSIGNED = 128


class DefaultExpression(str):
    """A column DEFAULT that is not a plain constant (CURRENT_TIMESTAMP, NOW(), an expression
    in brackets, a bit or hex literal): its SQL text, from which no value is made."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class Column:
    """One column of a table: its name, MySQL type and attributes.  ``default`` is the
    DEFAULT as MySQL text (a :class:`DefaultExpression` when not a constant; None: NULL)."""

    name: str
    type: ColumnType
    nullable: bool = True
    default: Any = None
    generated: bool = False
    flags: ColumnFlag = ColumnFlag.NONE

    @property
    def is_handle_key(self) -> bool:
        return bool(self.flags & ColumnFlag.HANDLE_KEY)


@dataclass(frozen=True, slots=True)
class Index:
    """An index: which columns, and whether it is the primary key or unique."""

    name: str
    columns: tuple[str, ...]
    primary: bool = False
    unique: bool = False
    nullable: bool = False


@dataclass(frozen=True, slots=True)
class TableSchema:
    """A table's schema at one version.

    ``version`` is TiDB's schema version of the table (the Simple protocol's
    ``schemaVersion``), 0 when the protocol does not say.  Column flags may come from the wire
    (Open Protocol) or be derived from the indexes with :meth:`with_derived_flags`.
    ``virtual_columns`` names the table's VIRTUAL generated columns when known (from its
    DDL): TiCDC never sends them, so they are not in ``columns``.
    """

    database: str
    table: str
    columns: tuple[Column, ...] = ()
    indexes: tuple[Index, ...] = ()
    table_id: int = 0
    version: int = 0
    virtual_columns: tuple[str, ...] = ()
    _by_name: dict[str, Column] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_name", {c.name: c for c in self.columns})

    @property
    def qualified_name(self) -> str:
        return f"{self.database}.{self.table}"

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def column(self, name: str) -> Column:
        return self._by_name[name]

    def get(self, name: str) -> Column | None:
        return self._by_name.get(name)

    @property
    def primary_key(self) -> tuple[str, ...]:
        """The primary key's columns: from the primary index, else from column flags."""
        for index in self.indexes:
            if index.primary:
                return index.columns
        return tuple(c.name for c in self.columns if c.flags & ColumnFlag.PRIMARY_KEY)

    @property
    def handle_key(self) -> tuple[str, ...]:
        """The columns TiCDC identifies rows by: flagged handle keys, else the primary key,
        else the unique index with the fewest columns (the first of those) over non-null
        columns none of which is a VIRTUAL generated column (tiflow's ``findHandleIndex``)."""
        flagged = tuple(c.name for c in self.columns if c.flags & ColumnFlag.HANDLE_KEY)
        if flagged:
            return flagged
        if self.primary_key:
            return self.primary_key
        virtual = {n.lower() for n in self.virtual_columns}
        eligible = [
            index
            for index in self.indexes
            if index.unique
            and not any(n.lower() in virtual for n in index.columns)
            and all(not self._by_name[n].nullable for n in index.columns if n in self._by_name)
        ]
        return min(eligible, key=lambda i: len(i.columns)).columns if eligible else ()

    def with_derived_flags(self) -> TableSchema:
        """This schema with TiCDC's column flags computed from types and indexes."""
        handle = set(self.handle_key)
        columns = tuple(
            Column(
                c.name,
                c.type,
                c.nullable,
                c.default,
                c.generated,
                _derive_flags(c, self.indexes, c.name in handle),
            )
            for c in self.columns
        )
        return TableSchema(
            self.database,
            self.table,
            columns,
            self.indexes,
            self.table_id,
            self.version,
            self.virtual_columns,
        )


# TiDB gives every type but the character types the charset ``binary``, and TiCDC's Binary
# flag means exactly that charset; YEAR and BIT columns always carry TiDB's unsigned flag.
_TEXT_FAMILIES = frozenset((Family.STRING, Family.ENUM, Family.SET, Family.UNKNOWN))


def _derive_flags(column: Column, indexes: Iterable[Index], handle: bool) -> ColumnFlag:
    flags = ColumnFlag.NONE
    ctype = column.type
    if ctype.family not in _TEXT_FAMILIES or ctype.charset == "binary":
        flags |= ColumnFlag.BINARY
    if handle:
        flags |= ColumnFlag.HANDLE_KEY
    if column.generated:
        flags |= ColumnFlag.GENERATED
    if column.nullable:
        flags |= ColumnFlag.NULLABLE
    if ctype.unsigned or ctype.family in (Family.YEAR, Family.BIT):
        flags |= ColumnFlag.UNSIGNED
    for index in indexes:
        if column.name not in index.columns:
            continue
        if index.primary:
            flags |= ColumnFlag.PRIMARY_KEY
        elif index.unique:
            flags |= ColumnFlag.UNIQUE_KEY
        if not index.primary and not index.unique and index.columns[:1] == (column.name,):
            flags |= ColumnFlag.MULTIPLE_KEY
        if len(index.columns) > 1:
            flags |= ColumnFlag.MULTIPLE_KEY
    return flags


# --------------------------------------------------------------------------------------------
# Events.


class RowKind(enum.Enum):
    INSERT = "INSERT"
    UPDATE = "UPDATE"
    DELETE = "DELETE"


Image: TypeAlias = dict[str, Any]


@dataclass(frozen=True, slots=True)
class RowChecksum:
    """TiDB's end-to-end row checksum as TiCDC sends it (Simple's ``checksum``): CRC32 of
    the row's column values after (``current``) and before (``previous``) the change."""

    version: int
    corrupted: bool
    current: int
    previous: int


@dataclass(slots=True)
class RowChange:
    """One row's change in one transaction.

    ``before`` is the pre-image (UPDATE and DELETE), ``after`` the post-image (INSERT and
    UPDATE).  An image may hold only some columns when the producer sent only those
    (handle-key-only messages, only-updated-columns, old value off); ``handle_key_only`` says
    the message was cut down to the key columns.
    """

    kind: RowKind
    schema: TableSchema
    commit_ts: int
    before: Image | None = None
    after: Image | None = None
    partition_id: int | None = None
    handle_key_only: bool = False
    claim_check_location: str | None = None
    checksum: RowChecksum | None = None

    @property
    def database(self) -> str:
        return self.schema.database

    @property
    def table(self) -> str:
        return self.schema.table

    @property
    def table_id(self) -> int:
        return self.schema.table_id

    @property
    def schema_version(self) -> int:
        return self.schema.version

    @property
    def image(self) -> Image:
        """The image that identifies the row: ``after``, or ``before`` for a DELETE."""
        image = self.before if self.kind is RowKind.DELETE else self.after
        return image or {}

    def key(self) -> tuple[Any, ...]:
        """The handle-key values of the row (post image; pre image for deletes)."""
        image = self.image
        return tuple(image.get(name) for name in self.schema.handle_key)


class DDLType(enum.IntEnum):
    """TiDB's DDL action types (the Open Protocol ``t`` of DDL events)."""

    NONE = 0
    CREATE_SCHEMA = 1
    DROP_SCHEMA = 2
    CREATE_TABLE = 3
    DROP_TABLE = 4
    ADD_COLUMN = 5
    DROP_COLUMN = 6
    ADD_INDEX = 7
    DROP_INDEX = 8
    ADD_FOREIGN_KEY = 9
    DROP_FOREIGN_KEY = 10
    TRUNCATE_TABLE = 11
    MODIFY_COLUMN = 12
    REBASE_AUTO_ID = 13
    RENAME_TABLE = 14
    SET_DEFAULT_VALUE = 15
    SHARD_ROW_ID = 16
    MODIFY_TABLE_COMMENT = 17
    RENAME_INDEX = 18
    ADD_TABLE_PARTITION = 19
    DROP_TABLE_PARTITION = 20
    CREATE_VIEW = 21
    MODIFY_TABLE_CHARSET_AND_COLLATE = 22
    TRUNCATE_TABLE_PARTITION = 23
    DROP_VIEW = 24
    RECOVER_TABLE = 25
    MODIFY_SCHEMA_CHARSET_AND_COLLATE = 26
    LOCK_TABLE = 27
    UNLOCK_TABLE = 28
    REPAIR_TABLE = 29
    SET_TIFLASH_REPLICA = 30
    UPDATE_TIFLASH_REPLICA_STATUS = 31
    ADD_PRIMARY_KEY = 32
    DROP_PRIMARY_KEY = 33
    CREATE_SEQUENCE = 34
    ALTER_SEQUENCE = 35
    DROP_SEQUENCE = 36
    ADD_COLUMNS = 37
    DROP_COLUMNS = 38
    MODIFY_TABLE_AUTO_ID_CACHE = 39
    REBASE_AUTO_RANDOM_BASE = 40
    ALTER_INDEX_VISIBILITY = 41
    EXCHANGE_TABLE_PARTITION = 42
    ADD_CHECK_CONSTRAINT = 43
    DROP_CHECK_CONSTRAINT = 44
    ALTER_CHECK_CONSTRAINT = 45
    RENAME_TABLES = 47
    DROP_INDEXES = 48
    ALTER_TABLE_ATTRIBUTES = 49
    ALTER_TABLE_PARTITION_ATTRIBUTES = 50
    CREATE_PLACEMENT_POLICY = 51
    ALTER_PLACEMENT_POLICY = 52
    DROP_PLACEMENT_POLICY = 53
    ALTER_TABLE_PARTITION_PLACEMENT = 54
    MODIFY_SCHEMA_DEFAULT_PLACEMENT = 55
    ALTER_TABLE_PLACEMENT = 56
    ALTER_CACHE_TABLE = 57
    ALTER_TABLE_STATS_OPTIONS = 58
    ALTER_NO_CACHE_TABLE = 59
    CREATE_TABLES = 60
    ACTION_MULTI_SCHEMA_CHANGE = 61
    FLASHBACK_CLUSTER = 62
    RECOVER_SCHEMA = 63
    REORGANIZE_PARTITION = 64
    ALTER_TTL_INFO = 65
    ALTER_TTL_REMOVE = 67
    CREATE_RESOURCE_GROUP = 68
    ALTER_RESOURCE_GROUP = 69
    DROP_RESOURCE_GROUP = 70
    ALTER_TABLE_PARTITIONING = 71
    REMOVE_PARTITIONING = 72

    @classmethod
    def _missing_(cls, value: object) -> DDLType | None:
        """Keep action codes newer than this table instead of failing on them."""
        if not isinstance(value, int):
            return None
        member = int.__new__(cls, value)
        member._name_ = f"ACTION_{value}"
        member._value_ = value
        return member


@dataclass(slots=True)
class DDLEvent:
    """A schema change, applied upstream at ``commit_ts``.

    ``schema``/``schema_before`` are the table's schema after and before the change when the
    protocol carries them (Simple); otherwise None and the query is the only description.
    """

    ddl_type: DDLType
    query: str
    commit_ts: int
    database: str = ""
    table: str = ""
    schema: TableSchema | None = None
    schema_before: TableSchema | None = None


@dataclass(slots=True)
class Watermark:
    """All changes with ``commit_ts`` below ``ts`` have been sent (resolved / WATERMARK)."""

    ts: int


@dataclass(slots=True)
class Bootstrap:
    """A table's schema, sent so consumers joining mid-stream can decode its rows."""

    schema: TableSchema
    build_ts: int = 0


Event: TypeAlias = RowChange | DDLEvent | Watermark | Bootstrap


def images_equal(left: Mapping[str, Any] | None, right: Mapping[str, Any] | None) -> bool:
    """Compare two images column by column (a helper for round-trip checks)."""
    return (left or {}) == (right or {})
