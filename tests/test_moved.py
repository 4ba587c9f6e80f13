"""Issue 31 moved the demos' references, generators and test services to
falkirk.testing; their old import paths still work, warn, and give the same objects,
while an unknown name is still an AttributeError."""

from __future__ import annotations

import importlib

import pytest

import falkirk.testing.clickstream
import falkirk.testing.orders
import falkirk.testing.services
import falkirk.testing.verify
import falkirk.testing.windowed

OLD = [
    ("falkirk.demo.orders", "expected", falkirk.testing.orders),
    ("falkirk.demo.orders", "batch_expected", falkirk.testing.orders),
    ("falkirk.demo.clickstream", "write_input", falkirk.testing.clickstream),
    ("falkirk.demo.verify", "differences", falkirk.testing.verify),
    ("falkirk.demo.windowed_reference", "reference", falkirk.testing.windowed),
]


@pytest.mark.parametrize(("module", "name", "new"), OLD)
def test_an_old_path_forwards_with_a_warning(module: str, name: str, new: object) -> None:
    with pytest.warns(DeprecationWarning, match=f"{module}.{name} moved to {new.__name__}.{name}"):  # type: ignore[attr-defined]
        found = getattr(importlib.import_module(module), name)
    assert found is getattr(new, name)


def test_an_unknown_name_is_still_missing() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'no_such'"):
        importlib.import_module("falkirk.demo.orders").no_such  # noqa: B018


def test_the_old_services_module_is_the_new_one() -> None:
    with pytest.warns(DeprecationWarning, match="falkirk.testing.services"):
        import falkirk.services

        importlib.reload(falkirk.services)
    assert falkirk.services.RedisServer is falkirk.testing.services.RedisServer


def test_the_pipelines_themselves_never_import_the_references() -> None:
    from tests.test_layout import loaded_after

    assert loaded_after("import falkirk.demo.orders, falkirk.demo.clickstream, falkirk.demo.windowed", ["falkirk.testing"]) == []
