"""The layering the README's Layout section promises, checked on fresh interpreters
(this test process has imported everything already): the logical times and the
recovery solver never load Spark, and building an engine never loads the dashboard's
web server unless a dashboard is asked for."""

from __future__ import annotations

import subprocess
import sys

import pytest


def loaded_after(statement: str, modules: list[str]) -> list[str]:
    """Which of ``modules`` a fresh interpreter has loaded after ``statement``."""
    probe = f"import sys\n{statement}\nprint(','.join(m for m in {modules!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    return [m for m in done.stdout.strip().split(",") if m]


@pytest.mark.parametrize("package", ["falkirk.time", "falkirk.recovery"])
def test_the_core_never_loads_spark(package: str) -> None:
    assert loaded_after(f"import {package}", ["pyspark", "py4j"]) == []


def test_the_engine_loads_the_web_server_only_for_a_dashboard() -> None:
    assert loaded_after("from falkirk.runtime import Engine", ["uvicorn", "starlette", "falkirk.observe.dashboard"]) == []
    assert loaded_after("import falkirk.observe.dashboard", ["uvicorn"]) == ["uvicorn"]  # a probe that can fail
