"""The README's examples run and say what they claim."""

from __future__ import annotations

from pathlib import Path

from falkirk.time import EpochDomain, Frontier

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def python_block(containing: str) -> str:
    blocks = [b.split("```")[0] for b in README.split("```python")[1:]]
    return next(b for b in blocks if containing in b)


def test_python_example_gives_the_documented_rollback() -> None:
    code = python_block("falkirk.recovery")
    namespace: dict[str, object] = {}
    exec(compile(code, "README.md", "exec"), namespace)
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


def test_readme_opens_with_the_title_a_paragraph_and_the_quick_start() -> None:
    title, paragraph, rest = README.split("\n\n", 2)
    assert title == "# Falkirk"
    assert paragraph.startswith("Falkirk is a streaming dataflow engine for PySpark") and "#" not in paragraph
    assert rest.startswith("## Quick start\n")


def test_pipeline_example_runs(spark, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import pandas as pd

    monkeypatch.chdir(tmp_path)
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.csv").write_text("user,ts\nann,5\nbob,7\nann,9\nbad-row-without-comma\n")
    exec(compile(python_block("Engine(p"), "README.md", "exec"), {})
    out = pd.read_parquet(tmp_path / "out").sort_values("user")
    assert out[["user", "n", "last"]].values.tolist() == [["ann", 2, 9], ["bob", 1, 7]]
    assert len(pd.read_parquet(tmp_path / "rejected")) == 1


def test_quick_start_has_exactly_two_commands() -> None:
    section = README.split("## Quick start")[1].split("```bash")[1].split("```")[0]
    commands = [line for line in section.strip().splitlines() if line.strip()]
    assert commands == [
        "bash scripts/bootstrap.sh && .venv/bin/falkirk demo",
        "bash scripts/test.sh",
    ]
