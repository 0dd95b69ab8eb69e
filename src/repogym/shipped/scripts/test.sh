#!/usr/bin/env bash
# Entry point of a repogym runtime task's verifier (verifier.py does the work; for JavaScript
# runners in an image without Python, verifier.mjs: see below).
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
NODE=node
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
  # The recorded node (checked above): the record's "# node" line, else its file named node.
  RECORDED=$(sed -n -e 's/^# node //p' -e 's/^[0-9a-f]\{64\}  \(\/.*\/node\)$/\1/p' "$REC" | head -n 1)
  [ -n "$RECORDED" ] && [ -x "$RECORDED" ] && NODE=$RECORDED
fi
# JavaScript tasks also ship verifier.mjs (Node, no Python): it runs when the image has no
# Python, or when REPOGYM_VERIFIER=node asks for it (REPOGYM_VERIFIER=python: never).
if [ -f "$HERE/verifier.mjs" ]; then
  case "${REPOGYM_VERIFIER:-auto}" in
    node) USE_NODE=1 ;;
    python) USE_NODE= ;;
    *) command -v "$PY" >/dev/null 2>&1 && USE_NODE= || USE_NODE=1 ;;
  esac
  if [ -n "$USE_NODE" ]; then
    exec env -u NODE_OPTIONS -u NODE_PATH "$NODE" "$HERE/verifier.mjs" ${CHECKED:-} "$@"
  fi
fi
exec "$PY" -I -S "$HERE/verifier.py" ${CHECKED:-} "$@"
