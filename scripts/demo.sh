#!/usr/bin/env bash
# The main job on the embedded example: set up, validate the example tasks, then prove them in
# the local sandbox (oracle scores 1, doing nothing scores 0, reruns agree).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
.venv/bin/repogym validate examples/tasks --deep
.venv/bin/repogym verify examples/tasks --no-write
