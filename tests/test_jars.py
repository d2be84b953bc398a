"""The lock on Ivy's cache: sessions that may download take it, one process at a time;
sessions whose jars are all retrieved already start without it."""

from __future__ import annotations

import fcntl
from pathlib import Path

import pytest

from ticdc_spark.spark.jars import FEATURES, ivy_dir, resolution_lock, spark_settings

PACKAGES = FEATURES["iceberg"]


def _held_elsewhere(lock: Path) -> bool:
    """Whether another open file description holds ``lock`` (flock is per description)."""
    with open(lock, "w") as other:
        try:
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(other, fcntl.LOCK_UN)
        return False


@pytest.fixture
def ivy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TICDC_SPARK_IVY", str(tmp_path / "ivy"))
    return tmp_path / "ivy"


def test_a_start_that_may_download_holds_the_lock(ivy: Path) -> None:
    assert ivy_dir() == ivy
    assert spark_settings(["iceberg"])["spark.jars.ivy"] == str(ivy)
    lock = ivy / "ticdc-spark-resolution.lock"
    with resolution_lock(PACKAGES):
        assert _held_elsewhere(lock)
    assert not _held_elsewhere(lock)


def test_one_jar_missing_is_enough_to_take_the_lock(ivy: Path) -> None:
    (ivy / "jars").mkdir(parents=True)
    group, artifact, version = PACKAGES[0].split(":")
    (ivy / "jars" / f"{group}_{artifact}-{version}.jar").write_bytes(b"jar")
    with resolution_lock(PACKAGES):
        assert _held_elsewhere(ivy / "ticdc-spark-resolution.lock")


def test_a_start_from_a_warm_cache_takes_no_lock(ivy: Path) -> None:
    (ivy / "jars").mkdir(parents=True)
    for package in PACKAGES:
        group, artifact, version = package.split(":")
        (ivy / "jars" / f"{group}_{artifact}-{version}.jar").write_bytes(b"jar")
    lock = ivy / "ticdc-spark-resolution.lock"
    with resolution_lock(PACKAGES):
        assert not lock.exists() or not _held_elsewhere(lock)
