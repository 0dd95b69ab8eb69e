#!/usr/bin/env bash
# Docker Compose v2 (the `docker compose` CLI plugin Harbor's Docker environment drives), built
# from its Go module with the host's Go, cached, and installed where the `docker` client looks
# for plugins. For machines whose package manager has no Compose v2 (Debian's docker.io) and
# that cannot download release binaries.
#
# Usage: scripts/compose.sh [--print-path] [--no-install]
#   --print-path   print the cached binary's path (after building it if needed) and nothing else
#   --no-install   build and cache only; leave the CLI plugin folder alone
# Environment:
#   COMPOSE_VERSION         module version to build (default below)
#   REPOGYM_COMPOSE_CACHE   where binaries are cached (default ~/.cache/repogym/compose);
#                           the binary is $REPOGYM_COMPOSE_CACHE/<version>/docker-compose
#   DOCKER_CONFIG           the docker client's config folder (default ~/.docker); the plugin
#                           goes to $DOCKER_CONFIG/cli-plugins/docker-compose
#
# `go install` refuses this module (its go.mod has exclude directives), so the module is
# downloaded with `go mod download` and built inside its own folder (about 3 minutes on 2
# cores the first time; the Go build cache makes a rebuild fast).
set -euo pipefail

VERSION="${COMPOSE_VERSION:-v2.40.3}"
MODULE="github.com/docker/compose/v2"
CACHE="${REPOGYM_COMPOSE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/repogym/compose}"
BIN="$CACHE/$VERSION/docker-compose"

print_path=0
install=1
for arg in "$@"; do
  case "$arg" in
    --print-path) print_path=1 ;;
    --no-install) install=0 ;;
    -h | --help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "compose.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done

say() { [ "$print_path" = 1 ] || echo "compose.sh: $*" >&2; }

if [ ! -x "$BIN" ]; then
  if ! command -v go >/dev/null 2>&1; then
    echo "compose.sh: building Compose $VERSION needs Go (apt-get install golang-go)" >&2
    exit 1
  fi
  say "building $MODULE@$VERSION with $(go version | cut -d' ' -f3) (a few minutes, once)"
  dir="$(GOFLAGS=-mod=mod go mod download -json "$MODULE@$VERSION" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
  if [ -z "$dir" ] || [ ! -d "$dir" ]; then
    echo "compose.sh: go mod download $MODULE@$VERSION gave no module folder" >&2
    exit 1
  fi
  mkdir -p "$CACHE/$VERSION"
  partial="$(mktemp "$CACHE/$VERSION/.docker-compose.XXXXXX")"
  trap 'rm -f "$partial"' EXIT
  # The module cache is read-only: build there, write the binary to the cache.
  (
    cd "$dir"
    CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath \
      -ldflags "-s -w -X $MODULE/internal.Version=$VERSION" -o "$partial" ./cmd
  )
  chmod 755 "$partial"
  mv -f "$partial" "$BIN"
  trap - EXIT
fi

if [ "$install" = 1 ]; then
  plugins="${DOCKER_CONFIG:-$HOME/.docker}/cli-plugins"
  mkdir -p "$plugins"
  if [ "$(readlink -f "$plugins/docker-compose" 2>/dev/null)" != "$(readlink -f "$BIN")" ]; then
    ln -sfn "$BIN" "$plugins/docker-compose"
    say "installed $plugins/docker-compose -> $BIN"
  fi
fi

if [ "$print_path" = 1 ]; then
  echo "$BIN"
else
  say "ready: $("$BIN" version 2>/dev/null || echo "$BIN")"
fi
