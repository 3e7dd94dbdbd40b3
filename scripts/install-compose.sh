#!/bin/sh
# The Compose v2 CLI plugin of `make test-images` (scripts/bootstrap.sh container-tools),
# built from its Go module into a project-local folder under .cache/: Debian bookworm's
# docker-compose 1.29 refuses docker/lab/compose.yaml's top-level `name:`, and no registry
# of Docker's is reached here; a lab installs Docker's docker-compose-plugin package of the
# same version instead. Skipped when already built.
#
#   scripts/install-compose.sh          build it if it is missing
#   scripts/install-compose.sh --print  print the plugin folder, build nothing
set -eu
cd "$(dirname "$0")/.."

# the last Compose v2 release (v5 changed the module path); pinned, as the docs tell a lab
COMPOSE_VERSION=v2.40.3
PLUGINS="${RTLAB_CACHE:-$PWD/.cache}/container-tools/compose-$COMPOSE_VERSION"

say() { printf '[compose] %s\n' "$*"; }

if [ "${1:-}" = "--print" ]; then
    echo "$PLUGINS"
    exit 0
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
