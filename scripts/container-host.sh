#!/bin/sh
# The container engine of `make test-images`, on a machine without systemd and without a
# registry, as a lab without a registry mirror runs it (docs/images.md):
#
#   scripts/container-host.sh start        Debian's dockerd on a socket of its own, its data
#                                          under .cache/docker/, a bridge of its own
#                                          (rtlab-docker0, never docker0), no iptables
#                                          rules (builds and the exporter use the host's
#                                          network; a job container on the bridge reaches
#                                          no further); refused beside a system dockerd
#                                          or a docker0 bridge (dockerd would delete it)
#   scripts/container-host.sh base-image   a stand-in for the base the Dockerfiles pin,
#                                          made with debootstrap + docker import, under a
#                                          name of its own (rtlab.local/debian:…)
#   scripts/container-host.sh build        docker/ci, docker/exporter and the results
#                                          database's stand-in on that base, --network host
#   scripts/container-host.sh stop         every container and network of this engine
#                                          gone, the engine stopped, and what it made
#                                          removed: the bridges its state names, its own
#                                          bridge; nothing found by a name pattern
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
# the base built here: a name of its own, never the upstream tag it stands in for
LOCAL_BASE=rtlab.local/debian:bookworm-minbase
# the engine's own default bridge and its address; its networks' subnets come from a pool
# of their own, apart from a system engine's default ones (172.17-172.29, 192.168)
BRIDGE=rtlab-docker0
BRIDGE_ADDRESS=172.31.254.1/24
ADDRESS_POOL=base=172.31.0.0/17,size=24

say() { printf '[container-host] %s\n' "$*"; }

upstream_base() {
    # the one base the Dockerfiles pin (ARG BASE's default); a second would need a second
    # stand-in
    bases=$(sed -n 's/^ARG[[:space:]]\{1,\}BASE=\([^[:space:]]*\).*/\1/p' docker/*/Dockerfile \
        docker/lab/*/Dockerfile | sort -u)
    [ -n "$bases" ] && [ "$(echo "$bases" | wc -l)" -eq 1 ] || {
        say "the Dockerfiles pin different (or no) base images: $bases"; exit 1; }
    echo "$bases"
}

system_engine() {
    # a dockerd that is not ours (a lab host's, started by systemd or by hand)
    for pid in $(pidof dockerd 2>/dev/null); do
        [ -s "$ROOT/dockerd.pid" ] && [ "$pid" = "$(cat "$ROOT/dockerd.pid")" ] && continue
        echo "$pid"
        return
    done
}

running() { $DOCKER info >/dev/null 2>&1; }

start() {
    if running; then
        say "dockerd already answers on $DOCKER_HOST"
        return
    fi
    other=$(system_engine)
    if [ -n "$other" ]; then
        # it would share that engine's containerd (its socket under /run/containerd), whose
        # containers and images are not ours to touch
        say "a system dockerd runs (pid $other): stop it (systemctl stop docker docker.socket)" \
            "while make test-images runs, or run make test-images on a host without one"
        exit 1
    fi
    if ip link show docker0 >/dev/null 2>&1; then
        # dockerd 20.10 deletes docker0 when it starts with a bridge of its own (or none),
        # measured here (2026-11-28): a system engine's containers would lose their network
        say "a bridge docker0 exists (a system Docker engine's, or one it left behind):" \
            "dockerd would delete it on start; stop that engine and, if the bridge is a" \
            "stale leftover, remove it (ip link delete docker0), or run make test-images" \
            "on a host without one"
        exit 1
    fi
    mkdir -p "$ROOT/data" "$DOCKER_CONFIG/cli-plugins"
    ln -sf "$(scripts/install-compose.sh --print)/docker-compose" \
        "$DOCKER_CONFIG/cli-plugins/docker-compose"
    if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
        ip link add "$BRIDGE" type bridge
        ip addr add "$BRIDGE_ADDRESS" dev "$BRIDGE"
        ip link set "$BRIDGE" up
        # stop removes it only if it was made here
        : >"$ROOT/bridge.made"
    fi
    say "starting dockerd ($ROOT, bridge $BRIDGE)"
    setsid dockerd --host "$DOCKER_HOST" --data-root "$ROOT/data" --exec-root "$EXEC_ROOT" \
        --pidfile "$ROOT/dockerd.pid" --storage-driver overlay2 \
        --exec-opt native.cgroupdriver=cgroupfs --iptables=false --ip6tables=false \
        --ip-masq=false --bridge "$BRIDGE" --default-address-pool "$ADDRESS_POOL" \
        >"$ROOT/dockerd.log" 2>&1 </dev/null &
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
        # the bridges of this engine's networks, by its own state: br-<network id> unless
        # the network named its bridge
        for network in $networks; do
            name=$($DOCKER network inspect -f \
                '{{index .Options "com.docker.network.bridge.name"}}' "$network" 2>/dev/null)
            echo "${name:-br-$network}" >>"$ROOT/bridges"
        done
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
    # what this engine made and left behind: a network's bridge that survived the removal
    # above (named by the engine's state, never by a pattern: docker0 and a system
    # engine's br-… are not ours), the bridge made for it, its netns mounts
    if [ -f "$ROOT/bridges" ]; then
        for link in $(sort -u "$ROOT/bridges"); do
            ip link show "$link" >/dev/null 2>&1 || continue
            say "removing the bridge $link (a network of this engine)"
            ip link delete "$link"
        done
        rm -f "$ROOT/bridges"
    fi
    if [ -f "$ROOT/bridge.made" ]; then
        if ip link show "$BRIDGE" >/dev/null 2>&1; then
            say "removing the bridge $BRIDGE"
            ip link delete "$BRIDGE"
        fi
        rm -f "$ROOT/bridge.made"
    fi
    if [ -d "$EXEC_ROOT" ]; then
        grep -o " $EXEC_ROOT[^ ]*" /proc/mounts | sort -r | while read -r mount; do
            umount "$mount" 2>/dev/null || true
        done
        rm -rf "$EXEC_ROOT"
    fi
}

make_base_image() {
    base=$LOCAL_BASE
    upstream=$(upstream_base)
    if $DOCKER image inspect "$base" >/dev/null 2>&1; then
        say "base image $base: present"
        return
    fi
    say "base image $base (standing in for $upstream): debootstrap --variant=minbase bookworm"
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
        --change "LABEL org.rtlab.host-ca=$host_ca" \
        --change "LABEL org.rtlab.made-by=\"debootstrap --variant=minbase bookworm $MIRROR\"" \
        --change "LABEL org.rtlab.stands-in-for=$upstream" - "$base" >/dev/null
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
            --build-arg "BASE=$LOCAL_BASE" -t "$tag" "$context" >"$ROOT/build-$name.log" 2>&1 || {
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
