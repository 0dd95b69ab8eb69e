#!/usr/bin/env bash
# Train with SkyRL's Harbor integration on repogym tasks.
#   bash run_repogym.sh /path/to/SkyRL OUT/tasks [more SkyRL overrides...]
# OUT is a folder `repogym generate` wrote. repogym must be installed in SkyRL's environment
# (uv run --with repogym ..., or pip install repogym into it).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
skyrl="$1"; tasks="$(cd "$2" && pwd)"; shift 2
cp "$here/harbor_trial_config.yaml" \
  "$skyrl/examples/train_integrations/harbor/harbor_trial_config/default.yaml"
cd "$skyrl"
uv run --isolated --extra fsdp --extra harbor --with repogym \
  -m examples.train_integrations.harbor.entrypoints.main_harbor \
  "data.train_data=['$tasks']" \
  "harbor_trial_config.trials_dir=$HOME/trials_repogym" \
  generator.step_wise_trajectories=true \
  "$@"
