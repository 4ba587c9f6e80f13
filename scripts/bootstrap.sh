#!/usr/bin/env bash
# Installs everything Falkirk needs on a fresh Debian machine into ./.venv.
# Idempotent: re-running it only checks. --browser also installs Debian's Chromium
# and ChromeDriver, for the dashboard's browser test (scripts/test.sh asks for them).
set -euo pipefail
cd "$(dirname "$0")/.."
browser=0
[ "${1:-}" = "--browser" ] && browser=1

need_apt=()
if ! command -v java >/dev/null 2>&1 || ! java -version 2>&1 | grep -qE 'version "(1[7-9]|2[0-9])'; then
  need_apt+=(openjdk-17-jre-headless)   # Spark's JVM (the engine); the pure core does not need it
fi
# javac builds the chained-declustering placement of replicated blocks on a cluster
# (falkirk.spark.placement; without it Spark places copies at random).
if ! command -v javac >/dev/null 2>&1; then
  need_apt+=(openjdk-17-jdk-headless)
fi
# Redis and PostgreSQL servers for the examples that read and write them and for the
# tests (started by the tests themselves on 127.0.0.1, data in a temporary directory).
if ! command -v redis-server >/dev/null 2>&1; then
  need_apt+=(redis-server)
fi
if ! command -v initdb >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  need_apt+=(postgresql)
fi
# Graphviz draws the dataflow on the live dashboard (Engine(ui=...)).
if ! command -v dot >/dev/null 2>&1; then
  need_apt+=(graphviz)
fi
if [ "$browser" = 1 ] && { ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; }; then
  need_apt+=(chromium chromium-driver)
fi
if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "bootstrap: Python >= 3.11 is required, found $(python3 --version 2>&1)" >&2
  exit 1
fi
if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
  need_apt+=(python3-venv)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "bootstrap: installing ${need_apt[*]} from Debian packages"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  # (a container without an init system refuses to start the packages' services:
  # that is fine, the tests start their own servers)
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
# Every package from the hashed lock (requirements/lock.txt: the test and bench
# environment, each file's SHA-256 checked), pip and setuptools first (the versions
# ensurepip seeds are old: setuptools 65.5 has CVE-2024-6345 and CVE-2025-47273);
# then Falkirk itself, without resolving anything more. scripts/lock.sh remakes the
# lock when a pin in pyproject.toml moves; scripts/audit.sh audits it.
pip=(.venv/bin/python -m pip install -q --disable-pip-version-check)
"${pip[@]}" --require-hashes -r requirements/tools.txt
"${pip[@]}" --require-hashes -r requirements/lock.txt
"${pip[@]}" --no-deps --no-build-isolation -e .
# A class-data sharing archive for the driver JVM (once; about a minute): Spark sessions start
# ~3 s faster, and so does recovery. Falkirk works without it.
.venv/bin/falkirk warm-up
echo "bootstrap: ready ($(.venv/bin/python --version), falkirk $(.venv/bin/python -c 'import falkirk; print(falkirk.__version__)'))"
