#!/usr/bin/env bash
# Set up everything repogym needs on a fresh Linux machine: system packages (as root, via
# apt-get), a virtual environment in .venv, and the package itself (editable, with EXTRAS).
# Usage: scripts/setup.sh [EXTRAS]     e.g. scripts/setup.sh test
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"

need_pkgs=()
command -v bwrap >/dev/null 2>&1 || need_pkgs+=(bubblewrap)
# User-mode networking of networked sandboxes (build steps, network_mode = "public").
command -v slirp4netns >/dev/null 2>&1 || need_pkgs+=(slirp4netns)
command -v git >/dev/null 2>&1 || need_pkgs+=(git)
command -v patch >/dev/null 2>&1 || need_pkgs+=(patch)
# The browser tests (test extras) drive Debian's chromium: installed when we can, else skipped.
if [[ ",$extras," == *",test,"* ]] && [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    need_pkgs+=(chromium)
  else
    echo "setup: no /usr/bin/chromium: the browser tests will be skipped" >&2
  fi
fi
# The image-pull tests (test extras) run a registry on 127.0.0.1 and build images from busybox.
if [[ ",$extras," == *",test,"* ]] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  [ -x /usr/bin/docker-registry ] || need_pkgs+=(docker-registry)
  [ -x /bin/busybox ] || need_pkgs+=(busybox-static)
  # The docker backend's tests start a real engine (offline) with stand-in base images made
  # from Debian's packages (tests/engine.py).
  command -v dockerd >/dev/null 2>&1 || need_pkgs+=(docker.io)
  command -v debootstrap >/dev/null 2>&1 || need_pkgs+=(debootstrap)
  command -v mkfs.btrfs >/dev/null 2>&1 || need_pkgs+=(btrfs-progs)
fi
if [ "${#need_pkgs[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing ${need_pkgs[*]} with apt-get" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
  else
    echo "setup: please install these system packages first: ${need_pkgs[*]}" >&2
    echo "       (Debian/Ubuntu: sudo apt-get install ${need_pkgs[*]})" >&2
    exit 1
  fi
fi

# A Python >= 3.11 to host the virtual environment.
py=""
for cand in "${PYTHON:-}" python3.13 python3.12 python3.11 python3; do
  [ -n "$cand" ] || continue
  if command -v "$cand" >/dev/null 2>&1 &&
     "$cand" -c 'import sys; raise SystemExit(sys.version_info < (3, 11))' 2>/dev/null; then
    py="$(command -v "$cand")"; break
  fi
done
if [ -z "$py" ]; then
  echo "setup: repogym needs Python >= 3.11 (set PYTHON=/path/to/python3.11)" >&2
  exit 1
fi

spec="."
[ -n "$extras" ] && spec=".[$extras]"
if command -v uv >/dev/null 2>&1 || "$py" -m pip install -q uv >/dev/null 2>&1; then
  uv_bin="$(command -v uv || echo "$py -m uv")"
  [ -x .venv/bin/python ] || $uv_bin venv -q -p "$py" .venv
  $uv_bin pip install -q -p .venv/bin/python -e "$spec"
else
  [ -x .venv/bin/python ] || "$py" -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e "$spec"
fi
echo "setup: ready ($(.venv/bin/repogym --version), $(.venv/bin/python --version))" >&2
