"""The README's examples run and say what they claim."""

from __future__ import annotations

from pathlib import Path

from falkirk.time import EpochDomain, Frontier

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_python_example_gives_the_documented_rollback() -> None:
    code = README.split("```python")[1].split("```")[0]
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


def test_quick_start_has_exactly_two_commands() -> None:
    section = README.split("## Quick start")[1].split("```bash")[1].split("```")[0]
    commands = [line for line in section.strip().splitlines() if line.strip()]
    assert commands == [
        "bash scripts/bootstrap.sh && .venv/bin/falkirk demo",
        "bash scripts/test.sh",
    ]
