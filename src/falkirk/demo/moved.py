"""Old import paths of what moved to :mod:`falkirk.testing` (issue 31).

The demos' independent references, input generators and the output checker used to
live next to the pipelines (``falkirk.demo.orders.expected``,
``falkirk.demo.clickstream.write_input``, ``falkirk.demo.verify.differences``, ...).
They now live in :mod:`falkirk.testing`, which the engine never imports. Scripts
that import them from the old place keep working for now, with a
:class:`DeprecationWarning` that names the new place; nothing in Falkirk itself uses
these paths (the demos never import :mod:`falkirk.testing`: the forwarding happens
only when such a name is asked for).
"""

from __future__ import annotations

import importlib
import warnings


def forward(module: str, name: str, target: str, names: frozenset[str]) -> object:
    """``name`` of ``target`` if it is one of ``names`` that moved out of ``module``
    (with a DeprecationWarning); otherwise the AttributeError Python would raise."""
    if name not in names:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    warnings.warn(f"{module}.{name} moved to {target}.{name}; import it from there", DeprecationWarning, stacklevel=3)
    return getattr(importlib.import_module(target), name)
