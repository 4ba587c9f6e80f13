"""Every error Falkirk raises is a FalkirkError of the package that raises it: each
package's ``exceptions`` module derives from the root, and a broken invariant says it
is a bug in Falkirk instead of passing for a configuration error."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import pytest

import falkirk
from falkirk.exceptions import FalkirkError, InvariantError

SOURCE = Path(falkirk.__file__).parent
PACKAGES = sorted(p.parent.name for p in SOURCE.glob("*/exceptions.py"))


@pytest.mark.parametrize("package", PACKAGES)
def test_a_package_raises_its_own_falkirk_errors(package: str) -> None:
    module = importlib.import_module(f"falkirk.{package}.exceptions")
    errors = [c for _, c in inspect.getmembers(module, inspect.isclass) if c.__module__ == module.__name__]
    assert errors, f"falkirk.{package}.exceptions defines no error"
    assert all(issubclass(c, FalkirkError) for c in errors)


def test_the_engine_packages_have_their_exceptions() -> None:
    assert {"control", "execution", "coordinator", "operators", "runtime"} <= set(PACKAGES)


def test_no_internal_error_passes_for_a_configuration_error() -> None:
    offenders = [str(p.relative_to(SOURCE)) for p in SOURCE.rglob("*.py") if '"internal: ' in p.read_text() and p.parts[-2] in {"control", "execution", "coordinator", "operators", "runtime"}]
    assert offenders == []


def test_a_broken_invariant_says_it_is_a_bug() -> None:
    from falkirk.execution.exceptions import EpochInvariantError

    error = EpochInvariantError("epoch 3 has no log")
    assert isinstance(error, InvariantError)
    assert str(error).startswith("epoch 3 has no log (an invariant of Falkirk broke: please report")
