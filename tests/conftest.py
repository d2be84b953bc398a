"""Shared fixtures: where the specification and golden files live."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import settings

# No time limit per example: a timed assertion fails on a loaded machine (CI's two cores,
# the sanitizer job's instrumented build), not on a defect.
settings.register_profile("default", deadline=None)
settings.load_profile("default")

ROOT = Path(__file__).resolve().parents[1]


def _shared() -> Path:
    """The project's shared folder (specification, golden files): TICDC_SPARK_SHARED, else
    beside this checkout, else beside the checkout it was cloned from (a local clone made
    elsewhere, e.g. under /tmp to try a clean install)."""
    if "TICDC_SPARK_SHARED" in os.environ:
        return Path(os.environ["TICDC_SPARK_SHARED"])
    beside = ROOT.parent / "shared"
    if beside.is_dir():
        return beside
    origin = subprocess.run(
        ["git", "-C", str(ROOT), "config", "--get", "remote.origin.url"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    if origin and Path(origin).is_dir() and (Path(origin).resolve().parent / "shared").is_dir():
        return Path(origin).resolve().parent / "shared"
    return beside


SHARED = _shared()
SPEC = SHARED / "spec"
GOLDEN = SHARED / "golden"

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


@pytest.fixture(scope="session")
def spec_dir() -> Path:
    if not SPEC.is_dir():
        raise RuntimeError(f"the specification is missing: {SPEC} (set TICDC_SPARK_SHARED)")
    return SPEC


@pytest.fixture(scope="session")
def golden_dir() -> Path:
    if not GOLDEN.is_dir():
        raise RuntimeError(f"the golden files are missing: {GOLDEN} (set TICDC_SPARK_SHARED)")
    return GOLDEN


@pytest.fixture(scope="session")
def spark():  # type: ignore[no-untyped-def]
    """One local SparkSession for the whole test run (starting one takes 6-12 s)."""
    from ticdc_spark.spark.session import local_session

    session = local_session("ticdc-spark-tests")
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
