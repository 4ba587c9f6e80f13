"""The layering docs/core.md's Layout section promises: packages import only from
layers below their own, and, checked on fresh interpreters (this test process has
imported everything already), the logical times, the recovery solver and the control
plane never load Spark, and building an engine never loads the dashboard's web server
unless a dashboard is asked for."""

from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import falkirk

SOURCE = Path(falkirk.__file__).parent

#: The layers, lowest first: a package may import from its own layer and those below.
LAYERS = [
    {"exceptions", "redact"},
    {"time"},
    {"recovery"},
    {"storage"},
    {"graph"},
    {"spark"},
    {"control"},
    {"operators", "io"},
    {"observe"},
    {"upgrades"},  # savepoints and what an upgrade may change: execution and runtime use them
    {"execution"},
    {"coordinator"},
    {"runtime"},
    {"ops"},
    {"demo"},  # the demo pipelines: nothing below imports them
    {"testing"},  # their references, generators, test services: imports demo, never the reverse
    {"warmup", "crash_demo", "services"},  # services: the old path of testing.services
    {"cli"},
]


def loaded_after(statement: str, modules: list[str]) -> list[str]:
    """Which of ``modules`` a fresh interpreter has loaded after ``statement``."""
    probe = f"import sys\n{statement}\nprint(','.join(m for m in {modules!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    return [m for m in done.stdout.strip().split(",") if m]


def imports_of(path: Path) -> set[str]:
    """The falkirk packages (first component under ``falkirk.``) that ``path`` imports."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in getattr(node, "names", [])] if isinstance(node, ast.Import) else []
        found |= {n.split(".")[1] for n in names if n.startswith("falkirk.")}
    return found


def layer_of(package: str) -> int:
    return next(i for i, layer in enumerate(LAYERS) if package in layer)


def test_no_package_imports_from_a_layer_above_its_own() -> None:
    upward = []
    for path in sorted(SOURCE.rglob("*.py")):
        relative = path.relative_to(SOURCE)
        package = relative.parts[0].removesuffix(".py")
        if package == "__init__":
            continue
        upward += [f"{relative} imports falkirk.{t}" for t in imports_of(path) if layer_of(t) > layer_of(package)]
    assert upward == []


def test_the_layer_check_sees_lazy_imports() -> None:
    # falkirk demo's command imports the references, and Spark inside main(): a probe that can fail
    assert {"testing", "spark"} <= imports_of(SOURCE / "crash_demo.py")
    assert layer_of("demo") > layer_of("ops") and layer_of("testing") > layer_of("demo")


def test_every_package_has_a_layer() -> None:
    packages = {p.name.removesuffix(".py") for p in SOURCE.iterdir() if (p.suffix == ".py" or (p / "__init__.py").exists())}
    assert packages - {"__init__"} <= set().union(*LAYERS)


@pytest.mark.parametrize("package", ["falkirk.time", "falkirk.recovery", "falkirk.control"])
def test_the_core_never_loads_spark(package: str) -> None:
    modules = [package] + [m.name for m in pkgutil.walk_packages([str(SOURCE / package.split(".")[1])], prefix=f"{package}.")]
    assert len(modules) > 2
    assert loaded_after("\n".join(f"import {m}" for m in modules), ["pyspark", "py4j"]) == []


def test_the_engine_loads_the_web_server_only_for_a_dashboard() -> None:
    assert loaded_after("from falkirk.runtime import Engine", ["uvicorn", "starlette", "falkirk.observe.dashboard"]) == []
    assert loaded_after("import falkirk.observe.dashboard", ["uvicorn"]) == ["uvicorn"]  # a probe that can fail
