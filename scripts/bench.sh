#!/usr/bin/env bash
# The benchmark harness (docs/benchmarks.md): installs what it needs, then runs
# bench/run.py with the given arguments (for example --quick, --runs 5).
#   - Falkirk's virtualenv (.venv, scripts/bootstrap.sh) plus matplotlib for plots;
#   - PyFlink in its own virtualenv (.venv-flink): it pins versions of pandas and
#     pyarrow that conflict with PySpark's.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".[bench]"
if [ ! -x .venv-flink/bin/python ]; then
    python3 -m venv .venv-flink
    .venv-flink/bin/python -m pip install -q --disable-pip-version-check "apache-flink==2.3.0"
fi
exec .venv/bin/python bench/run.py "$@"
