#!/usr/bin/env bash
set -euo pipefail
cd /workspace
patch -p1 --forward --no-backup-if-mismatch < /solution/patch.diff
