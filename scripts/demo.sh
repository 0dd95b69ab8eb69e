#!/usr/bin/env bash
# The main job on the embedded example: set up, then validate the example tasks.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
.venv/bin/repogym validate examples/tasks --deep
