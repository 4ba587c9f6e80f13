"""Watching a running pipeline: its telemetry (figures and Prometheus metrics) and
the live dashboard that serves them. Nothing of the engine's epoch pipeline needs
this package: the engine imports the dashboard (and its web server) only when it is
given ``ui=``. This module imports nothing, so ``falkirk.observe.address`` checks a
``ui=`` value without loading the web server."""
