#!/bin/sh
# What `make test-images` needs to build and run rtlab's images on this machine, as a lab
# without a registry mirror would: Debian's docker.io (the engine; not started here:
# scripts/container-host.sh starts and stops it), debootstrap (the base image), and the
# Compose v2 CLI plugin, built from its Go module into a project-local folder under .cache/
# (Debian bookworm's docker-compose 1.29 refuses docker/lab/compose.yaml's top-level
# `name:`; a lab installs Docker's docker-compose-plugin package of the same version).
# Idempotent: each step is skipped when already done.
#
#   scripts/install-container-tools.sh          install what is missing
#   scripts/install-container-tools.sh --print  print the plugin folder, install nothing
set -eu
cd "$(dirname "$0")/.."

# the last Compose v2 release (v5 changed the module path); pinned, as the docs tell a lab
COMPOSE_VERSION=v2.40.3
PLUGINS="${RTLAB_CACHE:-$PWD/.cache}/container-tools/compose-$COMPOSE_VERSION"
PACKAGES="docker.io debootstrap iptables"

say() { printf '[container-tools] %s\n' "$*"; }
APT_WAIT="-o DPkg::Lock::Timeout=600"
as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

if [ "${1:-}" = "--print" ]; then
    echo "$PLUGINS"
    exit 0
fi

missing=""
for pkg in $PACKAGES; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" \
        || missing="$missing $pkg"
done
if [ -n "$missing" ]; then
    as_root apt-get $APT_WAIT update -qq || say "apt-get update reported errors; continuing"
    say "installing:$missing"
    # docker.io's maintainer scripts start the engine with Debian's defaults (its own
    # bridge and iptables rules); container-host.sh starts it instead, with the rack's
    # settings, so a policy-rc.d keeps the packages from starting anything
    policy=/usr/sbin/policy-rc.d
    own_policy=no
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' | as_root tee "$policy" >/dev/null
        as_root chmod 755 "$policy"
        own_policy=yes
    fi
    status=0
    as_root env DEBIAN_FRONTEND=noninteractive apt-get $APT_WAIT install -y -qq \
        --no-install-recommends $missing || status=$?
    [ "$own_policy" = yes ] && as_root rm -f "$policy"
    [ "$status" -eq 0 ] || exit "$status"
fi

if [ ! -x "$PLUGINS/docker-compose" ]; then
    command -v go >/dev/null 2>&1 || { say "go is missing: the Compose plugin builds from its Go module"; exit 1; }
    say "building the Compose plugin $COMPOSE_VERSION from its Go module (about 2 min)"
    mkdir -p "$PLUGINS"
    # `go install mod@version` refuses a module whose go.mod has exclude directives, as
    # Compose's has: build it as its own main module, from the module cache
    source=$(go mod download -json "github.com/docker/compose/v2@$COMPOSE_VERSION" \
        | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
    [ -d "$source" ] || { say "go mod download gave no source folder"; exit 1; }
    (cd "$source" && go build -trimpath -o "$PLUGINS/docker-compose" \
        -ldflags "-X github.com/docker/compose/v2/internal.Version=$COMPOSE_VERSION" ./cmd)
fi
say "done"
