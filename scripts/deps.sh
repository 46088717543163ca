#!/usr/bin/env bash
# deps.sh — make this machine able to build, run and test filepath.
#
# Installs what is missing (Debian packages, the web UI's npm packages) and
# starts the Docker engine when it is not running. Idempotent: a second run
# does nothing. Needs root for apt-get and dockerd; without root it only says
# what is missing.
#
#   scripts/deps.sh            everything (run + test: Docker, FUSE, Chromium, docker-compose, npm)
#   scripts/deps.sh --run      only what `make run` needs
set -euo pipefail
cd "$(dirname "$0")/.."

mode=all
[ "${1:-}" = "--run" ] && mode=run

say() { printf 'deps: %s\n' "$*" >&2; }

need_pkgs=()
command -v dockerd >/dev/null || need_pkgs+=(docker.io)
command -v debootstrap >/dev/null || need_pkgs+=(debootstrap)
command -v fusermount3 >/dev/null || command -v fusermount >/dev/null || need_pkgs+=(fuse3)
command -v git >/dev/null || need_pkgs+=(git)
command -v gcc >/dev/null || need_pkgs+=(gcc)
if [ "$mode" = all ]; then
  [ -x /usr/lib/chromium/chromium ] || need_pkgs+=(chromium)
  # the store and vfs suites on PostgreSQL (make go-test-pg) start a cluster
  # of their own with initdb and postgres
  command -v initdb >/dev/null || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need_pkgs+=(postgresql-15)
  # internal/compose brings compose.yaml up with it (Debian's 1.29)
  command -v docker-compose >/dev/null || need_pkgs+=(docker-compose)
fi

if [ ${#need_pkgs[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    say "missing Debian packages: ${need_pkgs[*]} — install them with: sudo apt-get install -y ${need_pkgs[*]}"
    exit 1
  fi
  say "installing ${need_pkgs[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" ca-certificates >/dev/null
fi

for tool in go node npm; do
  command -v "$tool" >/dev/null || { say "$tool is required (Go 1.26+, Node 20+)"; exit 1; }
done

# The Docker engine: start it when nothing answers.
if ! docker info >/dev/null 2>&1; then
  if [ "$(id -u)" != 0 ]; then
    say "the Docker engine is not running and this is not root: start dockerd"
    exit 1
  fi
  say "starting dockerd"
  mkdir -p /var/log
  nohup dockerd >/var/log/filepath-dockerd.log 2>&1 &
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && break
    sleep 1
  done
  docker info >/dev/null 2>&1 || { say "dockerd did not start; see /var/log/filepath-dockerd.log"; exit 1; }
fi

# The web UI's packages, from its lock file.
if [ ! -d web/node_modules ] || [ web/package-lock.json -nt web/node_modules/.package-lock.json ]; then
  say "installing the web UI's npm packages"
  (cd web && npm ci --no-audit --no-fund --loglevel=error)
fi
