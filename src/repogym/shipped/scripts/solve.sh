#!/usr/bin/env bash
# Oracle: apply the gold patch to the working copy.
set -euo pipefail
cd "${REPOGYM_WORKDIR:-/workspace}"
if command -v git >/dev/null 2>&1; then
  git apply --whitespace=nowarn /solution/patch.diff
elif command -v patch >/dev/null 2>&1; then
  patch -p1 --forward --no-backup-if-mismatch < /solution/patch.diff
else
  python3 /solution/apply_patch.py /solution/patch.diff
fi
