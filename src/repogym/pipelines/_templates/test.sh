#!/usr/bin/env bash
# Entry point of a repogym runtime task's verifier (verifier.py does the work).
#
# Before any Python runs, check what was recorded at build time (/usr/lib/repogym/record.txt):
# the record's MAC (its key lives only here, in the hidden tests) and the sha256 of every
# recorded interpreter, standard-library, test-runner and plugin file. A mismatch pays no
# reward. Then run verifier.py with the recorded interpreter, isolated (-I -S: no site
# packages, no .pth files, no environment variables, no current folder on sys.path).
#
# What this cannot stop when the verifier runs in the container the agent used as root (Harbor,
# OpenEnv's generic runner): an agent that replaces bash, sha256sum, the dynamic loader or the
# kernel-facing libraries can fake every check made from inside. repogym's own runners verify
# these tasks in a clean room instead (docs/reward-contract.md).
set -u
LOGS=${REPOGYM_VERIFIER_LOGS:-/logs/verifier}
REC=/usr/lib/repogym/record.txt
HERE=$(cd "$(dirname "$0")" && pwd)

deny() {
  mkdir -p "$LOGS"
  printf '0\n' > "$LOGS/reward.txt"
  printf '{"tampered": true, "resolved": false, "reward": 0.0, "tamper": ["%s"]}\n' "$1" \
    > "$LOGS/reward-details.json"
  echo "verifier: tampering detected, reward 0: $1" >&2
  exit 0
}

PY=python3
CHECKED=
if [ -f "$HERE/integrity.key" ]; then
  [ -f "$REC" ] || deny "the integrity record ($REC) is missing"
  if command -v sha256sum >/dev/null 2>&1; then
    KEY=$(cat "$HERE/integrity.key")
    MAC=$({ printf '%s' "$KEY"; cat "$REC"; printf '%s' "$KEY"; } | sha256sum | cut -d' ' -f1)
    [ "$MAC" = "$(cat "${REC%.txt}.mac" 2>/dev/null)" ] ||
      deny "the integrity record was changed after the build"
    grep -v '^#' "$REC" | sha256sum -c --status 2>/dev/null ||
      deny "interpreter, standard library or test-runner files changed after the build"
    CHECKED=--sha256-checked
  fi
  if grep -qx '# nopreload' "$REC" && [ -s /etc/ld.so.preload ]; then
    deny "a loader preload list (/etc/ld.so.preload) appeared after the build"
  fi
  RECORDED=$(sed -n 's/^# python //p' "$REC" | head -n 1)
  [ -n "$RECORDED" ] && [ -x "$RECORDED" ] && PY=$RECORDED
fi
exec "$PY" -I -S "$HERE/verifier.py" ${CHECKED:-} "$@"
