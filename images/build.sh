#!/usr/bin/env bash
# build.sh builds the local Docker images filepath needs, without a registry.
#
#   images/build.sh [base|testagent|byo-echo|shelley|pi|claude-code|codex|amp|cursor ...]
#                                                     (no argument: all; `make images` runs this)
#
#   filepath/testagent:latest  FROM scratch + the static test agent (adapters/testagent)
#   filepath/base:bookworm     a minimal Debian made with debootstrap + docker import
#                              (git, ca-certificates, jq); skipped when it exists
#   filepath/byo-echo:latest   the tutorial's reference BYO agent, FROM the base above
#   filepath/agent-shelley:latest, filepath/agent-pi:latest
#                              the native agents (adapters/native, static) FROM the base
#                              above, with bash, git and Go 1.23 installed from
#                              deb.debian.org (bookworm-backports) in the build
#   filepath/agent-claude-code:latest, filepath/agent-codex:latest, filepath/agent-amp:latest
#                              the CLI agents: the base + the CLI's native binary (fetched from
#                              the npm registry during the build, pinned with its sha512 in the
#                              image's package-lock.json) + filepath-cli-adapter (adapters/cli)
#   filepath/agent-cursor:latest  skipped unless FILEPATH_BUILD_CURSOR=1: Cursor ships its CLI
#                              only through https://cursor.com/install, which needs internet
#
# Environment:
#   FILEPATH_BASE         use this local image as BASE for byo-echo instead of building
#                         filepath/base:bookworm (e.g. debian:bookworm-slim where a registry works)
#   FILEPATH_CACHE_DIR    where the debootstrap tarball is cached (default ~/.cache/filepath)
#   DEBIAN_MIRROR         debootstrap mirror (default http://deb.debian.org/debian)
#   FILEPATH_BUILD_CURSOR=1  build filepath/agent-cursor too (needs cursor.com)
#   FILEPATH_BUILD_CA     CA bundle the CLI downloads trust during the build (default: this
#                         machine's, $SSL_CERT_FILE or /etc/ssl/certs/ca-certificates.crt)
#
# The CLI images need the npm registry and the Debian mirror during the build (no
# container registry); so do shelley's and pi's (Go from Debian).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cache=${FILEPATH_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/filepath}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
base_image=filepath/base:bookworm
export DOCKER_BUILDKIT=0

say() { printf 'images: %s\n' "$*" >&2; }
die() { printf 'images: error: %s\n' "$*" >&2; exit 1; }

# quiet runs a command and shows its output only when it fails.
quiet() {
	local out
	if ! out=$("$@" 2>&1); then
		printf '%s\n' "$out" >&2
		return 1
	fi
}

have_image() { docker image inspect "$1" >/dev/null 2>&1; }

build_testagent() {
	command -v go >/dev/null || die "go is not installed (needed to build adapters/testagent)"
	local ctx
	ctx=$(mktemp -d)
	trap 'rm -rf "$ctx"' RETURN
	(cd "$root" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$ctx/testagent" ./adapters/testagent) \
		|| die "go build ./adapters/testagent failed"
	cp "$root/images/testagent/Dockerfile" "$ctx/Dockerfile"
	quiet docker build -q -t filepath/testagent:latest "$ctx" || die "docker build filepath/testagent failed"
	say "built filepath/testagent:latest"
}

build_base() {
	if [[ -n ${FILEPATH_BASE:-} ]]; then
		have_image "$FILEPATH_BASE" || die "FILEPATH_BASE=$FILEPATH_BASE is not a local image"
		return
	fi
	if have_image "$base_image"; then
		say "$base_image exists, skipping"
		return
	fi
	local tarball=$cache/base-bookworm.tar
	if [[ ! -s $tarball ]]; then
		command -v debootstrap >/dev/null || die "debootstrap is not installed (apt-get install debootstrap), or set FILEPATH_BASE"
		[[ $(id -u) == 0 ]] || die "debootstrap needs root to build $base_image (or set FILEPATH_BASE to a local image)"
		mkdir -p "$cache"
		local dir
		dir=$(mktemp -d)
		say "debootstrap bookworm from $mirror (a few minutes, once; log: $cache/debootstrap.log)"
		if ! debootstrap --variant=minbase --include=git,ca-certificates,jq bookworm "$dir" "$mirror" >"$cache/debootstrap.log" 2>&1; then
			rm -rf "$dir"
			die "debootstrap failed, see $cache/debootstrap.log"
		fi
		rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/*
		tar -C "$dir" --numeric-owner -cf "$tarball.tmp" .
		mv "$tarball.tmp" "$tarball"
		rm -rf "$dir"
	fi
	docker import -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
		"$tarball" "$base_image" >/dev/null || die "docker import $tarball failed"
	say "built $base_image (from $tarball)"
}

build_byo_echo() {
	local base=${FILEPATH_BASE:-$base_image}
	have_image "$base" || build_base
	quiet docker build -q --build-arg "BASE=$base" -t filepath/byo-echo:latest "$root/images/byo-echo" \
		|| die "docker build filepath/byo-echo failed"
	say "built filepath/byo-echo:latest (BASE=$base)"
}

# build_native builds filepath/agent-$1 (shelley or pi) from images/$1.
build_native() {
	local type=$1 base=${FILEPATH_BASE:-$base_image} image=filepath/agent-$1:latest
	command -v go >/dev/null || die "go is not installed (needed to build adapters/native)"
	have_image "$base" || build_base
	local ctx
	ctx=$(mktemp -d)
	trap 'rm -rf "$ctx"' RETURN
	(cd "$root" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$ctx/filepath-native" ./adapters/native) \
		|| die "go build ./adapters/native failed"
	cp "$root/images/$type/Dockerfile" "$ctx/Dockerfile"
	have_image "$image" || say "building $image (the first build installs Go from deb.debian.org, a few minutes)"
	quiet docker build -q --build-arg "BASE=$base" -t "$image" "$ctx" || die "docker build $image failed"
	say "built $image (BASE=$base)"
}

# build_cli_agent TYPE: filepath/agent-TYPE from images/agent-TYPE and the adapter.
build_cli_agent() {
	local type=$1 image=filepath/agent-$1:latest
	if [[ $type == cursor && ${FILEPATH_BUILD_CURSOR:-} != 1 ]]; then
		say "skipped $image: its Dockerfile runs Cursor's installer (https://cursor.com/install),"
		say "  which needs internet this machine may not have (set FILEPATH_BUILD_CURSOR=1 to build it)"
		return
	fi
	command -v go >/dev/null || die "go is not installed (needed to build adapters/cli)"
	local base=${FILEPATH_BASE:-$base_image}
	have_image "$base" || build_base
	local ctx
	ctx=$(mktemp -d)
	trap 'rm -rf "$ctx"' RETURN
	(cd "$root" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$ctx/filepath-cli-adapter" ./adapters/cli) \
		|| die "go build ./adapters/cli failed"
	cp -r "$root/images/agent-$type/." "$ctx/"
	# The download inside the build trusts what this machine trusts (a proxy
	# that intercepts TLS has its CA there); the image does not keep it.
	local ca=${FILEPATH_BUILD_CA:-${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}}
	[[ -s $ca ]] && cp "$ca" "$ctx/host-ca.crt"
	say "building $image (fetches the CLI from the npm registry; a few minutes the first time)"
	quiet docker build -q --force-rm --build-arg "BASE=$base" -t "$image" "$ctx" || die "docker build $image failed"
	say "built $image (BASE=$base)"
}

docker info >/dev/null 2>&1 || die "no Docker engine answers (is dockerd running? DOCKER_HOST=${DOCKER_HOST:-unset})"

targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(testagent base byo-echo shelley pi claude-code codex amp cursor)
for t in "${targets[@]}"; do
	case $t in
	testagent) build_testagent ;;
	base) build_base ;;
	byo-echo) build_byo_echo ;;
	shelley | pi) build_native "$t" ;;
	claude-code | codex | amp | cursor) build_cli_agent "$t" ;;
	*) die "unknown target $t (want testagent, base, byo-echo, shelley, pi, claude-code, codex, amp or cursor)" ;;
	esac
done
