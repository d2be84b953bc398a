"""The lock on Ivy's cache: sessions that may download take it, one process at a time;
sessions whose jars are all retrieved already start without it."""

from __future__ import annotations

import fcntl
import threading
from pathlib import Path

import pytest

from ticdc_spark.spark.jars import (
    FEATURES,
    LOCK_NAME,
    ivy_dir,
    resolution_lock,
    spark_settings,
    start_lock,
)

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


def _retrieve(ivy: Path, packages: tuple[str, ...]) -> None:
    """Put ``packages``' jars where Spark's retrieve puts them (``group_artifact-version``)."""
    (ivy / "jars").mkdir(parents=True, exist_ok=True)
    for package in packages:
        group, artifact, version = package.split(":")
        (ivy / "jars" / f"{group}_{artifact}-{version}.jar").write_bytes(b"jar")


@pytest.fixture
def ivy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TICDC_SPARK_IVY", str(tmp_path / "ivy"))
    return tmp_path / "ivy"


def test_a_start_that_may_download_holds_the_lock(ivy: Path) -> None:
    assert ivy_dir() == ivy
    assert spark_settings(["iceberg"])["spark.jars.ivy"] == str(ivy)
    lock = ivy / LOCK_NAME
    with resolution_lock(PACKAGES):
        assert _held_elsewhere(lock)
    assert not _held_elsewhere(lock)


def test_one_jar_missing_is_enough_to_take_the_lock(ivy: Path) -> None:
    _retrieve(ivy, PACKAGES[:1])
    with resolution_lock(PACKAGES):
        assert _held_elsewhere(ivy / LOCK_NAME)


def test_a_start_from_a_warm_cache_takes_no_lock(ivy: Path) -> None:
    _retrieve(ivy, PACKAGES)
    with resolution_lock(PACKAGES):
        assert not (ivy / LOCK_NAME).exists()


def test_a_package_this_cannot_read_takes_the_lock(ivy: Path) -> None:
    _retrieve(ivy, ("g:a:1",))
    with resolution_lock(["g:a:1", "g/a"]):
        assert _held_elsewhere(ivy / LOCK_NAME)
    with resolution_lock([" g/a:1"]):  # (Spark's other spelling, read)
        assert not _held_elsewhere(ivy / LOCK_NAME)


def test_a_session_start_locks_the_ivy_directory_it_names_and_only_with_packages(
    ivy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with start_lock({"spark.master": "local[2]"}):
        assert not (ivy / LOCK_NAME).exists()  # (no packages: nothing to download)
    elsewhere = tmp_path / "elsewhere"
    settings = {"spark.jars.packages": ",".join(PACKAGES), "spark.jars.ivy": str(elsewhere)}
    with start_lock(settings):
        assert _held_elsewhere(elsewhere / LOCK_NAME)
        assert not (ivy / LOCK_NAME).exists()
    assert capsys.readouterr().err == ""  # (nobody else held it: no waiting said)


def test_a_start_that_must_wait_says_so_then_starts(
    ivy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ivy.mkdir(parents=True)
    started = threading.Event()

    def start() -> None:
        with resolution_lock(PACKAGES):
            started.set()

    with open(ivy / LOCK_NAME, "w") as other:
        fcntl.flock(other, fcntl.LOCK_EX)  # (another process downloading)
        waiting = threading.Thread(target=start)
        waiting.start()
        assert not started.wait(1.0)
    assert started.wait(30)
    waiting.join()
    err = capsys.readouterr().err
    assert f"waiting for {ivy / LOCK_NAME}: another process is downloading" in err
