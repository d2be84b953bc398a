"""``ticdc-spark demo`` leaves nothing behind unless asked (issue 24 item 9: about 197 MB in
/tmp a run), and says where things are when it keeps them."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from ticdc_spark.cli import main
from ticdc_spark.testing import demo


@pytest.fixture
def workdirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The demo's temporary directories, made under ``tmp_path`` to be looked at."""
    made = tmp_path / "made"
    made.mkdir()

    def mkdtemp(prefix: str = "") -> str:
        (made / f"{prefix}1").mkdir()
        return str(made / f"{prefix}1")

    monkeypatch.setattr(tempfile, "mkdtemp", mkdtemp)
    return made


def test_the_demo_removes_its_temporary_directory(spark, workdirs: Path, capsys) -> None:
    code = main(["demo", "--rows", "120", "--tables", "2", "--ddl-every", "0"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "PASSED" in err and not list(workdirs.iterdir())
    assert f"removed the work directory {workdirs / 'ticdc-spark-demo-1'} (--keep keeps it)" in err


def test_keep_keeps_it_and_says_where_things_are(workdirs: Path, capsys) -> None:
    root = workdirs / "kept"
    (root / "lake").mkdir(parents=True)
    demo._leave(root, keep=True)
    assert (root / "lake").is_dir()
    assert f"kept {root}: tables in lake/, checkpoint in checkpoint/" in capsys.readouterr().err
