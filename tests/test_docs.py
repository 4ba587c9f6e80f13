"""The documentation runs and says what its code prints.

Every ```python block of a tutorial page (docs/tutorial/*.md) and of the README is
executed: the blocks of one page in order, in one namespace, in a temporary working
directory (the pages write their own input). What a block prints is compared with the
```text blocks that follow it on the page, and the tables it writes with the figures
the page states. The site itself is built with ``mkdocs build --strict`` (a few
seconds), as scripts/test.sh does.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from falkirk.time import EpochDomain, Frontier

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
TUTORIALS = sorted((DOCS / "tutorial").glob("*.md"))
#: A fenced block: its info string and its text.
FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)
#: What differs from run to run in a report line: times, and the row counts a run
#: makes only with a progress display (on a terminal).
VARYING = [(re.compile(r", [\d,]+ input rows"), ""), (re.compile(r" in [\d.]+ s"), ""), (re.compile(r" \([\d,.]+ rows/s\)"), "")]


@dataclass
class Block:
    info: str
    text: str


@dataclass
class Ran:
    """A page whose python blocks ran: its namespace, and per python block what it
    printed and the ```text blocks after it, up to the next python block (None:
    none)."""

    namespace: dict[str, object]
    printed: list[str]
    shown: list[str | None]


def blocks(path: Path) -> list[Block]:
    return blocks_of(path.read_text())


def blocks_of(text: str) -> list[Block]:
    return [Block(m.group(1).strip(), m.group(2)) for m in FENCE.finditer(text)]


def run_page(path: Path) -> Ran:
    """Run the python blocks of ``path`` in order in one namespace (in the current
    directory), capturing what each prints."""
    fences = blocks(path)
    namespace: dict[str, object] = {"__name__": "__main__"}
    printed: list[str] = []
    shown: list[str | None] = []
    for k, block in enumerate(fences):
        if block.info != "python":
            continue
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(block.text, str(path), "exec"), namespace)
        printed.append(out.getvalue())
        after = []
        for later in fences[k + 1 :]:
            if later.info == "python":
                break
            if later.info == "text":
                after.append(later.text)
        shown.append("".join(after) if after else None)
    return Ran(namespace, printed, shown)


def normal(line: str) -> str:
    for pattern, replacement in VARYING:
        line = pattern.sub(replacement, line)
    return line.rstrip()


def assert_prints_what_the_page_shows(ran: Ran, *, except_lines: str = "^$") -> None:
    """Every line a block printed is in a ```text block after it (times and row
    counts aside; lines matching ``except_lines`` are checked by the caller)."""
    for printed, shown in zip(ran.printed, ran.shown, strict=True):
        lines = [normal(line) for line in printed.splitlines() if not re.search(except_lines, line)]
        if shown is None:
            assert not lines, f"a block prints {lines} but the page shows no output after it"
            continue
        expected = {normal(line) for line in shown.splitlines()}
        missing = [line for line in lines if line not in expected]
        assert not missing, f"printed but not on the page: {missing}\nthe page shows:\n{shown}"


def test_tutorial_blocks_are_all_run() -> None:
    """No python block of a tutorial escapes the tests under another info string."""
    assert [p.name for p in TUTORIALS] == ["bad-data.md", "first-pipeline.md"]
    for page in TUTORIALS:
        infos = {b.info for b in blocks(page)}
        assert {i for i in infos if i.startswith("python")} == {"python"}, page
        assert infos <= {"python", "text", "bash"}, (page, infos)


def test_first_pipeline_tutorial(spark, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import pandas as pd

    monkeypatch.chdir(tmp_path)
    ran = run_page(DOCS / "tutorial" / "first-pipeline.md")
    assert_prints_what_the_page_shows(ran, except_lines="^recovered in ")
    assert "recovered in " in ran.printed[4] and "epochs 1-2 are computed again" in ran.printed[4]

    totals = pd.read_parquet(tmp_path / "out" / "totals").sort_values(["epoch", "user"])
    assert [(r.user, r.clicks, str(r.last), r.epoch) for r in totals.itertuples()] == [
        ("ann", 3, "2026-11-26 10:12:00", 1),
        ("bob", 2, "2026-11-26 10:25:00", 1),
        ("ann", 4, "2026-11-26 10:31:00", 2),
        ("bob", 3, "2026-11-26 10:41:00", 3),
        ("carol", 1, "2026-11-26 10:45:00", 3),
    ]
    windows = pd.read_parquet(tmp_path / "out" / "windows").sort_values(["epoch", "user", "window_start"])
    assert [(r.user, str(r.window_start)[11:16], str(r.window_end)[11:16], r.clicks, r.epoch) for r in windows.itertuples()] == [
        ("ann", "10:00", "10:10", 2, 2),
        ("ann", "10:10", "10:20", 1, 2),
        ("bob", "10:00", "10:10", 1, 2),
        ("ann", "10:30", "10:40", 1, 4),
        ("bob", "10:20", "10:30", 1, 4),
        ("bob", "10:40", "10:50", 1, 4),
        ("carol", "10:40", "10:50", 1, 4),
    ]


def test_bad_data_tutorial(spark, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import pandas as pd

    monkeypatch.chdir(tmp_path)
    ran = run_page(DOCS / "tutorial" / "bad-data.md")
    assert_prints_what_the_page_shows(ran, except_lines="failed on epoch")

    totals = pd.read_parquet(tmp_path / "out").sort_values(["epoch", "user"])
    assert totals[["user", "n", "total", "epoch"]].values.tolist() == [
        ["ann", 1, 10, 1],
        ["bob", 1, 25, 1],
        ["carol", 1, 7, 1],
        ["ann", 2, 13, 2],
        ["bob", 2, 30, 2],
    ]
    errors = pd.read_parquet(tmp_path / "errors").sort_values("epoch")
    assert errors[["user", "amount", "processor", "epoch"]].values.tolist() == [
        ["ann", "12.5x", "parse", 1],
        ["carol", "99999999999999999999", "parse", 2],
    ]
    assert all(reason.startswith("[CAST_INVALID_INPUT]") for reason in errors["reason"])
    stopped = ran.printed[-1]
    assert stopped.startswith("processor 'parse' failed on epoch 1's data: [CAST_INVALID_INPUT] The value '12.5x'")
    assert "(a map; input: payments: payments-001.csv; at " in stopped
    assert "(details: falkirk inspect " in stopped
    if (tmp_path / "out-3").exists():  # nothing of the failed epoch is visible
        assert pd.read_parquet(tmp_path / "out-3").empty


def test_readme_first_pipeline_runs_and_writes_its_tables(spark, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import pandas as pd

    readme = ROOT / "README.md"
    monkeypatch.chdir(tmp_path)
    ran = run_page(readme)
    assert len(ran.printed) == 2
    assert_prints_what_the_page_shows(ran)

    stated = markdown_tables(readme.read_text())
    totals = pd.read_parquet(tmp_path / "out" / "totals").sort_values(["epoch", "user"])
    assert [[r.user, str(r.clicks), str(r.last), str(r.epoch)] for r in totals.itertuples()] == sorted(
        stated["user | clicks | last | epoch"], key=lambda r: (r[3], r[0])
    )
    windows = pd.read_parquet(tmp_path / "out" / "windows").sort_values(["user", "window_start"])
    assert [[r.user, str(r.window_start), str(r.window_end), str(r.clicks), str(r.epoch)] for r in windows.itertuples()] == stated[
        "user | window_start | window_end | clicks | epoch"
    ]


def markdown_tables(text: str) -> dict[str, list[list[str]]]:
    """The Markdown tables of ``text``: header (cells joined by `` | ``) -> rows."""
    tables: dict[str, list[list[str]]] = {}
    for m in re.finditer(r"^\|(.+)\|\n\|[-|]+\|\n((?:\|.*\|\n)+)", text, re.MULTILINE):
        header = " | ".join(c.strip() for c in m.group(1).split("|"))
        tables[header] = [[c.strip() for c in row.strip().strip("|").split("|")] for row in m.group(2).splitlines()]
    return tables


def test_readme_is_short() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= 400


def test_core_solver_example_gives_the_documented_rollback() -> None:
    """docs/core.md's solver example (pure Python, no Spark)."""
    code = next(b.text for b in blocks(DOCS / "core.md") if b.info == "python" and "falkirk.recovery" in b.text)
    namespace: dict[str, object] = {}
    exec(compile(code, "docs/core.md", "exec"), namespace)
    plan = namespace["plan"]
    e = EpochDomain()
    assert plan.frontiers == {  # type: ignore[attr-defined]
        "src": Frontier.down(e, [4]),
        "agg": Frontier.down(e, [4]),
        "sink": Frontier.down(e, [3]),
    }
    assert plan.resend == {"e1": (), "e2": (4,)}  # type: ignore[attr-defined]
    assert "{'src': ↓{4}, 'agg': ↓{4}, 'sink': ↓{3}}" in code
    assert "{'e1': (), 'e2': (4,)}" in code


def test_core_scenario_example_parses_with_an_external_input() -> None:
    """docs/core.md's scenario in the `falkirk solve` format."""
    from falkirk.recovery import parse_scenario, solve

    text = (DOCS / "core.md").read_text().split("## `falkirk solve`")[1]
    block = next(b.text for b in blocks_of(text) if b.info == "json")
    scenario = parse_scenario(json.loads(block))
    assert "e0" not in scenario.topology.edges
    out = solve(scenario.topology, scenario.available).to_json()
    assert out["frontiers"] == {"p": [], "h": [], "s": []}


@pytest.mark.timeout(120)
def test_site_builds_strictly(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``mkdocs build --strict``: every link and anchor of the pages resolves, every
    ``::: name`` of the API reference is found, no docstring warns (a few seconds)."""
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert built.returncode == 0, built.stdout + built.stderr
    reference = (tmp_path / "site" / "reference" / "graph" / "index.html").read_text()
    assert ":class:" not in reference and ":meth:" not in reference  # the roles are rendered (docs/griffe_roles.py)
    assert 'href="#falkirk.graph.Stream.union"' in reference
