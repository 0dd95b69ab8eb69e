#!/usr/bin/env bash
# The whole test suite: set up (system packages, venv, test extras), lint, then pytest.
# Extra arguments go to pytest, e.g. scripts/test.sh -k validate
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh test
.venv/bin/ruff check src tests benchmarks
.venv/bin/ruff format --check src tests benchmarks
.venv/bin/mypy src
# As root, setup installed a Docker engine: its tests must run, never skip.
if [ "$(id -u)" = 0 ]; then export REPOGYM_REQUIRE_ENGINE=1; fi
.venv/bin/python -m pytest --durations=25 "$@"
