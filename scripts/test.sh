#!/usr/bin/env bash
# Installs what is needed, then runs the linters and the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh --browser
echo "== ruff =="
.venv/bin/ruff check src tests bench examples
echo "== mypy (strict on falkirk.time and falkirk.recovery) =="
.venv/bin/mypy
echo "== docs (mkdocs build --strict: links, anchors, API reference) =="
site=$(mktemp -d)
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --quiet --site-dir "$site"
rm -rf "$site"
echo "== pytest =="
# Two workers (pytest-xdist): most tests wait on JVM starts and subprocesses; each
# worker has its own Spark session, Redis and PostgreSQL (free ports, temporary dirs).
.venv/bin/python -m pytest -q -n 2 --dist worksteal --durations=30 "$@"
