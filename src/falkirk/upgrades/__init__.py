"""Pipelines that change while they live: savepoints, upgrades and what they may change
(see :mod:`falkirk.upgrades.compatibility`)."""
