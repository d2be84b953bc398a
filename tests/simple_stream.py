"""A Simple stream met mid-stream, for the pipeline tests (with and without Spark).

The consumer starts after the tables were created: no CREATE, and the rows come before any
schema.  ``shop.orders`` (version 100: ``id`` key, ``amount`` DECIMAL(10,2) NOT NULL,
``note`` VARCHAR(20) DEFAULT 'none') gets its BOOTSTRAP on partition 0, in the second
micro-batch, while its rows are on partition 1 in the first; then an ALTER adds
``qty INT NOT NULL DEFAULT 5`` (version 200; its DDL message brings both versions) and rows
of the new version follow.  ``shop.users`` (version 50) waits until its BOOTSTRAP in the
third micro-batch, and its last row, on partition 1 in the fourth, needs the schema that
partition 0 brought in the third.  Watermarks go to both partitions.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from ticdc_spark.codec import Message, make_encoder
from ticdc_spark.model import (
    Bootstrap,
    Column,
    DDLEvent,
    DDLType,
    Index,
    RowChange,
    RowKind,
    TableSchema,
    Watermark,
    compose_ts,
)
from ticdc_spark.types import ColumnType as T

PARTITIONS = 2
TOPIC = "cdc_shop"
KEY = (Index("PRIMARY", ("id",), primary=True, unique=True),)
ORDERS_V1 = TableSchema(
    "shop",
    "orders",
    (
        Column("id", T("int", length=11), nullable=False),
        Column("amount", T("decimal", length=10, decimal=2), nullable=False),
        Column("note", T("varchar", length=20), default="none"),
    ),
    KEY,
    table_id=7,
    version=100,
).with_derived_flags()
ORDERS_V2 = TableSchema(
    "shop",
    "orders",
    (*ORDERS_V1.columns, Column("qty", T("int", length=11), nullable=False, default="5")),
    KEY,
    table_id=7,
    version=200,
).with_derived_flags()
USERS = TableSchema(
    "shop",
    "users",
    (Column("id", T("bigint", length=20), nullable=False), Column("name", T("varchar", length=8))),
    KEY,
    table_id=8,
    version=50,
).with_derived_flags()
OPTIONS = {"send-bootstrap-interval-in-sec": "0", "send-bootstrap-in-msg-count": "0"}


def ts(n: int) -> int:
    return compose_ts(1_700_000_000_000 + n)


def _order(n: int, amount: str, note: str | None = "x") -> dict[str, Any]:
    return {"id": n, "amount": Decimal(amount), "note": note}


def batches(encoding: str = "json") -> list[list[Message]]:
    """Three micro-batches of (topic, partition, offset)-placed messages."""
    encoder = make_encoder("simple", {**OPTIONS, "encoding-format": encoding})
    offsets = [0] * PARTITIONS

    def on(partition: int, *events: Any) -> list[Message]:
        out = []
        for message in encoder.encode(list(events)):
            message.topic, message.partition = TOPIC, partition
            message.offset = offsets[partition]
            offsets[partition] += 1
            out.append(message)
        return out

    def everywhere(*events: Any) -> list[Message]:
        return [m for p in range(PARTITIONS) for m in on(p, *events)]

    alter = DDLEvent(
        DDLType.ADD_COLUMN,
        "ALTER TABLE `shop`.`orders` ADD COLUMN `qty` INT NOT NULL DEFAULT 5",
        ts(6),
        "shop",
        "orders",
        ORDERS_V2,
        ORDERS_V1,
    )
    first = [
        *on(
            1,
            RowChange(RowKind.INSERT, ORDERS_V1, ts(1), None, _order(1, "1.50")),
            RowChange(RowKind.INSERT, ORDERS_V1, ts(2), None, _order(2, "2.00", None)),
            RowChange(RowKind.INSERT, USERS, ts(2), None, {"id": 1, "name": "ann"}),
            RowChange(RowKind.INSERT, ORDERS_V1, ts(3), None, _order(3, "3.25")),
            RowChange(
                RowKind.UPDATE, ORDERS_V1, ts(4), _order(1, "1.50"), _order(1, "9.99", "upd")
            ),
        ),
        *everywhere(Watermark(ts(4))),
    ]
    second = [*on(0, Bootstrap(ORDERS_V1)), *everywhere(Watermark(ts(5)))]
    third = [
        *everywhere(alter),
        *on(
            1,
            RowChange(RowKind.INSERT, ORDERS_V2, ts(7), None, {**_order(4, "4.00"), "qty": 9}),
            RowChange(RowKind.DELETE, ORDERS_V2, ts(8), {**_order(2, "2.00", None), "qty": 5}),
            RowChange(
                RowKind.UPDATE, USERS, ts(8), {"id": 1, "name": "ann"}, {"id": 1, "name": "bo"}
            ),
        ),
        *on(0, Bootstrap(USERS)),
        *everywhere(Watermark(ts(10))),
    ]
    # a row whose schema came in an earlier micro-batch, on another partition
    fourth = [
        *on(1, RowChange(RowKind.INSERT, USERS, ts(11), None, {"id": 2, "name": "cy"})),
        *everywhere(Watermark(ts(12))),
    ]
    return [first, second, third, fourth]


# The tables at the end (live rows).
ORDERS = [
    {"id": 1, "amount": Decimal("9.99"), "note": "upd", "qty": 5},
    {"id": 3, "amount": Decimal("3.25"), "note": "x", "qty": 5},
    {"id": 4, "amount": Decimal("4.00"), "note": "x", "qty": 9},
]
USERS_ROWS = [{"id": 1, "name": "bo"}, {"id": 2, "name": "cy"}]
