#!/usr/bin/env bash
# The main job on the embedded example: set up, write the example repository (a tiny pytest
# project with bug-fix history), mine it into tasks, then check and prove them in the local
# sandbox (oracle scores 1, doing nothing scores 0, reruns agree). Output goes to demo/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
rm -rf demo
.venv/bin/repogym example-repo demo/statkit
# Each task is proven while it is generated: oracle 1, nop 0, wrong solutions derived from the
# gold patch (mutants) must lose reward, and generic wrong ones (hollow bodies, constants, the
# input unchanged, an object equal to everything) must earn no more than doing nothing.
.venv/bin/repogym generate --repo demo/statkit --pipeline commit_runtime --out demo/dataset
.venv/bin/repogym validate demo/dataset --deep
# The hand-written example tasks (one plain, one graded) pass the same gate.
.venv/bin/repogym validate examples/tasks --deep
.venv/bin/repogym verify examples/tasks --no-write
echo "what next: browse the tasks, and run the oracle or your own model on them from their pages, with '.venv/bin/repogym explore demo/dataset' (then open http://127.0.0.1:8080/);"
echo "  try an agent with '.venv/bin/repogym run demo/dataset --agent \"command:<your agent>\"';"
echo "  mine your own repository with '.venv/bin/repogym generate --repo PATH --out DIR' (docs/cli.md)."
echo
# Last, the generated tasks again, each verified in the clean room it declares: the table shows
# the verification mode, the share of mutants its tests kill, the adversarial floor (the most
# any generic wrong solution earned: 0 is as much as doing nothing) and the canaries (copies of
# the tests that must fail, planted by the judge in every run).
.venv/bin/repogym verify demo/dataset --adversarial
