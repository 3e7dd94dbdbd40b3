#!/bin/sh
# The container engine of `make test-images`, on a machine without systemd and without a
# registry, as a lab without a registry mirror runs it (docs/images.md):
#
#   scripts/container-host.sh start        Debian's dockerd on a socket of its own, its data
#                                          under .cache/docker/, no iptables rules (builds
#                                          and the exporter use the host's network; a job
#                                          container on the bridge reaches no further)
#   scripts/container-host.sh base-image   the base image the Dockerfiles pin, made with
#                                          debootstrap + docker import
#   scripts/container-host.sh build        docker/ci, docker/exporter and the results
#                                          database's stand-in, --network host
#   scripts/container-host.sh stop         every container and network gone, the engine
#                                          stopped, no bridge or rule of its own left
#   scripts/container-host.sh env          the variables that reach this engine
#
# Where the host's HTTPS goes through a proxy whose CA sits in
# /usr/local/share/ca-certificates/, the base image carries those certificates (and a
# pip.conf that trusts the system's bundle), so every image built on it does too: such an
# image is labelled org.rtlab.host-ca and is never pushed anywhere.
set -eu
cd "$(dirname "$0")/.."

ROOT="${RTLAB_CACHE:-$PWD/.cache}/docker"
export DOCKER_HOST="unix://$ROOT/docker.sock"
export DOCKER_CONFIG="$ROOT/config"
# Debian's client: a newer docker on PATH may lack buildx, and then its builds fail
DOCKER=/usr/bin/docker
EXEC_ROOT=/run/rtlab-docker
REGISTRY=registry.lab.example/rtlab
IMAGES="ci exporter results-db"
MIRROR=http://deb.debian.org/debian

say() { printf '[container-host] %s\n' "$*"; }

base_image() {
    # the one FROM line the Dockerfiles share; a second base would need a second import
    bases=$(sed -n 's/^FROM[[:space:]]\{1,\}\([^[:space:]]*\).*/\1/p' docker/*/Dockerfile \
        docker/lab/*/Dockerfile | sort -u)
    [ "$(echo "$bases" | wc -l)" -eq 1 ] || {
        say "the Dockerfiles pin different base images: $bases"; exit 1; }
    echo "$bases"
}

running() { $DOCKER info >/dev/null 2>&1; }

start() {
    if running; then
        say "dockerd already answers on $DOCKER_HOST"
        return
    fi
    mkdir -p "$ROOT/data" "$DOCKER_CONFIG/cli-plugins"
    ln -sf "$(scripts/install-compose.sh --print)/docker-compose" \
        "$DOCKER_CONFIG/cli-plugins/docker-compose"
    say "starting dockerd ($ROOT)"
    setsid dockerd --host "$DOCKER_HOST" --data-root "$ROOT/data" --exec-root "$EXEC_ROOT" \
        --pidfile "$ROOT/dockerd.pid" --storage-driver overlay2 \
        --exec-opt native.cgroupdriver=cgroupfs --iptables=false --ip6tables=false \
        --ip-masq=false >"$ROOT/dockerd.log" 2>&1 </dev/null &
    i=0
    until running; do
        i=$((i + 1))
        if [ "$i" -gt 120 ]; then
            say "dockerd did not answer within 60 s; its log:"
            tail -20 "$ROOT/dockerd.log" >&2
            exit 1
        fi
        sleep 0.5
    done
    say "dockerd $($DOCKER version --format '{{.Server.Version}}') up"
}

stop() {
    if running; then
        containers=$($DOCKER ps -aq)
        [ -z "$containers" ] || $DOCKER rm -f $containers >/dev/null
        networks=$($DOCKER network ls -q --filter type=custom)
        [ -z "$networks" ] || $DOCKER network rm $networks >/dev/null
    fi
    if [ -s "$ROOT/dockerd.pid" ]; then
        pid=$(cat "$ROOT/dockerd.pid")
        kill "$pid" 2>/dev/null || true
        i=0
        while kill -0 "$pid" 2>/dev/null; do
            i=$((i + 1))
            [ "$i" -gt 60 ] && { say "dockerd $pid ignores SIGTERM: killing it"; kill -9 "$pid"; }
            sleep 0.5
        done
        rm -f "$ROOT/dockerd.pid"
        say "dockerd stopped"
    fi
    # what the engine leaves behind: its default bridge docker0 (and a network's br-…,
    # had one survived the removal above) and its netns mounts under the exec root
    for link in $(ip -o link show type bridge | sed -n 's/^[0-9]*: \(br-[0-9a-f]*\|docker0\)[:@].*/\1/p'); do
        say "removing the bridge $link"
        ip link delete "$link"
    done
    if [ -d "$EXEC_ROOT" ]; then
        grep -o " $EXEC_ROOT[^ ]*" /proc/mounts | sort -r | while read -r mount; do
            umount "$mount" 2>/dev/null || true
        done
        rm -rf "$EXEC_ROOT"
    fi
}

make_base_image() {
    base=$(base_image)
    if $DOCKER image inspect "$base" >/dev/null 2>&1; then
        say "base image $base: present"
        return
    fi
    say "base image $base: debootstrap --variant=minbase bookworm"
    rootfs=$(mktemp -d)
    mkdir -p "$ROOT/debootstrap-cache"
    debootstrap --variant=minbase --cache-dir="$ROOT/debootstrap-cache" bookworm "$rootfs" \
        "$MIRROR" >"$ROOT/debootstrap.log" 2>&1 || {
        tail -20 "$ROOT/debootstrap.log" >&2; rm -rf "$rootfs"; exit 1; }
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    host_ca=no
    for crt in /usr/local/share/ca-certificates/*.crt; do
        [ -e "$crt" ] || continue
        mkdir -p "$rootfs/usr/local/share/ca-certificates"
        cp "$crt" "$rootfs/usr/local/share/ca-certificates/"
        host_ca=yes
    done
    if [ "$host_ca" = yes ]; then
        # pip's own bundle does not have the proxy's CA; the system's will, once an image
        # installs ca-certificates (whose update-ca-certificates adds the files above)
        printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' >"$rootfs/etc/pip.conf"
        say "the host's extra CA certificates are in the base image: never push what is built on it"
    fi
    tar -C "$rootfs" -c . | $DOCKER import --change 'CMD ["bash"]' \
        --change "LABEL org.rtlab.host-ca=$host_ca" - "$base" >/dev/null
    rm -rf "$rootfs"
    say "base image $base: imported"
}

build() {
    for name in ${1:-$IMAGES}; do
        tag="$REGISTRY/$name:bookworm"
        started=$(date +%s)
        say "building $tag"
        case "$name" in
            # PostgreSQL from Debian's packages, for compose.yaml's RTLAB_DB_IMAGE
            results-db) context=docker/lab/results-db; file=$context/Dockerfile ;;
            *) context=.; file=docker/$name/Dockerfile ;;
        esac
        DOCKER_BUILDKIT=0 $DOCKER build -q --network host -f "$file" \
            -t "$tag" "$context" >"$ROOT/build-$name.log" 2>&1 || {
            tail -30 "$ROOT/build-$name.log" >&2; exit 1; }
        say "built $tag in $(( $(date +%s) - started )) s"
    done
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    base-image) make_base_image ;;
    build) build "${2:-}" ;;
    env) echo "export DOCKER_HOST=$DOCKER_HOST DOCKER_CONFIG=$DOCKER_CONFIG" ;;
    *) echo "usage: $0 start|base-image|build [IMAGE]|stop|env" >&2; exit 2 ;;
esac
