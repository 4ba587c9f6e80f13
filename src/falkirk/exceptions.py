"""The root of every error Falkirk raises.

Catch :class:`FalkirkError` to handle any Falkirk failure; each package defines its
own subclasses in its ``exceptions`` module.
"""

from __future__ import annotations


class FalkirkError(Exception):
    """Base class of all Falkirk errors. Messages say what was seen, what was
    expected, and how to fix it."""
