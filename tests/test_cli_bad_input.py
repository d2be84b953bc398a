"""Issue 24's bad inputs that need no Spark to answer, from the command line: each is refused
with exit status 2, in a few lines without a trace, before Spark starts and before anything
is written (the checkpoint and the target are never created).

"Before Spark starts" is shown, not timed: in-process the session builder fails the test if
called; in a subprocess Java is pointed nowhere (``JAVA_HOME``), so a run that started Spark
could not answer as it does.  Each subprocess's time to answer is printed (``-s``).  The
answers that need Spark (a bad record met by a task, a checkpoint or table found damaged):
tests/test_cli_spark_errors.py.

Item 1's unreachable broker (``kafka://127.0.0.1:1/t``: one line naming the broker, well
within a minute) joins ``SPARK_FREE`` when the kafka branch lands.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from pipeline_helpers import canal_message
from ticdc_spark.cli import main
from ticdc_spark.codec import Message
from ticdc_spark.spark import pipeline
from ticdc_spark.testing.produce import produce_workload
from ticdc_spark.testing.workload import Workload

ROOT = Path(__file__).resolve().parents[1]
TERMINAL_LINES, TERMINAL_WIDTH = 8, 100
CANAL_TIDB = ["-p", "canal-json", "-o", "enable-tidb-extension=true"]


def fits_a_terminal(err: str) -> bool:
    """At most 8 lines of a 100-column terminal, and no trace."""
    lines = err.strip().splitlines()
    shown = sum(max(1, math.ceil(len(line) / TERMINAL_WIDTH)) for line in lines)
    return shown <= TERMINAL_LINES and "Traceback" not in err


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small Canal-JSON capture directory (with the TiDB extension)."""
    root = tmp_path_factory.mktemp("capture")
    workload = Workload(seed=5, rows=60, tables=1)
    produce_workload(workload, "canal-json", {"enable-tidb-extension": "true"}, str(root / "c"))
    return root / "c"


def replicate(capture: Path, root: Path, *extra: str, protocol: list[str] = CANAL_TIDB):
    """``replicate`` from ``capture`` into ``root``'s lake, checkpoint ``root/ckpt``."""
    return [
        "replicate",
        "--source",
        str(capture),
        *protocol,
        "--target",
        f"delta:{root / 'lake'}",
        "--checkpoint",
        str(root / "ckpt"),
        *extra,
    ]


# (arguments after `replicate --source CAPTURE -p canal-json ...`, or a whole command line;
# a fragment of the answer)
SPARK_FREE = [
    (["--source-option", "maxOffsetPerTrigger=10"], "did you mean maxOffsetsPerTrigger?"),
    (["--source-option", "startingOffsets=earliest"], "valid: maxOffsetsPerTrigger"),
    (["--source-option", "onBadRecord=maybe"], "onBadRecord must be stop or dead-letter"),
    (["--source-option", "maxFilesPerTrigger=-1"], "maxFilesPerTrigger must be a positive"),
    (["--trigger", "soon"], "--trigger is 'once' or a number of seconds, not 'soon'"),
    (["--max-held-rows", "0"], "--max-held-rows must be at least 1"),
    (["-o", "max-batch-sise=3"], "unknown option 'max-batch-sise' for canal-json; valid:"),
    (["--filter", "db"], "missing table pattern"),
    (["--target", "parquet:/tmp/x"], "use delta:PATH or iceberg:CATALOG_URI#WAREHOUSE"),
    # (the spark engine's session loads S3A, no GCS or Azure connector; the embedded writes them)
    (["--target", "delta:gs://lake/t"], "the spark engine does not write tables to gs:// yet"),
    (
        ["--target", "iceberg:sqlite:////tmp/c.db#abfss://c@a.dfs.core.windows.net/w"],
        "does not write tables to abfss:// yet (Spark would write them through a Hadoop",
    ),
    ("MODE CONSISTENT", "carries only with enable-tidb-extension=true"),
    ("AVRO", "the avro protocol needs a Confluent Schema Registry"),
    ("AVRO MOCK", "exists only inside one process"),
    ("SOURCE", "is neither kafka://HOST:PORT/TOPIC nor a capture directory"),
    ("KAFKA SOURCE", "did you mean maxOffsetsPerTrigger?"),
]


def _argv(case: list[str] | str, capture: Path, tmp_path: Path) -> list[str]:
    if isinstance(case, list):
        return replicate(capture, tmp_path, *case)
    plain = ["-p", "canal-json"]
    avro = ["-p", "avro"]
    return {
        "MODE CONSISTENT": replicate(capture, tmp_path, "--mode", "consistent", protocol=plain),
        "AVRO": replicate(capture, tmp_path, protocol=avro),
        "AVRO MOCK": replicate(capture, tmp_path, "--schema-registry", "mock://x", protocol=avro),
        "SOURCE": replicate(tmp_path / "nowhere", tmp_path),
        "KAFKA SOURCE": [
            *replicate(capture, tmp_path, "--source-option", "maxOffsetPerTrigger=10"),
            "--source",
            "kafka://127.0.0.1:1/t",
        ],
    }[case]


@pytest.fixture
def no_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("Spark was started before the arguments were checked")

    monkeypatch.setattr(pipeline, "spark_session", refuse)


@pytest.mark.parametrize(("case", "answer"), SPARK_FREE, ids=[str(c) for c, _ in SPARK_FREE])
def test_a_bad_argument_is_refused_before_spark_starts_and_before_anything_is_written(
    case: list[str] | str, answer: str, capture: Path, tmp_path: Path, capsys, no_spark
) -> None:
    code = main(_argv(case, capture, tmp_path))
    err = capsys.readouterr().err
    assert code == 2, err
    assert answer in err and fits_a_terminal(err), err
    assert not (tmp_path / "ckpt").exists() and not (tmp_path / "lake").exists()


def _answer(argv: list[str], env: dict[str, str] | None = None) -> tuple[int, str, float]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "ticdc_spark.cli", *argv],
        capture_output=True,
        check=False,
        text=True,
        env={**os.environ, "JAVA_HOME": "/nonexistent", **(env or {})},
        cwd=ROOT,
    )
    seconds = time.perf_counter() - started
    print(f"{' '.join(argv[:1])}: exit {done.returncode} in {seconds:.1f}s")
    return done.returncode, done.stderr, seconds


@pytest.mark.parametrize(
    "case", ["KAFKA SOURCE", ["--source-option", "maxOffsetPerTrigger=10"], "AVRO"]
)
def test_the_installed_command_answers_without_java(
    case: list[str] | str, capture: Path, tmp_path: Path
) -> None:
    code, err, _ = _answer(_argv(case, capture, tmp_path))
    assert code == 2 and fits_a_terminal(err), err
    assert not (tmp_path / "ckpt").exists()


@pytest.mark.parametrize("command", ["produce", "encode", "decode"])
def test_a_registry_other_processes_cannot_share_is_refused(
    command: str, tmp_path: Path, capsys
) -> None:
    argv = [command, "-p", "avro", "--schema-registry", "mock://demo"]
    argv += {"produce": ["--to", str(tmp_path / "c"), "--expected", str(tmp_path / "e")]}.get(
        command, [os.devnull]
    )
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and "exists only inside one process" in err and fits_a_terminal(err), err
    assert not (tmp_path / "c").exists()


def test_canal_json_without_its_extension_is_replicated_in_eventual_mode_saying_why(
    capture: Path, tmp_path: Path, monkeypatch, capsys
) -> None:
    seen = replicate_without_spark(monkeypatch)
    assert main(replicate(capture, tmp_path, protocol=["-p", "canal-json"])) == 0
    err = capsys.readouterr().err
    assert seen[0].mode == "eventual"
    assert "eventual mode: canal-json without enable-tidb-extension=true" in err
    assert main(replicate(capture, tmp_path)) == 0  # (with it: consistent, nothing said)
    assert seen[1].mode == "consistent" and "eventual" not in capsys.readouterr().err


def test_a_checkpoint_holding_rows_for_the_watermark_is_not_switched_to_eventual(
    capture: Path, tmp_path: Path, capsys, no_spark
) -> None:
    from pipeline_helpers import run_batches
    from ticdc_spark.sinks.delta import DeltaSink

    messages = [Message(None, canal_message(ts, id=ts), "t", 0, ts) for ts in (5, 6, 7)]
    checkpoint = tmp_path / "ckpt"
    applier = run_batches([messages], "canal-json", {}, DeltaSink(tmp_path / "lake"), checkpoint)
    assert applier.reports[-1].held == 3  # (consistent mode, and no watermark ever)
    (checkpoint / "spark" / "offsets").mkdir(parents=True)
    (checkpoint / "spark" / "offsets" / "0").write_text("{}")
    code = main(replicate(capture, tmp_path, "--mode", "eventual", protocol=["-p", "canal-json"]))
    err = capsys.readouterr().err
    assert code == 2 and fits_a_terminal(err), err
    assert "holds 3 rows back for the watermark" in err and "a new --checkpoint" in err


def test_the_help_says_what_each_argument_is_and_its_default(capsys) -> None:
    for command in ("replicate", "produce"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
    out = " ".join(capsys.readouterr().out.split())
    for described in (
        "--source kafka://HOST:PORT/TOPIC[,TOPIC]|DIR Kafka topics",
        "--protocol PROTOCOL, -p PROTOCOL the changefeed's protocol: avro, canal-json",
        "--target delta:PATH|iceberg:CATALOG_URI#WAREHOUSE Delta tables under PATH",
        "--checkpoint DIR|s3://BUCKET/PREFIX where the offsets and the consumer state live",
        "--rows ROWS row changes to generate (default: 10000)",
        "--partitions PARTITIONS partitions per topic (default: 3)",
        "or columns:a,b (default: index-value)",
    ):
        assert described in out
    assert "mock://" not in out  # (offered no more: it cannot work across processes)


def test_the_kafka_option_names_are_those_docs_kafka_source_tables() -> None:
    from ticdc_spark.spark.preflight import KAFKA_OPTIONS

    table = (ROOT / "docs" / "kafka-source.md").read_text(encoding="utf-8")
    documented = set()
    options_table = table.split("\n## ", 1)[0]  # (the first section: the options' table)
    for line in options_table.splitlines():
        if line.startswith("| `"):
            first_cell = line.split("|")[1]
            documented |= {n for n in first_cell.split("`")[1::2] if not n.startswith("kafka.")}
    assert documented == set(KAFKA_OPTIONS)


def replicate_without_spark(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """``replicate`` up to the run, without Spark: the configurations it would run, in a
    list (the lease given back, as the run does when it ends)."""
    seen: list[Any] = []

    def run(spark: object, config: object, on_batch: object, lease: Any) -> None:
        lease.release()
        seen.append(config)

    monkeypatch.setattr(pipeline, "spark_session", lambda *a, **k: _NoSpark())
    monkeypatch.setattr(pipeline, "run", run)
    return seen


class _NoSpark:
    class sparkContext:
        @staticmethod
        def setLogLevel(level: str) -> None:
            pass
