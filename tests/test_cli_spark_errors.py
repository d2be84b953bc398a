"""Issue 24's bad inputs that Spark meets, from the command line: a bad capture line, a
message that does not decode (``--on-error stop``), every record a dead letter, a checkpoint
that cannot resume or needs a repair, a Delta table that cannot be read.  Each answer is its
exit status and a few lines without a trace (the trace with ``--verbose``); what the default
policy keeps going is checked against the expected tables.

The commands run in this process on the tests' shared Spark session (a session each would
cost 6-12 s); one runs as the installed command, to see the terminal as a user does, JVM
included.  (The answers that need no Spark: tests/test_cli_bad_input.py.)
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from test_cli_bad_input import CANAL_TIDB, fits_a_terminal, replicate
from ticdc_spark.cli import main
from ticdc_spark.testing.produce import produce_workload
from ticdc_spark.testing.workload import Workload

GARBAGE = b"garbage line\n"


@pytest.fixture(scope="module")
def produced(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Canal-JSON capture (with the TiDB extension) and its expected tables."""
    root = tmp_path_factory.mktemp("produced")
    workload = Workload(seed=7, rows=300, tables=2)
    options = {"enable-tidb-extension": "true"}
    produce_workload(workload, "canal-json", options, str(root / "capture"), expected=root / "e")
    return root


def _capture(produced: Path, tmp_path: Path, extra: bytes = b"") -> Path:
    """A copy of the capture, with ``extra`` lines added to its file."""
    capture = tmp_path / "capture"
    shutil.copytree(produced / "capture", capture)
    if extra:
        (only,) = capture.glob("*.jsonl")
        only.write_bytes(only.read_bytes() + extra)
    return capture


def _last_line(capture: Path) -> str:
    """``FILE line N`` of the capture's last line."""
    (only,) = capture.glob("*.jsonl")
    return f"{only.name} line {len(only.read_bytes().splitlines())}"


def _replicate(capture: Path, root: Path, *extra: str, protocol: list[str] = CANAL_TIDB):
    return replicate(capture, root, "--quiet", *extra, protocol=protocol)


def _verified(produced: Path, root: Path, capsys) -> bool:
    code = main(["verify", "--target", f"delta:{root / 'lake'}", "--expected", str(produced / "e")])
    capsys.readouterr()
    return code == 0


def test_a_bad_capture_line_is_a_dead_letter_and_the_rest_is_applied(
    spark, produced: Path, tmp_path: Path, capsys
) -> None:
    capture = _capture(produced, tmp_path, GARBAGE)
    code = main(_replicate(capture, tmp_path))
    err = capsys.readouterr().err
    assert code == 0 and fits_a_terminal(err), err
    assert "1 dead letters" in err and f"{_last_line(capture)}: not JSON" in err
    (letters,) = (tmp_path / "ckpt" / "dead-letters").glob("*.jsonl")
    (letter,) = [orjson.loads(line) for line in letters.read_bytes().splitlines()]
    assert base64.b64decode(letter["value"]) + b"\n" == GARBAGE
    assert letter["error"].startswith(f"{_last_line(capture)}: not JSON (unexpected character")
    assert (letter["topic"], letter["partition"]) == ("capture-000000.jsonl", -1)
    assert _verified(produced, tmp_path, capsys)


def test_a_skipped_capture_line_is_counted_and_reported(
    spark, produced: Path, tmp_path: Path, capsys
) -> None:
    capture = _capture(produced, tmp_path, GARBAGE)
    code = main(_replicate(capture, tmp_path, "--source-option", "onBadRecord=skip"))
    err = capsys.readouterr().err
    assert code == 0 and fits_a_terminal(err), err
    assert "warning: micro-batch 0: skipped 1 capture line(s) that are not Kafka records" in err
    assert "0 dead letters, 1 bad capture lines skipped (onBadRecord=skip)" in err
    assert not (tmp_path / "ckpt" / "dead-letters").exists()
    assert _verified(produced, tmp_path, capsys)


@pytest.mark.parametrize("verbose", [False, True])
def test_on_error_stop_names_the_bad_line_in_one_line(
    spark, produced: Path, tmp_path: Path, capsys, verbose: bool
) -> None:
    capture = _capture(produced, tmp_path, GARBAGE)
    code = main(_replicate(capture, tmp_path, "--on-error", "stop", *["-v"] * verbose))
    err = capsys.readouterr().err
    assert code == 2, err
    line = f"ticdc-spark replicate: {_last_line(capture)}: not JSON"
    assert err.strip().splitlines()[-1].startswith(line)
    assert fits_a_terminal(err) is not verbose  # (the whole trace, when asked for)


def test_on_error_stop_names_the_record_that_does_not_decode(
    spark, produced: Path, tmp_path: Path, capsys
) -> None:
    bad = {"topic": "t", "partition": 0, "offset": 9, "key": None, "value": "eyJ4IjoxfQ=="}
    capture = _capture(produced, tmp_path, orjson.dumps(bad) + b"\n")  # (the value: {"x":1})
    code = main(_replicate(capture, tmp_path, "--on-error", "stop"))
    err = capsys.readouterr().err
    assert code == 2 and fits_a_terminal(err), err
    assert "ticdc-spark replicate: cannot decode canal-json message at t/0@9: " in err


def test_a_run_whose_every_record_is_a_dead_letter_fails(
    spark, produced: Path, tmp_path: Path, capsys
) -> None:
    capture = _capture(produced, tmp_path)
    code = main(_replicate(capture, tmp_path, protocol=["-p", "open-protocol"]))
    err = capsys.readouterr().err
    assert code == 2 and fits_a_terminal(err), err
    assert "every record of this run became a dead letter" in err
    assert "cannot decode open-protocol message at ticdc_" in err


@pytest.fixture(scope="module")
def replicated(spark, produced: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The capture replicated in micro-batches of 60 records (about 12): tables, checkpoint."""
    root = tmp_path_factory.mktemp("replicated")
    argv = _replicate(produced / "capture", root, "--source-option", "maxOffsetsPerTrigger=60")
    assert main(argv) == 0
    return root


def _copy(replicated: Path, tmp_path: Path) -> Path:
    shutil.copytree(replicated, tmp_path / "run")
    return tmp_path / "run"


def test_a_checkpoint_that_cannot_resume_is_refused_in_one_line(
    replicated: Path, produced: Path, tmp_path: Path, capsys
) -> None:
    run = _copy(replicated, tmp_path)
    for path in [
        *(run / "ckpt" / "ticdc").glob("state-*"),
        *(run / "ckpt" / "ticdc").glob("wal/*"),
    ]:
        path.unlink()
    code = main(_replicate(produced / "capture", run))
    err = capsys.readouterr().err
    assert code == 1 and fits_a_terminal(err), err
    assert f"the consumer state in {run / 'ckpt' / 'ticdc'} does not reach micro-batch" in err
    assert "state-000000000005.json" in err and "a new checkpoint" in err


def test_a_lost_newest_state_is_rebuilt_saying_so(
    replicated: Path, produced: Path, tmp_path: Path, capsys
) -> None:
    run = _copy(replicated, tmp_path)
    newest = sorted((run / "ckpt" / "ticdc").glob("state-*.json"))[-1]
    newest.unlink()
    code = main(_replicate(produced / "capture", run))
    err = capsys.readouterr().err
    assert code == 0 and fits_a_terminal(err), err
    assert f"ticdc-spark replicate: warning: {newest} is missing: rebuilding it" in err
    assert newest.exists()


def test_a_table_whose_delta_log_does_not_read_is_named(
    replicated: Path, produced: Path, tmp_path: Path, capsys
) -> None:
    run = _copy(replicated, tmp_path)
    shutil.rmtree(run / "ckpt")  # (a new checkpoint: its first batch opens the tables)
    log = sorted((run / "lake" / "sbtest" / "sbtest1" / "_delta_log").glob("*.json"))[-1]
    log.write_bytes(b"#" + log.read_bytes())
    code = main(_replicate(produced / "capture", run))
    err = capsys.readouterr().err
    assert code == 1 and fits_a_terminal(err), err
    assert f"cannot be read: its log file _delta_log/{log.name} is not JSON" in err


def test_the_terminal_shows_one_line_for_a_bad_record(produced: Path, tmp_path: Path) -> None:
    """As the installed command, Spark's own output included."""
    capture = _capture(produced, tmp_path, GARBAGE)
    started = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ticdc_spark.cli",
            *_replicate(capture, tmp_path, "--on-error", "stop"),
        ],
        capture_output=True,
        check=False,
        text=True,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
    )
    print(f"answered in {time.perf_counter() - started:.1f}s")
    assert done.returncode == 2 and fits_a_terminal(done.stderr), done.stderr
    assert f"{_last_line(capture)}: not JSON" in done.stderr.strip().splitlines()[-1]
