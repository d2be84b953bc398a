"""Canal-JSON options: delete-only-handle-key, large messages, compression, validation."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from ticdc_spark.codec import make_decoder, make_encoder, protocols
from ticdc_spark.errors import ConfigError, EncodeError, UnknownProtocolError
from ticdc_spark.model import Column, Index, RowChange, RowKind, TableSchema
from ticdc_spark.types import parse_column_type

SCHEMA = TableSchema(
    "db",
    "t",
    (
        Column("id", parse_column_type("int"), nullable=False),
        Column("body", parse_column_type("text")),
    ),
    (Index("PRIMARY", ("id",), primary=True, unique=True),),
)


def _row(kind: RowKind = RowKind.INSERT, body: str = "x") -> RowChange:
    image = {"id": 7, "body": body}
    return RowChange(
        kind,
        SCHEMA,
        5 << 18,
        before=image if kind is not RowKind.INSERT else None,
        after=image if kind is not RowKind.DELETE else None,
    )


def test_delete_only_output_handle_key_columns() -> None:
    options = {"delete-only-output-handle-key-columns": "true"}
    (message,) = make_encoder("canal-json", options).encode([_row(RowKind.DELETE)])
    obj = orjson.loads(message.value)
    assert obj["data"] == [{"id": "7"}] and obj["mysqlType"] == {"id": "int"}
    assert obj["pkNames"] == ["id"]
    (event,) = make_decoder("canal-json").decode(message)
    assert event.before == {"id": 7}


def test_large_message_needs_the_extension() -> None:
    with pytest.raises(ConfigError, match="enable-tidb-extension"):
        make_encoder("canal-json", {"large-message-handle-option": "handle-key-only"})


def test_too_large_without_handling_fails_clearly() -> None:
    with pytest.raises(EncodeError, match="max-message-bytes=300"):
        make_encoder("canal-json", {"max-message-bytes": "300"}).encode([_row(body="y" * 400)])


def test_handle_key_only() -> None:
    options = {
        "max-message-bytes": "400",
        "enable-tidb-extension": "true",
        "large-message-handle-option": "handle-key-only",
    }
    (message,) = make_encoder("canal-json", options).encode([_row(body="y" * 500)])
    obj = orjson.loads(message.value)
    assert obj["_tidb"] == {"commitTs": 5 << 18, "onlyHandleKey": True}
    assert obj["data"] == [{"id": "7"}]
    (event,) = make_decoder("canal-json", {"enable-tidb-extension": "true"}).decode(message)
    assert event.handle_key_only and event.after == {"id": 7}


def test_claim_check(tmp_path: Path) -> None:
    options = {
        "max-message-bytes": "500",
        "enable-tidb-extension": "true",
        "large-message-handle-option": "claim-check",
        "claim-check-storage-uri": f"file://{tmp_path}",
    }
    big = _row(RowKind.UPDATE, body="z" * 600)
    (message,) = make_encoder("canal-json", options).encode([big])
    location = orjson.loads(message.value)["_tidb"]["claimCheckLocation"]
    assert location.startswith(f"file://{tmp_path}/") and location.endswith(".json")
    stored = orjson.loads((tmp_path / location.rsplit("/", 1)[1]).read_bytes())
    assert stored["key"] is None
    (event,) = make_decoder("canal-json", options).decode(message)
    assert (event.kind, event.after, event.before) == (big.kind, big.after, big.before)


def test_claim_check_location_carries_no_credentials(tmp_path: Path) -> None:
    """The pointer goes to Kafka (and to dead letters): the storage URI's user info and query
    stay out of it."""
    options = {
        "max-message-bytes": "500",
        "enable-tidb-extension": "true",
        "large-message-handle-option": "claim-check",
        "claim-check-storage-uri": f"file://AKIAKEY:S3cr3t@localhost{tmp_path}/?secret-key=S3cr3t",
    }
    (message,) = make_encoder("canal-json", options).encode([_row(body="z" * 600)])
    assert b"S3cr3t" not in message.value and b"AKIAKEY" not in message.value
    location = orjson.loads(message.value)["_tidb"]["claimCheckLocation"]
    assert location.startswith(f"file://localhost{tmp_path}/") and location.endswith(".json")
    assert (tmp_path / location.rsplit("/", 1)[1]).is_file()


def test_claim_check_location_cannot_escape_the_storage(tmp_path: Path) -> None:
    from ticdc_spark.codec import Message
    from ticdc_spark.errors import DecodeError

    bad = orjson.dumps(
        {
            "type": "INSERT",
            "isDdl": False,
            "data": [{}],
            "mysqlType": {},
            "_tidb": {"commitTs": 1, "claimCheckLocation": "file:///etc/.."},
        }
    )
    decoder = make_decoder("canal-json", {"claim-check-storage-uri": f"file://{tmp_path}"})
    with pytest.raises(DecodeError, match="claim-check"):
        decoder.decode(Message(None, bad, topic="t", partition=0, offset=0))


@pytest.mark.parametrize("method", ["snappy", "lz4"])
def test_compressed_values(method: str) -> None:
    options = {"large-message-handle-compression": method, "enable-tidb-extension": "true"}
    (message,) = make_encoder("canal-json", options).encode([_row(body="abc" * 100)])
    assert not message.value.startswith(b"{")
    (event,) = make_decoder("canal-json", options).decode(message)
    assert event.after["body"] == "abc" * 100


def test_registry_names_and_errors() -> None:
    assert {"avro", "canal-json", "debezium", "open-protocol", "simple"} <= set(protocols())
    assert protocols() == sorted(protocols())
    with pytest.raises(UnknownProtocolError, match=r"canal-json, .*open-protocol"):
        make_decoder("maxwell")
    with pytest.raises(ConfigError, match="wants true or false"):
        make_decoder("canal-json", {"enable-tidb-extension": "yes please"})
    with pytest.raises(ConfigError, match="must be one of none, snappy, lz4"):
        make_decoder("canal-json", {"large-message-handle-compression": "zstd"})


@pytest.mark.parametrize("elements", [("a\nb", "c"), ("x\x00y",), ("a\\", "b"), ("a\\\\b",)])
def test_content_compatible_enum_members_round_trip(elements: tuple[str, ...]) -> None:
    """content-compatible writes members in mysqlType as TiDB does; they must read back."""
    from ticdc_spark.types import ColumnType

    schema = TableSchema(
        "db",
        "t",
        (
            Column("id", parse_column_type("int"), nullable=False),
            Column("e", ColumnType("enum", elements=elements)),
        ),
        (Index("PRIMARY", ("id",), primary=True, unique=True),),
    ).with_derived_flags()
    row = RowChange(RowKind.INSERT, schema, 5 << 18, after={"id": 1, "e": 1})
    options = {"enable-tidb-extension": "true", "content-compatible": "true"}
    (message,) = make_encoder("canal-json", options).encode([row])
    (event,) = make_decoder("canal-json", options).decode(message)
    assert event.schema.columns[1].type.elements == elements
    assert event.after == {"id": 1, "e": 1}


def test_enum_members_named_with_non_ascii_digits_are_looked_up() -> None:
    """Producers that write member names (Alibaba Canal): "²" is a digit to str.isdigit but
    not a number; it must be looked up, not fail the message."""
    message = {
        "database": "db", "table": "t", "pkNames": ["id"], "isDdl": False, "type": "INSERT",
        "es": 1, "ts": 1, "mysqlType": {"id": "int", "e": "enum('¹','²')"},
        "data": [{"id": "1", "e": "²"}], "old": None,
    }  # fmt: skip
    from ticdc_spark.codec import Message

    (event,) = make_decoder("canal-json").decode(Message(None, orjson.dumps(message)))
    assert event.after == {"id": 1, "e": 2}
