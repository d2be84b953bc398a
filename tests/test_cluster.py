"""``replicate --master spark://...`` on a standalone cluster of two workers
(tests/spark_cluster.py): the driver in the command's process, the read, decode and merge
tasks in the workers' executors and their Python workers; the tables equal the workload's
expected state, as a local run's do (tests/test_pipeline.py, tests/test_capture_source.py).

Each run starts a driver JVM and two executors: the workload is small (two tables, key
changes, deletes, ADD COLUMNs, a few micro-batches) and the cluster is the session's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from spark_cluster import SparkCluster
from ticdc_spark.sinks import make_sink
from ticdc_spark.testing.produce import produce_workload
from ticdc_spark.testing.verify import verify_sink
from ticdc_spark.testing.workload import Workload

pytestmark = [pytest.mark.spark, pytest.mark.cluster]

PROTOCOLS = {"canal-json": {"enable-tidb-extension": "true"}, "open-protocol": {}}


@pytest.fixture(scope="module")
def captures(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Per protocol, a capture directory and its expected state: 120 changes to two tables
    (inserts, updates, key changes sent as DELETE + INSERT, deletes), two ADD COLUMNs."""
    root = tmp_path_factory.mktemp("cluster-captures")
    for protocol, options in PROTOCOLS.items():
        workload = Workload(seed=31, rows=120, tables=2, ddl_every=12, watermark_every=5)
        produce_workload(
            workload,
            protocol,
            options,
            str(root / protocol / "capture"),
            expected=root / protocol / "expected",
            partitions=2,
        )
    return root


def _target(kind: str, root: Path) -> str:
    if kind == "delta":
        return f"delta:{root / 'lake'}"
    return f"iceberg:sqlite:///{root / 'catalog.db'}#file://{root / 'warehouse'}"


def _replicate(
    master: str,
    source: Path,
    protocol: str,
    target: str,
    root: Path,
    *extra: str,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``ticdc-spark replicate --master`` in a process of its own (a process runs one Spark
    driver: the tests' is local)."""
    options = [a for k, v in PROTOCOLS[protocol].items() for a in ("--option", f"{k}={v}")]
    command = [
        *(sys.executable, "-m", "ticdc_spark.cli", "replicate", "--master", master),
        *("--engine", "spark", "--source", str(source), "--protocol", protocol),
        *("--target", target, "--checkpoint", str(root / "checkpoint"), "--quiet"),
        *("--source-option", "maxOffsetsPerTrigger=60", *options, *extra),
    ]
    environment = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", **(env or {})}
    return subprocess.run(
        command, env=environment, capture_output=True, text=True, timeout=900, check=False
    )


@pytest.mark.parametrize(
    ("protocol", "kind"),
    [("canal-json", "delta"), ("open-protocol", "iceberg")],
)
def test_replicate_on_the_cluster_gives_the_expected_tables(
    spark_cluster: SparkCluster,
    spark,  # type: ignore[no-untyped-def]
    captures: Path,
    tmp_path: Path,
    protocol: str,
    kind: str,
) -> None:
    target = _target(kind, tmp_path)
    before = set(spark_cluster.applications())
    settings = [
        a for k, v in spark_cluster.settings().items() for a in ("--spark-conf", f"{k}={v}")
    ]
    done = _replicate(
        spark_cluster.master, captures / protocol / "capture", protocol, target, tmp_path, *settings
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert "batches, " in done.stderr  # (the summary: more than one micro-batch ran)
    (app,) = set(spark_cluster.applications()) - before
    # the work ran in both workers' executors, not in the driver
    assert all(tasks > 0 for tasks in spark_cluster.finished_tasks(app)), (
        spark_cluster.finished_tasks(app)
    )
    reports = verify_sink(
        make_sink(target, engine="spark", spark=spark), captures / protocol / "expected"
    )
    assert len(reports) == 2 and all(r.ok for r in reports), [r.summary() for r in reports]


def test_a_master_url_spark_cannot_use_is_one_line(tmp_path: Path, captures: Path) -> None:
    source = captures / "canal-json" / "capture"
    done = _replicate("127.0.0.1:7077", source, "canal-json", _target("delta", tmp_path), tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "ticdc-spark replicate: --master '127.0.0.1:7077': use spark://HOST:PORT (a standalone "
        "cluster's master, HOST:PORT,HOST:PORT with standby masters) or local[N]"
    ]


def test_a_master_nobody_answers_at_is_one_line(tmp_path: Path, captures: Path) -> None:
    from kafka_broker import free_port

    master = f"spark://127.0.0.1:{free_port()}"
    source = captures / "canal-json" / "capture"
    done = _replicate(master, source, "canal-json", _target("delta", tmp_path), tmp_path)
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"ticdc-spark replicate: no Spark master answers at {master} ")


def test_executors_without_ticdc_spark_are_refused_in_one_line(
    spark_cluster: SparkCluster, tmp_path: Path, captures: Path
) -> None:
    """The executors' Python is the driver's PYSPARK_PYTHON: one without ticdc_spark (here
    a bare virtual environment) is found before any micro-batch."""
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    source = captures / "canal-json" / "capture"
    target = _target("delta", tmp_path)
    python = {"PYSPARK_PYTHON": str(bare / "bin" / "python")}
    done = _replicate(spark_cluster.master, source, "canal-json", target, tmp_path, env=python)
    assert done.returncode == 1, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(
        f"ticdc-spark replicate: the executors of {spark_cluster.master} do not run ticdc-spark"
    ), done.stderr[-3000:]
    assert not (tmp_path / "lake").exists()


def test_stopping_the_cluster_kills_what_its_executors_left(tmp_path: Path) -> None:
    """A process left running in the cluster's directory (as a Python worker whose executor
    was killed) is killed by stop(), and the directory removed."""
    cluster = SparkCluster(workers=1)
    work = cluster.root / "worker-0" / "work" / "app-1" / "0"
    work.mkdir(parents=True)
    straggler = subprocess.Popen(["sleep", "600"], cwd=work, start_new_session=True)
    cluster.stop()
    assert straggler.wait(10) == -9
    assert not cluster.root.exists()
