"""Moved to :mod:`falkirk.testing.verify` (issue 31); this old path forwards to it with a
DeprecationWarning (see :mod:`falkirk.demo.moved`)."""

from __future__ import annotations

from falkirk.demo.moved import forward

_MOVED = frozenset(['differences'])


def __getattr__(name: str) -> object:
    return forward(__name__, name, "falkirk.testing.verify", _MOVED)
