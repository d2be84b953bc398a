"""The ticdc-spark command line: decode, encode, their identity, and bad input handling."""

from __future__ import annotations

import base64
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from test_canal_json_spec import spec_examples
from ticdc_spark.cli import main
from ticdc_spark.model import Watermark
from ticdc_spark.normalized import event_to_json
from ticdc_spark.testing.workload import Workload


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[dict], str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, [orjson.loads(line) for line in out.splitlines() if line.strip()], err


def test_decode_canal_values_file(spec_dir: Path, tmp_path: Path, capsys) -> None:
    values = tmp_path / "messages.jsonl"
    values.write_bytes(b"\n".join(orjson.dumps(e) for e in spec_examples(spec_dir)) + b"\n")
    code, events, _ = run(["decode", "--protocol", "canal-json", "--values", str(values)], capsys)
    assert code == 0
    assert [e["type"] for e in events] == ["DDL", "INSERT", "WATERMARK"]
    insert = events[1]
    assert insert["after"]["c_bigint"] == "9223372036854775807"
    assert insert["columns"]["c_tinyint"] == "tinyint"
    assert insert["pk"] == ["id"]
    assert events[0]["sql"] == "drop database if exists test"


def _golden_capture(golden_dir: Path, path: Path) -> None:
    lines = []
    for offset, name in enumerate(("ddl_0", "row_1", "rts_1")):
        kind, number = name.split("_")
        key = (golden_dir / "open-protocol" / "key" / f"{kind}_key_{number}").read_bytes()
        value = (golden_dir / "open-protocol" / "value" / f"{kind}_value_{number}").read_bytes()
        lines.append(
            orjson.dumps(
                {
                    "topic": "golden",
                    "partition": 0,
                    "offset": offset,
                    "timestamp": None,
                    "key": base64.b64encode(key).decode(),
                    "value": base64.b64encode(value).decode(),
                }
            )
        )
    path.write_bytes(b"\n".join(lines) + b"\n")


def test_decode_open_protocol_capture(golden_dir: Path, tmp_path: Path, capsys) -> None:
    capture = tmp_path / "golden.jsonl"
    _golden_capture(golden_dir, capture)
    code, events, _ = run(["decode", "-p", "open-protocol", str(capture)], capsys)
    assert code == 0
    assert [e["type"] for e in events] == [
        "DDL",
        "INSERT",
        "INSERT",
        "INSERT",
        "INSERT",
        "WATERMARK",
        "WATERMARK",
        "WATERMARK",
    ]
    assert events[4] == {
        "type": "INSERT",
        "database": "a",
        "table": "c",
        "commitTs": 4,
        "before": None,
        "after": {"col1": "cc"},
        "columns": {"col1": "tinyint"},
        "pk": [],
        "partitionId": 6,
    }


@pytest.mark.parametrize(
    ("protocol", "options"),
    [
        ("open-protocol", []),
        ("canal-json", ["-o", "enable-tidb-extension=true"]),
        ("canal-json", ["-o", "enable-tidb-extension=true", "-o", "content-compatible=true"]),
    ],
)
def test_encode_then_decode_is_the_identity(
    protocol: str, options: list[str], tmp_path: Path, capsys
) -> None:
    events = tmp_path / "events.jsonl"
    workload = Workload(seed=3, rows=60, tables=2, watermark_every=5)
    events.write_bytes(b"".join(orjson.dumps(event_to_json(e)) + b"\n" for e in workload.events()))

    def trip(source: Path, name: str) -> list[dict]:
        capture = tmp_path / f"{name}.capture.jsonl"
        assert (
            main(["encode", "-p", protocol, *options, "--output", str(capture), str(source)]) == 0
        )
        code, decoded, err = run(["decode", "-p", protocol, *options, str(capture)], capsys)
        assert code == 0, err
        path = tmp_path / f"{name}.events.jsonl"
        path.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in decoded))
        return decoded

    once = trip(events, "once")
    assert len(once) == len(events.read_bytes().splitlines())
    twice = trip(tmp_path / "once.events.jsonl", "twice")
    assert twice == once  # identity on what the protocol carries
    source = [orjson.loads(line) for line in events.read_bytes().splitlines()]
    for sent, got in zip(source, once, strict=True):  # and the values survived the first trip
        assert (got["type"], got.get("after"), got.get("before")) == (
            sent["type"],
            sent.get("after"),
            sent.get("before"),
        )


def test_bad_value_line_stops_with_exit_2(tmp_path: Path, capsys) -> None:
    values = tmp_path / "bad.jsonl"
    good = orjson.dumps(
        {
            "id": 0,
            "database": "",
            "table": "",
            "isDdl": False,
            "type": "TIDB_WATERMARK",
            "_tidb": {"watermarkTs": 5},
        }
    )
    values.write_bytes(good + b"\n" + b"{not json\n" + good + b"\n")
    code, events, err = run(["decode", "-p", "canal-json", "--values", str(values)], capsys)
    assert code == 2
    assert len(events) == 1
    assert "line 2" in err and "not valid JSON" in err

    code, events, err = run(
        ["decode", "-p", "canal-json", "--values", "--on-error", "skip", str(values)], capsys
    )
    assert code == 0
    assert len(events) == 2
    assert "line 2" in err and "1 bad record(s) skipped" in err


def test_bad_capture_line_names_the_line(tmp_path: Path, capsys) -> None:
    capture = tmp_path / "bad.capture.jsonl"
    capture.write_text('{"topic":"t","partition":0,"offset":1,"key":"!!","value":null}\n')
    code, _, err = run(["decode", "-p", "open-protocol", str(capture)], capsys)
    assert code == 2 and "line 1" in err


def test_encode_names_a_line_that_is_not_json(tmp_path: Path, capsys) -> None:
    events = tmp_path / "events.jsonl"
    events.write_text("\n{not json\n")
    code, _, err = run(["encode", "-p", "canal-json", str(events)], capsys)
    assert code == 2
    assert err.startswith(f"ticdc-spark encode: {events} line 2: not JSON (")


def test_unknown_protocol_and_option_list_the_valid_ones(capsys) -> None:
    code, _, err = run(["decode", "-p", "nope", "/dev/null"], capsys)
    assert code == 2 and "canal-json" in err and "open-protocol" in err
    code, _, err = run(
        ["decode", "-p", "canal-json", "-o", "max-batch-sise=3", "/dev/null"], capsys
    )
    assert code == 2 and "enable-tidb-extension" in err


@pytest.mark.parametrize("flag", ["--source-option", "--spark-conf", "--option"])
def test_a_malformed_setting_is_named_without_its_value(flag: str, tmp_path: Path, capsys) -> None:
    argv = ["replicate", "--engine", "embedded", "--source", str(tmp_path), "-p", "canal-json"]
    argv += ["--target", f"delta:{tmp_path}/lake", "--checkpoint", str(tmp_path / "ckpt")]
    code, _, err = run([*argv, flag, "a=1", flag, "kafka.sasl.password S3cr3t"], capsys)
    assert code == 2
    assert f"{flag} number 2 ('kafka.sasl.password' ...) is not KEY=VALUE" in err
    code, _, err = run([*argv, flag, "S3cr3t"], capsys)
    assert code == 2 and f"{flag} number 1 is not KEY=VALUE" in err
    assert "S3cr3t" not in err


@pytest.mark.kafka
def test_produce_reports_where_without_credentials(
    kafka_broker: str, tmp_path: Path, capsys
) -> None:
    to = f"KAFKA://alice:S3cr3t@{kafka_broker}?security.protocol=PLAINTEXT&batch.num.messages=1"
    argv = ["produce", "-p", "canal-json", "--to", to, "--rows", "20", "--tables", "1"]
    code, _, err = run([*argv, "--topic", "secrets_{schema}", "--expected", str(tmp_path)], capsys)
    assert code == 0
    assert f"to KAFKA://***@{kafka_broker}?security.protocol=PLAINTEXT" in err
    assert "S3cr3t" not in err and "alice" not in err
    assert not list(Path.cwd().glob("KAFKA:*"))  # Kafka in any case, not a directory


def test_unknown_sources_and_targets_are_named_without_credentials(tmp_path: Path, capsys) -> None:
    ckpt = str(tmp_path / "ckpt")
    for source, target in [
        ("kafkaa://alice:S3cr3t@h:9/t", f"delta:{tmp_path}/lake"),
        (str(tmp_path), "Icebergg:postgresql://alice:S3cr3t@db/cat#wh"),
        ("kafka:///t?sasl.password=S3cr3t", f"delta:{tmp_path}/lake"),
    ]:
        argv = [
            "replicate",
            "--engine",
            "embedded",
            "--source",
            source,
            "-p",
            "canal-json",
            "--target",
            target,
        ]
        code, _, err = run([*argv, "--checkpoint", ckpt], capsys)
        assert code == 2 and err
        assert "S3cr3t" not in err and "alice" not in err, err


def test_console_script_and_sample_pipeline() -> None:
    """The installed `ticdc-spark` entry point, as the README runs it."""
    sample = subprocess.run(
        [sys.executable, "-m", "ticdc_spark.cli", "sample", "-p", "canal-json"],
        capture_output=True,
        check=True,
    )
    decoded = subprocess.run(
        [sys.executable, "-m", "ticdc_spark.cli", "decode", "-p", "canal-json"],
        input=sample.stdout,
        capture_output=True,
        check=True,
    )
    events = [orjson.loads(line) for line in decoded.stdout.splitlines()]
    kinds = {e["type"] for e in events}
    assert {"DDL", "INSERT", "WATERMARK"} <= kinds


# --------------------------------------------------------------------------------------------
# --filter: TiCDC's table-filter rules on decode, encode, produce and replicate

FILTER = ["--filter", "*.*", "--filter", "!canal_demo.tmp_*"]


def test_decode_filter_drops_a_malformed_row_of_a_filtered_table(tmp_path: Path, capsys) -> None:
    from test_filter_decode import CAPTURE

    values = tmp_path / "canal.jsonl"
    values.write_bytes(b"\n".join(CAPTURE) + b"\n")
    argv = ["decode", "-p", "canal-json", "--values", str(values)]
    code, _, err = run(argv, capsys)
    assert code == 2 and "line 2" in err  # the malformed row, without the filter
    code, events, err = run([*argv, *FILTER], capsys)
    assert code == 0, err
    assert {(e.get("database"), e.get("table")) for e in events if e["type"] != "WATERMARK"} == {
        ("canal_demo", "canal_demo_user_test"),
        ("test", "test_canal"),
    }
    code, _, err = run([*argv, "--filter", "db.t.x"], capsys)
    assert code == 2 and "'db.t.x'" in err and "stray characters" in err


def test_encode_filter_encodes_only_kept_tables(tmp_path: Path, capsys) -> None:
    events = tmp_path / "events.jsonl"
    workload = Workload(seed=3, rows=60, tables=2, watermark_every=5)
    events.write_bytes(b"".join(orjson.dumps(event_to_json(e)) + b"\n" for e in workload.events()))
    capture = tmp_path / "capture.jsonl"
    argv = ["encode", "-p", "canal-json", "-o", "enable-tidb-extension=true", str(events)]
    assert main([*argv, "--output", str(capture), "--filter", "SBTEST.*"]) == 0
    code, decoded, err = run(["decode", "-p", "canal-json", str(capture)], capsys)
    assert code == 0, err
    assert {e["table"] for e in decoded if e["type"] != "WATERMARK"} == {"sbtest1"}
    assert any(e["type"] == "WATERMARK" for e in decoded)


def test_produce_filter_sends_and_expects_only_kept_tables(tmp_path: Path, capsys) -> None:
    out, expected = tmp_path / "capture", tmp_path / "expected"
    argv = ["produce", "-p", "canal-json", "--to", str(out), "--expected", str(expected)]
    code, _, err = run([*argv, "--rows", "60", "--filter", "*.*", "--filter", "!test.*"], capsys)
    assert code == 0, err
    tables = {
        (t["database"], t["table"]) for t in orjson.loads((expected / "_schemas.json").read_bytes())
    }
    assert tables == {("sbtest", "sbtest1")}
    records = [
        orjson.loads(line)
        for f in sorted(out.glob("*.jsonl"))
        for line in f.read_bytes().splitlines()
    ]
    assert records and {r["topic"] for r in records} == {"ticdc_sbtest"}


def _watermarks(capture: Path) -> set[tuple[str, int, int]]:
    """(topic, partition, commit ts) of the Canal-JSON watermarks in a capture directory."""
    records = [
        orjson.loads(line) for f in capture.glob("*.jsonl") for line in f.read_bytes().splitlines()
    ]
    messages = [(r, orjson.loads(base64.b64decode(r["value"]))) for r in records]
    return {
        (r["topic"], r["partition"], m["_tidb"]["watermarkTs"])
        for r, m in messages
        if m["type"] == "TIDB_WATERMARK"
    }


def test_produce_sends_watermarks_as_often_as_asked(tmp_path: Path, capsys) -> None:
    counts = {}
    for every in ("16", "50"):
        out = tmp_path / every
        argv = ["produce", "-p", "canal-json", "-o", "enable-tidb-extension=true"]
        argv += ["--to", str(out), "--expected", str(tmp_path / f"e{every}"), "--rows", "400"]
        code, _, err = run([*argv, "--partitions", "2", "--watermark-every", every], capsys)
        assert code == 0, err
        counts[every] = _watermarks(out)
    # the workload's watermarks (one per N transactions), on every partition of both topics
    for every, marks in counts.items():
        workload = Workload(rows=400, watermark_every=int(every)).events()
        assert len(marks) == 4 * sum(isinstance(e, Watermark) for e in workload)
    assert len(counts["16"]) > len(counts["50"]) > 4
    with pytest.raises(SystemExit) as usage:  # (argparse's usage error)
        main(["produce", "-p", "canal-json", "--to", str(tmp_path), "--watermark-every", "0"])
    assert usage.value.code == 2 and "0 is not a positive number" in capsys.readouterr().err


def test_replicate_carries_the_filter_to_the_pipeline(tmp_path: Path, monkeypatch, capsys) -> None:
    from test_cli_bad_input import replicate_without_spark

    seen = replicate_without_spark(monkeypatch)
    argv = ["replicate", "--engine", "embedded", "--source", str(tmp_path), "-p", "canal-json"]
    argv += ["--target", f"delta:{tmp_path / 't'}", "--checkpoint", str(tmp_path / "c")]
    code, _, err = run([*argv, *FILTER], capsys)
    assert code == 0, err
    assert seen[0].table_filter == ("*.*", "!canal_demo.tmp_*")
    code, _, err = run([*argv, "--filter", "db"], capsys)  # a bad rule: before Spark starts
    assert code == 2 and "'db'" in err and "missing table pattern" in err
    assert len(seen) == 1


def test_replicate_loads_s3a_for_tables_on_s3_under_the_spark_engine(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """The session of a run whose tables are on s3:// loads S3A beside Delta's jars,
    configured from the storage settings (``--spark-conf`` wins); under the embedded engine
    (and a local checkpoint) it loads neither."""
    from ticdc_spark.spark import pipeline

    started: list[dict[str, Any]] = []
    monkeypatch.setattr(pipeline, "spark_session", lambda *a, **k: started.append(k) or _NoSpark())
    monkeypatch.setattr(pipeline, "run", lambda spark, config, on_batch, lease: lease.release())
    argv = ["replicate", "--source", str(tmp_path), "-p", "canal-json"]
    argv += ["-o", "enable-tidb-extension=true", "--checkpoint", str(tmp_path / "c")]
    argv += ["--target", "delta:s3://lake/t", "--storage-option", "AWS_ENDPOINT_URL=http://h:9"]
    argv += ["--spark-conf", "spark.hadoop.fs.s3a.path.style.access=false"]
    code, _, err = run(argv, capsys)
    assert code == 0, err
    settings = started[0]["settings"]
    assert {"delta", "s3"} <= set(started[0]["features"])
    assert settings["spark.hadoop.fs.s3a.endpoint"] == "http://h:9"
    assert settings["spark.hadoop.fs.s3.impl"] == "org.apache.hadoop.fs.s3a.S3AFileSystem"
    assert settings["spark.hadoop.fs.s3a.path.style.access"] == "false"  # (storage's: true)
    code, _, err = run([*argv, "--engine", "embedded"], capsys)
    assert code == 0, err
    assert not {"delta", "s3"} & set(started[1]["features"])
    assert "spark.hadoop.fs.s3a.endpoint" not in started[1]["settings"]


class _NoSpark:
    class sparkContext:
        @staticmethod
        def setLogLevel(level: str) -> None:
            pass
