#!/usr/bin/env bash
# The whole test suite: set up (system packages, venv, test extras), lint, then pytest.
# Extra arguments go to pytest, e.g. scripts/test.sh -k validate
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh test
.venv/bin/ruff check src tests benchmarks
.venv/bin/ruff format --check src tests benchmarks
.venv/bin/mypy src
# the typed records, the plugin registry and what ships into tasks are held to --strict
.venv/bin/mypy --strict --follow-imports=silent src/repogym/run/models.py \
  src/repogym/taskdir/provenance.py src/repogym/run/plan.py src/repogym/plugins.py \
  src/repogym/shipped/__init__.py src/repogym/shipped/testfiles.py src/repogym/shipped/js_lex.py \
  src/repogym/openenv_client src/repogym/__init__.py
# As root, setup installed a Docker engine: its tests must run, never skip.
# The stand-in base images are made first (cached; minutes the first time), outside any test's
# time limit.
if [ "$(id -u)" = 0 ]; then
  export REPOGYM_REQUIRE_ENGINE=1
  .venv/bin/python -m tests.engine
fi
.venv/bin/python -m pytest --durations=25 "$@"
