"""Shared fixtures: the specification examples and golden files (``tests/fixtures/``), and
the Spark session, Spark cluster and Kafka broker the integration tests share."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

# No time limit per example: a timed assertion fails on a loaded machine (CI's two cores,
# the sanitizer job's instrumented build), not on a defect.
settings.register_profile("default", deadline=None)
settings.load_profile("default")

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def _fixtures() -> Path:
    """Where the golden files and specification examples are: ``tests/fixtures`` (copies of
    the project's shared folder, see ``tests/fixtures/PROVENANCE.md``), or
    ``TICDC_SPARK_SHARED`` (a shared folder with ``golden/`` and ``spec/``) to test against
    another copy."""
    override = os.environ.get("TICDC_SPARK_SHARED")
    return Path(override) if override else FIXTURES


SHARED = _fixtures()
SPEC = SHARED / "spec"
GOLDEN = SHARED / "golden"

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

# The modules that take minutes (their kill chains, clusters and brokers), longest first, run
# before the rest: pytest-xdist hands each worker whole modules (``--dist loadfile``: a
# module's fixtures start once) in collection order (``--no-loadscope-reorder``), and a long
# module handed out last would leave one worker running alone at the end.
LONG_MODULES = (
    "test_restart.py",
    "test_pipeline.py",
    "test_cluster.py",
    "test_kafka_faults.py",
    "test_storage_outage.py",
    "test_planning_executors.py",
    "test_checkpoint_s3.py",
    "test_kafka_fidelity.py",
    "test_pipeline_s3.py",
    "test_changelog_tables.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: number for number, name in enumerate(LONG_MODULES)}
    # (a stable sort: the other modules keep their order)
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


@pytest.fixture(scope="session")
def spec_dir() -> Path:
    if not SPEC.is_dir():
        raise RuntimeError(f"the specification is missing: {SPEC} (TICDC_SPARK_SHARED?)")
    return SPEC


@pytest.fixture(scope="session")
def golden_dir() -> Path:
    if not GOLDEN.is_dir():
        raise RuntimeError(f"the golden files are missing: {GOLDEN} (TICDC_SPARK_SHARED?)")
    return GOLDEN


@pytest.fixture(scope="session")
def spark():  # type: ignore[no-untyped-def]
    """One local SparkSession for the whole test run (starting one takes 6-12 s), with
    Spark's own Kafka source and Hadoop's S3A connector (their jars resolved from Maven
    Central once per machine; S3A is pointed at a server by :func:`spark_s3`)."""
    from ticdc_spark.spark.session import local_session

    # (Spark's Kafka source; Delta's and Iceberg's Spark integrations: the spark engine)
    session = local_session("ticdc-spark-tests", features=("kafka", "s3", "delta", "iceberg"))
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(autouse=True)
def _spark_active_again(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """After a test that used the shared session, it is the main thread's active session
    again (a spark-engine sink used from the test's thread made its own active)."""
    yield
    if "spark" in request.fixturenames:
        from ticdc_spark.spark.pipeline import activate

        activate(request.getfixturevalue("spark"))


@pytest.fixture(scope="session")
def spark_cluster():  # type: ignore[no-untyped-def]
    """A standalone Spark cluster of two workers, one core each (tests/spark_cluster.py),
    for the whole test run, started on first use: ``replicate --master`` runs on it."""
    from spark_cluster import SparkCluster

    cluster = SparkCluster(workers=2).start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def kafka_cluster():  # type: ignore[no-untyped-def]
    """One Apache Kafka node (KRaft) for the whole test run, with PLAINTEXT, SASL and TLS
    listeners (tests/kafka_broker.py: jars from Maven Central, cached per machine)."""
    from kafka_broker import KafkaCluster

    cluster = KafkaCluster(1)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def kafka_broker(kafka_cluster) -> str:  # type: ignore[no-untyped-def]
    """The PLAINTEXT bootstrap address of :func:`kafka_cluster`."""
    return str(kafka_cluster.bootstrap)


@pytest.fixture(scope="session")
def kafka_cluster3():  # type: ignore[no-untyped-def]
    """Three Kafka nodes (replicas, leader changes, broker failures), started on first use."""
    from kafka_broker import KafkaCluster

    cluster = KafkaCluster(3)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def s3_server():  # type: ignore[no-untyped-def]
    """A SeaweedFS S3 server on free loopback ports, with one identity (signed requests),
    shared by the session: tests use their own prefix of its bucket (``s3_root``)."""
    from s3_server import SeaweedFS

    server = SeaweedFS()
    server.start()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def s3_options(s3_server):  # type: ignore[no-untyped-def]
    """StorageOptions pointing at the session's SeaweedFS (as its environment would)."""
    from ticdc_spark.storage import StorageOptions

    return StorageOptions.from_environment(environ=s3_server.environment())


@pytest.fixture
def spark_s3(spark, s3_options):  # type: ignore[no-untyped-def]
    """The shared session with S3A pointed at the session's SeaweedFS, as
    ``replicate --checkpoint s3://...`` configures its own session
    (``StorageOptions.spark_s3a()``): set in the session's runtime configuration, which
    the Hadoop configuration of each query is made from."""
    for key, value in s3_options.spark_s3a().items():
        spark.conf.set(key.removeprefix("spark.hadoop."), value)
    return spark


@pytest.fixture
def s3_root(s3_server, request):  # type: ignore[no-untyped-def]
    """A fresh ``s3://lake/<test>-<random>`` prefix for one test."""
    import re
    import uuid

    from s3_server import BUCKET

    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", request.node.name)[:60]
    return f"s3://{BUCKET}/{name}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(params=["local", "s3"])
def store_root(request, tmp_path):  # type: ignore[no-untyped-def]
    """A store's root and its StorageOptions: a local directory, then a prefix on SeaweedFS."""
    from ticdc_spark.storage import StorageOptions

    if request.param == "local":
        return str(tmp_path / "store"), StorageOptions({})
    return request.getfixturevalue("s3_root"), request.getfixturevalue("s3_options")
