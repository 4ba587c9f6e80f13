#!/usr/bin/env bash
# Audits the locked environment (requirements/lock.txt and tools.txt) with pip-audit
# against the Python Packaging Advisory Database (PyPI's vulnerability service).
# Prints one line per known vulnerability and exits non-zero if there is one; the
# docs/how-to/security.md records the last result and its date.
set -euo pipefail
cd "$(dirname "$0")/.."
tools=$(mktemp -d)
trap 'rm -rf "$tools"' EXIT
python3 -m venv "$tools"
"$tools/bin/pip" install -q pip-audit==2.10.1  # pinned: its own dependencies resolve at install
for lock in requirements/lock.txt requirements/tools.txt; do
  echo "== pip-audit $lock ($(date -u +%Y-%m-%d)) =="
  "$tools/bin/pip-audit" --require-hashes --disable-pip --vulnerability-service pypi -r "$lock"
done
