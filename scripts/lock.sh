#!/usr/bin/env bash
# Remakes the hashed lock files from pyproject.toml (run after moving a pin there):
# requirements/lock.txt, every package of the test and bench environment with the
# SHA-256 of each of its files on PyPI, and requirements/tools.txt (pip, setuptools,
# wheel). Uses uv (installed into a throw-away environment). Versions already in the
# lock stay unless a pin moved.
set -euo pipefail
cd "$(dirname "$0")/.."
tools=$(mktemp -d)
trap 'rm -rf "$tools"' EXIT
python3 -m venv "$tools"
"$tools/bin/pip" install -q uv
uv=("$tools/bin/uv" pip compile --generate-hashes --python-version 3.11 --python-platform x86_64-manylinux_2_28 --no-header --index-url https://pypi.org/simple)
"${uv[@]}" pyproject.toml --extra dev --extra spark --extra services --extra bench --extra docs -o requirements/lock.txt
printf "pip\nsetuptools\nwheel\n" > "$tools/tools.in"
"${uv[@]}" "$tools/tools.in" -o requirements/tools.txt
sed -i "s|-r $tools/tools.in|scripts/bootstrap.sh|" requirements/tools.txt
echo "lock: requirements/lock.txt and requirements/tools.txt remade"
