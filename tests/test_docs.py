"""The README and docs/*.md as a clone has them: every relative link leads to a file of the
checkout (never to the shared folder beside the one it was written in), and no heading
stands empty above the next one (docs/protocols.md had an empty "Options shared by all"
above Avro, its text under another heading further down)."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
_CODE_BLOCK = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_relative_links_lead_into_the_checkout(doc: Path) -> None:
    text = doc.read_text()
    assert "../shared" not in text, "a clone has no shared folder: tests/fixtures/ or a URL"
    for target in _LINK.findall(text):
        if not re.match(r"[a-z]+:", target):
            path = (doc.parent / target).resolve()
            assert path.is_relative_to(ROOT) and path.exists(), f"{doc.name}: {target}"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_no_heading_is_left_empty(doc: Path) -> None:
    lines = [line for line in _CODE_BLOCK.sub("", doc.read_text()).splitlines() if line.strip()]
    for line, after in itertools.pairwise(lines):
        if line.startswith("#") and after.startswith("#"):
            deeper = len(after) - len(after.lstrip("#")) > len(line) - len(line.lstrip("#"))
            assert deeper, f"{doc.name}: {line!r} has nothing under it before {after!r}"
