"""The golden files and specification examples are part of the checkout (tests/fixtures),
byte for byte as PROVENANCE.md records them: a clone runs its whole suite alone."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def _recorded() -> dict[str, str]:
    text = (FIXTURES / "PROVENANCE.md").read_text(encoding="utf-8")
    return {m[2]: m[1] for m in re.finditer(r"^([0-9a-f]{64})  (\S+)$", text, re.MULTILINE)}


def test_the_fixtures_are_in_the_checkout(golden_dir: Path, spec_dir: Path) -> None:
    if "TICDC_SPARK_SHARED" in os.environ:
        pytest.skip("TICDC_SPARK_SHARED points the tests at another copy")
    assert golden_dir == FIXTURES / "golden"
    assert spec_dir == FIXTURES / "spec"


def test_every_fixture_is_recorded_with_its_checksum() -> None:
    recorded = _recorded()
    present = {
        str(p.relative_to(FIXTURES))
        for p in FIXTURES.rglob("*")
        if p.is_file() and p.name not in ("PROVENANCE.md", ".gitattributes")
    }
    assert present == set(recorded)
    for name, digest in recorded.items():
        assert hashlib.sha256((FIXTURES / name).read_bytes()).hexdigest() == digest, name
