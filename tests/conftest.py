"""Shared fixtures: the specification examples and golden files (``tests/fixtures/``), and
the Spark session and Kafka broker the integration tests share."""

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
    """One local SparkSession for the whole test run (starting one takes 6-12 s)."""
    from ticdc_spark.spark.session import local_session

    # (Delta's and Iceberg's Spark integrations: the Spark-native sinks' tests)
    session = local_session("ticdc-spark-tests", features=("delta", "iceberg"))
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def kafka_broker():  # type: ignore[no-untyped-def]
    """A Tansu broker on a free loopback port: yields its bootstrap address."""
    from kafka_broker import Broker

    broker = Broker()
    try:
        yield broker.bootstrap
    finally:
        broker.stop()
