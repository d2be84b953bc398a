"""Kill anywhere, start again: the tables equal those of a run that never stopped.

The pipeline runs in a subprocess and dies for real (``os._exit`` at a named point of
``TICDC_SPARK_CRASH_AT``, see :mod:`ticdc_spark.pipeline.failpoints`, or SIGKILL at a random
moment), then starts again with the next kill point, and once more with none.  The stream
(:func:`restart_helpers.stream`) holds rows held for the watermark, a table rewrite, a
RENAME TABLE, a DROP TABLE and a table created again.  Tables are compared row by row,
``_commit_ts`` included (live tables: deleted rows gone, no ``_op``).

Two chains per sink: the sink-side points through the harness (the pipeline's apply path
without Spark, fast to start), with a consumer-state file deleted and another corrupted
between two kills; the Spark-side points (offsets written, decoded, logged, committed)
through ``ticdc-spark replicate`` itself.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from restart_helpers import (
    OPTIONS,
    assert_same_tables,
    environment,
    harness_command,
    reader,
    run_harness,
    stream,
    target,
    write_batches,
    write_capture_dir,
)
from ticdc_spark.pipeline.failpoints import CRASH_EXIT_CODE
from ticdc_spark.sinks import make_sink

RECORDS_PER_BATCH = 12

# In stream order, so that each restart reaches the next point; every one must be reached.
HARNESS_POINTS = {
    ("embedded", "delta"): [
        "offsets-written:1",
        "decoded:2",
        "logged:3",
        "step:3:2",
        "rewrite",
        "step:*:1",
        "rename",
        "drop",
        "drop-deleting",  # reached while the next start empties the trash
        "state-saved:*",
        "committed:*",
    ],
    ("embedded", "iceberg"): [
        "offsets-written:1",
        "decoded:2",
        "logged:3",
        "step:3:2",
        "rewrite",
        "rewrite-swap",
        "rename",
        "drop",
        "state-saved:*",
        "committed:*",
    ],
    # The spark engine: the points its own code reaches (each start costs a JVM, so the
    # harness's points before the apply, and the Delta renames and drops, which are the
    # embedded sink's code on the same files, are the embedded chains'); the stream's INT ->
    # BIGINT is a schema change in place there (no rewrite), killed between the change and
    # its version.
    # (spark/Delta planned on the executors, spark/Iceberg on the driver: both planners)
    ("spark+executors", "delta"): [
        "logged:2",
        "planned:3",
        "step:3:2",
        "schema-changed",
        "state-saved:*",
    ],
    ("spark", "iceberg"): ["step:3:2", "schema-changed", "step:*:1", "state-saved:*"],
}
CHAINS = sorted(HARNESS_POINTS)
# seconds before a random SIGKILL: the harness's start (a JVM for the spark engine) and then
# its micro-batches
KILL_AFTER = {"embedded": (0.5, 2.5), "spark": (10.0, 30.0), "spark+executors": (10.0, 30.0)}


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The stream as capture files and as micro-batches, and the tables of uninterrupted
    runs (one per sink)."""
    root = tmp_path_factory.mktemp("restart")
    messages = stream()
    write_capture_dir(messages, root / "capture")
    batches = write_batches(messages, root / "batches", RECORDS_PER_BATCH)
    assert batches > 8
    for engine, kind in CHAINS:
        calm = root / engine / kind
        code = run_harness(
            calm / "checkpoint", target(kind, calm), root / "batches", None, engine=engine
        )
        assert code == 0
    return {"root": root, "capture": root / "capture", "batches": root / "batches"}


def _damage_latest_state(checkpoint: Path, how: str) -> Path:
    states = sorted((checkpoint / "ticdc").glob("state-*.json"))
    latest = states[-1]
    if how == "delete":
        latest.unlink()
        latest.with_name(latest.name.replace("state-", "held-").replace(".json", ".arrow")).unlink(
            missing_ok=True
        )
    else:
        latest.write_bytes(latest.read_bytes()[:40])
    return latest


@pytest.mark.parametrize(("engine", "kind"), CHAINS)
def test_killed_at_every_sink_point_and_at_random(
    prepared: dict[str, Path],
    tmp_path: Path,
    engine: str,
    kind: str,
    request: pytest.FixtureRequest,
) -> None:
    checkpoint, spec = tmp_path / "checkpoint", target(kind, tmp_path)
    for number, point in enumerate(HARNESS_POINTS[(engine, kind)]):
        code = run_harness(checkpoint, spec, prepared["batches"], point, engine=engine)
        assert code == CRASH_EXIT_CODE, f"{point} was never reached"
        if engine == "embedded" and number == 3:  # the state of the last committed batch lost
            _damage_latest_state(checkpoint, "delete")
        if engine == "embedded" and number == 6:  # ... or damaged: rebuilt from the log
            _damage_latest_state(checkpoint, "corrupt")
    rng = random.Random(16)
    for _ in range(3 if engine == "embedded" else 1):  # SIGKILL at random moments (in commits)
        process = subprocess.Popen(
            harness_command(checkpoint, spec, prepared["batches"], engine=engine),
            env=environment(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(rng.uniform(*KILL_AFTER[engine]))
        process.send_signal(signal.SIGKILL)
        process.wait(30)
    assert run_harness(checkpoint, spec, prepared["batches"], None, engine=engine) == 0
    base = engine.partition("+")[0]  # (the engine that wrote the tables)
    spark = request.getfixturevalue("spark") if base == "spark" else None
    calm = reader(target(kind, prepared["root"] / engine / kind), base, spark)
    assert_same_tables(reader(spec, base, spark), calm)


# The Spark-side points through replicate itself, with its overlapped apply: a batch logged
# but not committed by Spark, and one committed by Spark while its apply may still run.  Each
# start costs a JVM (15-90 s on a loaded 2-core machine), so only these, on Delta: the
# harness chains kill at every point on both sinks (their offsets-written/decoded/logged/
# committed are the harness's own), test_checkpoint starts Spark on a half-written first
# offsets file, and test_pipeline's kill test SIGKILLs replicate at random moments.
SPARK_POINTS = ["logged:1", "committed:*"]


@pytest.mark.spark
def test_replicate_killed_at_the_spark_points(prepared: dict[str, Path], tmp_path: Path) -> None:
    kind = "delta"
    spec = target(kind, tmp_path)
    command = [
        sys.executable,
        "-m",
        "ticdc_spark.cli",
        "replicate",
        "--engine",
        "embedded",
        "--source",
        str(prepared["capture"]),
        "--protocol",
        "canal-json",
        "--target",
        spec,
        "--checkpoint",
        str(tmp_path / "checkpoint"),
        "--quiet",
        "--trigger",
        "once",
        "--source-option",
        f"maxOffsetsPerTrigger={RECORDS_PER_BATCH * 3}",
        *[a for k, v in OPTIONS.items() for a in ("--option", f"{k}={v}")],
    ]
    for point in SPARK_POINTS:
        done = subprocess.run(
            command, env=environment(point), capture_output=True, timeout=600, check=False
        )
        assert done.returncode == CRASH_EXIT_CODE, (point, done.stderr.decode()[-3000:])
    done = subprocess.run(command, env=environment(), capture_output=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    calm = make_sink(target(kind, prepared["root"] / "embedded" / kind))
    assert_same_tables(make_sink(spec), calm)
