"""The README says what a newcomer needs, in order, and points into the docs.

Its first pipeline runs in tests/test_docs.py (with the tutorials); the longer text
that was here is on the documentation site (docs/).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_readme_opens_with_the_title_a_paragraph_and_the_quick_start() -> None:
    title, paragraph, rest = README.split("\n\n", 2)
    assert title == "# Falkirk"
    assert paragraph.startswith("Falkirk is a streaming dataflow engine for PySpark") and "#" not in paragraph
    assert rest.startswith("## Quick start\n")


def test_readme_has_one_title_and_its_sections_in_order() -> None:
    headings = [line for line in README.splitlines() if line.startswith("#")]
    assert headings == ["# Falkirk", "## Quick start", "## Your first pipeline", "## Changing a running pipeline", "## Where to go next"]


def test_quick_start_has_exactly_two_commands() -> None:
    section = README.split("## Quick start")[1].split("```bash")[1].split("```")[0]
    commands = [line for line in section.strip().splitlines() if line.strip()]
    assert commands == [
        "bash scripts/bootstrap.sh && .venv/bin/falkirk demo",
        "bash scripts/test.sh",
    ]


def test_first_pipeline_has_all_its_imports_and_no_exchange() -> None:
    section = README.split("## Your first pipeline")[1].split("## Changing a running pipeline")[0]
    code = "\n".join(b.split("```")[0] for b in section.split("```python")[1:])
    for line in (
        "from pyspark.sql import functions as F",
        "from falkirk.graph import LazyCheckpoint, Pipeline, Tumbling",
        "from falkirk.io import FileSource, ParquetTableSink",
        "from falkirk.runtime import Engine",
    ):
        assert line in code
    assert ".exchange(" not in code
    assert "print(report)" in code
    for said in ("no\n  `exchange` before it", "progress=None", "progress=True", "progress=False", "Tumbling(600)"):
        assert said in section, said


def test_readme_links_resolve() -> None:
    """Relative links (to docs/*.md and files) name files that exist."""
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    local = [link for link in links if "://" not in link]
    assert any(link.startswith("docs/") for link in local)
    missing = [link for link in local if not (ROOT / link).exists()]
    assert not missing


def test_where_to_go_next_links_every_page_of_the_site() -> None:
    section = README.split("## Where to go next")[1]
    linked = set(re.findall(r"\]\((docs/[^)#]+\.md)", section))
    pages = {f"docs/{p.relative_to(ROOT / 'docs').as_posix()}" for p in (ROOT / "docs").rglob("*.md")}
    pages -= {p for p in pages if p.startswith("docs/reference/") and not p.endswith("index.md")}
    assert pages <= linked, pages - linked
