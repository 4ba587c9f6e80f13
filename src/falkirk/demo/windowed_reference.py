"""Moved to :mod:`falkirk.testing.windowed` (issue 31); this old path forwards to it with a
DeprecationWarning (see :mod:`falkirk.demo.moved`)."""

from __future__ import annotations

from falkirk.demo.moved import forward

_MOVED = frozenset(['Expected', 'Windows', 'parse', 'reference', 'windows_of'])


def __getattr__(name: str) -> object:
    return forward(__name__, name, "falkirk.testing.windowed", _MOVED)
