"""One profile per registered protocol: what the contract suite exercises and expects.

A protocol joins the suite by registering itself in the codec catalog and adding a
:class:`Profile` here: its option sets (each a :class:`Variant` saying what the protocol
carries with those options), its golden files and how to read them, and how to reach the
JSON documents inside a message (for the fuzzer's field deletions).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from ticdc_spark.codec import Message
from ticdc_spark.io.capture import read_capture
from ticdc_spark.types import ColumnType, full_type_desc, plain_type_desc

__all__ = ["PROFILES", "Carries", "Framing", "Golden", "Profile", "Variant", "variants"]


@dataclass(frozen=True)
class Carries:
    """What a protocol carries with one option set, so round trips compare only that.

    ``commit_ts``: ``exact`` TSO, or only its ``physical-ms`` (``es`` of Canal-JSON without
    the TiDB extension).  ``type_view``: the part of a column type that survives the wire.
    ``update_as_insert``: an UPDATE without an old image on the wire reads as an INSERT
    (upsert): ``unchanged`` ones (only-updated-columns leaves an empty old image out) or
    ``all`` (output-old-value off).  ``update_without_before``: an UPDATE's old image is not
    on the wire, and the UPDATE reads back as one without a before image (Debezium's old value
    off: its ``op`` says UPDATE).  ``delete_key_only``: a DELETE carries only the handle-key
    columns.  ``large_key_only``: a row too large for max-message-bytes is sent with only
    its handle-key columns (marked ``handle_key_only``).  ``key``: messages carry a Kafka key.
    ``arrow_batch``: the decoder's Arrow batch path applies (when the compiled code is built).
    ``compiled``: the codec's value loops run in the compiled module when it is built.
    ``value_view``: per column type, the canonical value a decoder gets back for a sent one
    (None: every value comes back as sent; Debezium's DECIMAL travels as a double).
    ``commit_ts`` ``none``: no commit ts on the wire (decoded as 0).
    """

    commit_ts: Literal["exact", "physical-ms", "none"] = "exact"
    watermarks: bool = True
    type_view: Callable[[ColumnType], str] = plain_type_desc
    update_as_insert: Literal["never", "unchanged", "all"] = "never"
    update_without_before: bool = False
    delete_key_only: bool = False
    large_key_only: bool = False
    key: bool = False
    arrow_batch: bool = False
    compiled: bool = True
    value_view: Callable[[ColumnType], Callable[[Any], Any]] | None = None
    # Avro: no DDL on the wire; tombstones without a commit ts (read as 0); an UPDATE without
    # its old image (still an UPDATE); names as the protocol rewrites them
    ddl: bool = True
    delete_commit_ts: bool = True
    update_before: bool = True
    rename: Callable[[str], str] | None = None


@dataclass(frozen=True)
class Framing:
    """How to split a message part (key or value) into JSON documents and join them back;
    ``split`` returns None when the part holds no plain JSON (e.g. compressed)."""

    split: Callable[[str, bytes], list[bytes] | None]
    join: Callable[[str, list[bytes]], bytes]


@dataclass(frozen=True)
class Variant:
    """One option set of a protocol and what the protocol carries with it."""

    label: str
    options: Mapping[str, str]
    carries: Carries
    framing: Framing


@dataclass(frozen=True)
class Golden:
    """A set of real messages: how to load them (given the shared golden folder), the options
    to decode them with, and the events they hold by type (``RowChange``, ``DDLEvent``...).
    Their decoded normalized events are stored in ``expected/<protocol>.<name>.jsonl``."""

    name: str
    load: Callable[[Path], list[Message]]
    options: Mapping[str, str]
    counts: Mapping[str, int]


@dataclass(frozen=True)
class Profile:
    """``representable``: whether the protocol can carry some events at all (Avro: column
    names that stay distinct once sanitized); the suite passes over the others."""

    name: str
    variants: tuple[Variant, ...]
    goldens: tuple[Golden, ...] = field(default=())
    representable: Callable[[list[Any]], bool] | None = None


# -- reading golden files ----------------------------------------------------------------------


def _sample(protocol: str) -> Callable[[Path], list[Message]]:
    """The bundled sample capture of a protocol (``ticdc_spark/samples``)."""

    def load(_golden_dir: Path) -> list[Message]:
        name = f"{protocol}.capture.jsonl"
        sample = resources.files("ticdc_spark").joinpath("samples").joinpath(name)
        return list(read_capture(sample.read_bytes().splitlines(), source=name))

    return load


def _open_protocol_golden(golden_dir: Path) -> list[Message]:
    """TiCDC's Java example batches (key/value file pairs), in a fixed order."""
    base = golden_dir / "open-protocol"
    messages: list[Message] = []
    for kind in ("row", "ddl", "rts"):
        for number in range(3):
            key = (base / "key" / f"{kind}_key_{number}").read_bytes()
            value = (base / "value" / f"{kind}_value_{number}").read_bytes()
            offset = len(messages)
            messages.append(Message(key, value, topic="golden", partition=0, offset=offset))
    return messages


def simple_spec_examples(spec_dir: Path) -> list[dict[str, object]]:
    """The Simple document's JSON messages, in document order (its TableSchema, Column and
    Index examples, which have no ``type``, left out)."""
    import orjson

    text = (spec_dir / "simple-protocol.ja.txt").read_text()
    found, at = [], 0
    while (start := text.find("{\n", at)) >= 0:
        depth, end = 0, start
        for end in range(start, len(text)):
            depth += {"{": 1, "}": -1}.get(text[end], 0)
            if depth == 0:
                break
        obj = orjson.loads(text[start : end + 1])
        if "type" in obj:
            found.append(obj)
        at = end + 1
    return found


def _simple_mid_stream(golden_dir: Path) -> list[Message]:
    """The Simple document's six examples as a consumer joining mid-stream meets them: the
    INSERT, UPDATE and DELETE first, then the DDL that brings their schema (its
    ``preTableSchema``), the WATERMARK and the BOOTSTRAP."""
    import orjson

    ddl, *rows, watermark, bootstrap = simple_spec_examples(golden_dir.parent / "spec")
    ordered = [*rows, ddl, watermark, bootstrap]
    return [
        Message(None, orjson.dumps(obj), topic="golden", partition=0, offset=offset)
        for offset, obj in enumerate(ordered)
    ]


# -- framings ----------------------------------------------------------------------------------


def _whole_json(part: str, data: bytes) -> list[bytes] | None:
    return [data] if part == "value" and data[:1] == b"{" else None


def _join_whole(part: str, documents: list[bytes]) -> bytes:
    return documents[0]


def _length_prefixed(part: str, data: bytes) -> list[bytes] | None:
    """Open Protocol: the key is a uint64 version then [uint64 length][JSON]..., the value
    [uint64 length][JSON]... (see ../shared/spec/REFERENCE.md)."""
    at = 8 if part == "key" else 0
    documents = []
    while at + 8 <= len(data):
        (length,) = struct.unpack_from(">Q", data, at)
        documents.append(data[at + 8 : at + 8 + length])
        at += 8 + length
    if at != len(data) or not all(d[:1] == b"{" for d in documents):
        return None  # compressed, or not plain JSON
    return documents


def _join_length_prefixed(part: str, documents: list[bytes]) -> bytes:
    head = struct.pack(">Q", 1) if part == "key" else b""
    return head + b"".join(struct.pack(">Q", len(d)) + d for d in documents)


WHOLE_JSON = Framing(_whole_json, _join_whole)
LENGTH_PREFIXED = Framing(_length_prefixed, _join_length_prefixed)

# -- the protocols -----------------------------------------------------------------------------

_OPEN = Carries(key=True)

OPEN_PROTOCOL = Profile(
    "open-protocol",
    (
        Variant("default", {}, _OPEN, LENGTH_PREFIXED),
        Variant(
            "batch3-only-updated",
            {"max-batch-size": "3", "only-output-updated-columns": "true"},
            Carries(key=True, update_as_insert="unchanged"),
            LENGTH_PREFIXED,
        ),
        Variant(
            "no-old-value",
            {"output-old-value": "false"},
            Carries(key=True, update_as_insert="all"),
            LENGTH_PREFIXED,
        ),
        Variant(
            "delete-key-only",
            {"delete-only-output-handle-key-columns": "true"},
            Carries(key=True, delete_key_only=True),
            LENGTH_PREFIXED,
        ),
        Variant(
            "large-handle-key-only",
            {"large-message-handle-option": "handle-key-only", "max-message-bytes": "400"},
            Carries(key=True, large_key_only=True),
            LENGTH_PREFIXED,
        ),
        Variant("snappy", {"large-message-handle-compression": "snappy"}, _OPEN, LENGTH_PREFIXED),
    ),
    (
        Golden(
            "java-example",
            _open_protocol_golden,
            {},
            {"RowChange": 5, "DDLEvent": 4, "Watermark": 4},
        ),
        Golden(
            "sample",
            _sample("open-protocol"),
            {},
            {"RowChange": 40, "DDLEvent": 6, "Watermark": 12},
        ),
    ),
)

_EXTENSION = {"enable-tidb-extension": "true"}

CANAL_JSON = Profile(
    "canal-json",
    (
        Variant("tidb-extension", _EXTENSION, Carries(arrow_batch=True), WHOLE_JSON),
        Variant(
            "content-compatible",
            {**_EXTENSION, "content-compatible": "true"},
            Carries(type_view=full_type_desc, arrow_batch=True),
            WHOLE_JSON,
        ),
        Variant(
            "only-updated",
            {**_EXTENSION, "only-output-updated-columns": "true"},
            Carries(arrow_batch=True),
            WHOLE_JSON,
        ),
        Variant(
            "delete-key-only",
            {**_EXTENSION, "delete-only-output-handle-key-columns": "true"},
            Carries(arrow_batch=True, delete_key_only=True),
            WHOLE_JSON,
        ),
        Variant(
            "large-handle-key-only",
            {
                **_EXTENSION,
                "large-message-handle-option": "handle-key-only",
                "max-message-bytes": "900",
            },
            Carries(arrow_batch=True, large_key_only=True),
            WHOLE_JSON,
        ),
        Variant(
            "lz4",
            {"large-message-handle-compression": "lz4"},
            Carries(commit_ts="physical-ms", watermarks=False),
            WHOLE_JSON,
        ),
    ),
    (
        Golden(
            "sample",
            _sample("canal-json"),
            _EXTENSION,
            {"RowChange": 40, "DDLEvent": 2, "Watermark": 12},
        ),
    ),
)


def _debezium_golden(golden_dir: Path) -> list[Message]:
    """The genuine Debezium 2.4 MySQL connector's message for TiCDC's all-types row."""
    base = golden_dir / "debezium"
    key = (base / "datatype.dbz.key.json").read_bytes()
    value = (base / "datatype.dbz.json").read_bytes()
    return [Message(key, value, topic="golden", partition=0, offset=0)]


def _debezium_carried(ctype: ColumnType) -> Callable[[Any], Any]:
    from ticdc_spark.codec import get_codec

    carried = get_codec("debezium").carried
    assert carried is not None
    return carried(ctype)


def _debezium_bare_read(ctype: ColumnType) -> tuple[ColumnType, Callable[[Any], Any]]:
    """The column type and reader a decoder gets from the Connect field TiCDC writes for
    ``ctype`` without the TiDB extension (no tidb_type)."""
    from ticdc_spark.codec.debezium.connect import field_schema, read_field
    from ticdc_spark.model import Column

    column, reader = read_field(field_schema(Column("c", ctype), extension=False))
    return column.type, reader


def _debezium_bare_type(ctype: ColumnType) -> str:
    return plain_type_desc(_debezium_bare_read(ctype)[0])


def _debezium_bare_value(ctype: ColumnType) -> Callable[[Any], Any]:
    from ticdc_spark.codec.debezium.dialect import DEBEZIUM

    write, read = DEBEZIUM.encoder(ctype), _debezium_bare_read(ctype)[1]

    def view(value: Any) -> Any:
        wire = None if value is None else write(value)
        return None if wire is None else read(wire)

    return view


# Column types come back from TiCDC's tidb_type (the TiDB extension); without it, as far as
# the Connect types say (the "default" variant: types and values as the bare schema reads).
_DBZ_EXTENSION = {"enable-tidb-extension": "true"}
_DEBEZIUM = Carries(key=True, compiled=False, value_view=_debezium_carried, arrow_batch=True)

DEBEZIUM = Profile(
    "debezium",
    (
        Variant("tidb-extension", _DBZ_EXTENSION, _DEBEZIUM, WHOLE_JSON),
        Variant(
            "default",
            {},
            Carries(
                key=True,
                compiled=False,
                arrow_batch=True,
                type_view=_debezium_bare_type,
                value_view=_debezium_bare_value,
            ),
            WHOLE_JSON,
        ),
        Variant(
            "no-old-value",
            {**_DBZ_EXTENSION, "debezium-output-old-value": "false"},
            Carries(
                key=True,
                compiled=False,
                value_view=_debezium_carried,
                update_without_before=True,
            ),
            WHOLE_JSON,
        ),
        Variant(
            "lz4",
            {**_DBZ_EXTENSION, "large-message-handle-compression": "lz4"},
            Carries(key=True, compiled=False, value_view=_debezium_carried),
            WHOLE_JSON,
        ),
    ),
    (
        Golden("datatype", _debezium_golden, {}, {"RowChange": 1}),
        Golden(
            "sample",
            _sample("debezium"),
            _DBZ_EXTENSION,
            {"RowChange": 40, "DDLEvent": 6, "Watermark": 12},
        ),
    ),
)

_AVRO = {"encoding-format": "avro"}


def _no_json(part: str, data: bytes) -> list[bytes] | None:
    return None


RAW_AVRO = Framing(_no_json, _join_whole)

SIMPLE = Profile(
    "simple",
    (
        Variant("json", {}, Carries(), WHOLE_JSON),
        Variant("avro", _AVRO, Carries(compiled=False), RAW_AVRO),
        Variant(
            "json-large-handle-key-only",
            {"large-message-handle-option": "handle-key-only", "max-message-bytes": "3000"},
            Carries(large_key_only=True),
            WHOLE_JSON,
        ),
        Variant(
            "avro-snappy",
            {**_AVRO, "large-message-handle-compression": "snappy"},
            Carries(compiled=False),
            RAW_AVRO,
        ),
    ),
    (
        Golden(
            "spec-mid-stream",
            _simple_mid_stream,
            {},
            {"RowChange": 3, "DDLEvent": 1, "Watermark": 1, "Bootstrap": 1},
        ),
        Golden("sample", _sample("simple"), {}, {"RowChange": 40, "DDLEvent": 6, "Watermark": 12}),
    ),
)

# -- Avro: schemas in a registry, so its golden loader fills an in-process one -----------------

_AVRO_GOLDEN_REGISTRY = "mock://contract-golden"


def _avro_golden(_golden_dir: Path) -> list[Message]:
    """Avro messages of TiCDC's all-types test table (tests/fixtures/avro/golden.*): their
    writer schemas are registered first, in id order, as a registry would serve them."""
    import orjson

    from ticdc_spark.codec.avro.registry import registry

    base = Path(__file__).parent.parent / "fixtures" / "avro"
    client = registry(_AVRO_GOLDEN_REGISTRY)
    for number, text in enumerate(orjson.loads((base / "golden.schemas.json").read_bytes()), 1):
        assert client.register(f"golden-{number}", text) == number
    return list(read_capture((base / "golden.capture.jsonl").read_bytes().splitlines()))


_AVRO_SAMPLE_REGISTRY = "mock://contract-sample"


def _avro_sample(golden_dir: Path) -> list[Message]:
    """The bundled Avro sample: its _schemas records (which a decoder learns its schemas
    from) and its rows; the schemas are registered in an in-process registry too, under the
    same ids, for the suite's decoders that meet a row before its _schemas record."""
    import orjson

    from ticdc_spark.codec.avro.registry import registry

    messages = _sample("avro")(golden_dir)
    client = registry(_AVRO_SAMPLE_REGISTRY)
    for message in messages:
        if message.topic == "_schemas":
            record = orjson.loads(message.value or b"")
            assert client.register(record["subject"], record["schema"]) == record["id"]
    return messages


def _avro_representable(events: list[Any]) -> bool:
    from ticdc_spark.codec.avro.schema import representable

    return representable(events)


def _avro_variant(label: str, options: dict[str, str], **carries: Any) -> Variant:
    from ticdc_spark.codec.avro.schema import avro_type_view, sanitize_name

    view = carries.pop("type_view", avro_type_view)
    common = {"watermarks": False, "ddl": False, "key": True, "delete_key_only": True}
    common["compiled"] = False
    common["arrow_batch"] = True  # (the columnar path: fastavro and pyarrow, no compiled code)
    return Variant(
        label,
        {"schema-registry": f"mock://contract-{label}", **options},
        Carries(type_view=view, rename=sanitize_name, **{**common, **carries}),
        OPAQUE,
    )


def _avro_decimal_string_view(ctype: ColumnType) -> str:
    from ticdc_spark.codec.avro.schema import avro_type_view

    return "DECIMAL" if ctype.name == "decimal" else avro_type_view(ctype)


def _opaque(part: str, data: bytes) -> list[bytes] | None:
    return None  # Avro binary: no JSON inside


OPAQUE = Framing(_opaque, _join_whole)

AVRO = Profile(
    "avro",
    (
        _avro_variant("tidb-extension", _EXTENSION, delete_commit_ts=False, update_before=False),
        _avro_variant(
            "string-modes",
            {
                **_EXTENSION,
                "avro-decimal-handling-mode": "string",
                "avro-bigint-unsigned-handling-mode": "string",
            },
            delete_commit_ts=False,
            update_before=False,
            type_view=_avro_decimal_string_view,
        ),
        _avro_variant("plain", {}, commit_ts="none", update_as_insert="all"),
    ),
    (
        Golden(
            "ticdc-all-types",
            _avro_golden,
            {"schema-registry": _AVRO_GOLDEN_REGISTRY, **_EXTENSION},
            {"RowChange": 3},
        ),
        Golden(
            "sample",
            _avro_sample,
            {"schema-registry": _AVRO_SAMPLE_REGISTRY, **_EXTENSION},
            {"RowChange": 40},
        ),
    ),
    representable=_avro_representable,
)

PROFILES: dict[str, Profile] = {
    p.name: p for p in (OPEN_PROTOCOL, CANAL_JSON, AVRO, DEBEZIUM, SIMPLE)
}


def variants() -> list[tuple[str, Variant]]:
    """(protocol, variant) for every registered protocol that has a profile, for
    ``pytest.mark.parametrize``; a protocol without one fails ``test_registry``."""
    from ticdc_spark.codec import protocols

    return [(name, v) for name in protocols() if name in PROFILES for v in PROFILES[name].variants]


def variant_id(value: object) -> str | None:
    return value.label if isinstance(value, Variant) else None
