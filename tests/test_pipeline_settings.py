"""The pipeline's settings as values: the error policy and mode spelled once, what each
protocol carries built once from the codec catalog, and sinks found by target scheme."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from ticdc_spark import sinks
from ticdc_spark.errors import ConfigError
from ticdc_spark.pipeline.capabilities import Capabilities
from ticdc_spark.pipeline.policy import Mode, OnError
from ticdc_spark.sinks import make_sink


def test_the_error_policy_reads_every_spelling_the_commands_use() -> None:
    assert OnError.parse("stop") is OnError.STOP
    assert OnError.parse("fail") is OnError.STOP  # (the decode stage's word for it)
    assert OnError.parse("dead-letter") is OnError.DEAD_LETTER
    assert OnError.parse("skip") is OnError.SKIP
    assert OnError.DEAD_LETTER == "dead-letter"  # (configs written as strings keep working)
    with pytest.raises(ConfigError, match="must be dead-letter or stop, not 'skip'"):
        OnError.parse("skip", (OnError.DEAD_LETTER, OnError.STOP))


def test_the_mode_is_consistent_or_eventual() -> None:
    assert Mode.parse("eventual") is Mode.EVENTUAL
    with pytest.raises(ConfigError, match="consistent or eventual, not 'fast'"):
        Mode.parse("fast")


@pytest.mark.parametrize(
    ("protocol", "watermarks", "rows_define_schema", "place_by_position", "finisher"),
    [
        ("canal-json", True, False, False, False),
        ("open-protocol", True, False, False, False),
        ("avro", False, True, True, False),
        ("debezium", True, False, True, False),
        ("simple", True, True, False, True),
    ],
)
def test_capabilities_come_from_the_codec_catalog(
    protocol: str,
    watermarks: bool,
    rows_define_schema: bool,
    place_by_position: bool,
    finisher: bool,
) -> None:
    found = Capabilities.of(protocol)
    assert found.watermarks is watermarks
    assert found.rows_define_schema is rows_define_schema
    assert found.place_by_position is place_by_position
    assert (found.finisher is not None) is finisher
    assert found.default_mode() == ("consistent" if watermarks else "eventual")


def test_an_unknown_target_names_the_valid_ones() -> None:
    with pytest.raises(ConfigError, match="use delta:PATH or iceberg:CATALOG_URI#WAREHOUSE"):
        make_sink("parquet:/tmp/x")
    with pytest.raises(ConfigError, match="unknown target"):
        make_sink("delta:")


def test_a_missing_table_library_is_one_line_saying_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    absent = dataclasses.replace(sinks.SINKS["delta"], library="ticdc_spark_no_such_library")
    monkeypatch.setitem(sinks.SINKS, "delta", absent)
    with pytest.raises(ConfigError, match=r"needs the ticdc_spark_no_such_library package.*pip"):
        make_sink("delta:/tmp/lake")


def test_a_target_loads_its_sink_class(tmp_path: Path) -> None:
    from ticdc_spark.sinks.delta import DeltaSink

    sink = make_sink(f"delta:{tmp_path}", app_id="ticdc-spark-test")
    assert isinstance(sink, DeltaSink) and sink.app_id == "ticdc-spark-test"
