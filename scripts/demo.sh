#!/usr/bin/env bash
# The main job on the embedded example: set up, write the example repository (a tiny pytest
# project with bug-fix history), mine it into tasks, then check and prove them in the local
# sandbox (oracle scores 1, doing nothing scores 0, reruns agree). Output goes to demo/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
rm -rf demo
.venv/bin/repogym example-repo demo/statkit
.venv/bin/repogym generate --repo demo/statkit --pipeline commit_runtime --out demo/dataset
.venv/bin/repogym validate demo/dataset --deep
.venv/bin/repogym verify demo/dataset
# The hand-written example tasks (one plain, one graded) pass the same gate.
.venv/bin/repogym validate examples/tasks --deep
.venv/bin/repogym verify examples/tasks --no-write
