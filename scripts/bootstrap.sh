#!/bin/sh
# The one idempotent set-up behind `make demo` and `make test` on Debian bookworm (root):
# host packages (with lava-common, LAVA's job schema for `rtlab lava validate`, which the
# system's python3 runs since it is no PyPI package), foreign-architecture package lists
# for the guest images, the Python venv, the board images, the kernel build tools and the
# RT-patched kernel source, LAVA's dispatcher (lava-run, for `rtlab lava local` and its
# test), a LAVA server on loopback (`rtlab lava server`, for `rtlab lava submit|fetch` and
# their test) and the local pipeline runner. Each step is skipped when already done; downloads are cached under
# .cache/ (git-ignored), so a second run downloads nothing.
#
#   scripts/bootstrap.sh                   every step but the opt-in ones
#   scripts/bootstrap.sh packages venv     only these (the CI job image, docker/ci/Dockerfile:
#                                          packages venv kernel-tools)
#   scripts/bootstrap.sh container-tools   opt-in: Debian's docker.io, debootstrap and the
#                                          Compose plugin (`make test-images`)
# RTLAB_PIP_EXTRAS (default dev) names the pyproject extras the venv gets (the exporter
# image: exporter).
set -eu
cd "$(dirname "$0")/.."

ALL_STEPS="packages venv images kernel-tools kernel-source lava-tools lava-server pipeline-tools"
OPT_IN_STEPS="container-tools"
STEPS="${*:-$ALL_STEPS}"
for step in $STEPS; do
    case " $ALL_STEPS $OPT_IN_STEPS " in
        *" $step "*) ;;
        *) echo "[bootstrap] unknown step '$step' (steps: $ALL_STEPS $OPT_IN_STEPS)" >&2; exit 2 ;;
    esac
done
want() { case " $STEPS " in *" $1 "*) return 0 ;; esac; return 1; }
EXTRAS="${RTLAB_PIP_EXTRAS:-dev}"

HOST_PACKAGES="qemu-system-arm bmap-tools socat cpio device-tree-compiler mtools dosfstools
fdisk e2fsprogs xz-utils zstd binutils microcom telnet python3-venv iproute2 procps postgresql
lava-common busybox-static u-boot-tools"
GUEST_ARCHES="armhf arm64"
KERNEL_PACKAGES="gcc-arm-linux-gnueabihf gcc-aarch64-linux-gnu bc bison flex libssl-dev ccache
u-boot-tools libelf-dev make gcc libc6-dev dpkg-dev patch xz-utils git"

say() { printf '[bootstrap] %s\n' "$*"; }

# another apt-get or dpkg (unattended upgrades, a second job) may hold dpkg's lock for a
# while: wait for it rather than fail the set-up
APT_WAIT="-o DPkg::Lock::Timeout=600"

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

apt_updated=no
apt_update() {
    [ "$apt_updated" = yes ] && return 0
    say "apt-get update"
    # A mirror caught mid-sync fails one index now and then (seen here with an armhf
    # security index); the packages we need are checked explicitly below instead.
    as_root apt-get $APT_WAIT update -qq || say "apt-get update reported errors; continuing"
    apt_updated=yes
}

# install_missing WHY PACKAGE…: the packages not installed yet, and nothing when all are
install_missing() {
    why=$1
    shift
    missing=""
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" \
            || missing="$missing $pkg"
    done
    [ -n "$missing" ] || return 0
    apt_update
    say "installing ($why):$missing"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get $APT_WAIT install -y -qq \
        --no-install-recommends $missing
}

if want packages; then
install_missing "host packages" $HOST_PACKAGES

for arch in $GUEST_ARCHES; do
    if ! dpkg --print-foreign-architectures | grep -qx "$arch"; then
        say "adding foreign architecture $arch (package lists only; nothing is installed)"
        as_root dpkg --add-architecture "$arch"
        apt_updated=no
    fi
    if ! apt-cache show "busybox-static:$arch" >/dev/null 2>&1; then
        apt_update
    fi
    apt-cache show "busybox-static:$arch" >/dev/null 2>&1 || {
        say "no $arch package lists after apt-get update: cannot build $arch images"; exit 1; }
done
fi

if want venv; then
    stamp=.venv/.rtlab-installed
    wanted=$( (sha256sum pyproject.toml; echo "$EXTRAS") | sha256sum | cut -d' ' -f1)
    if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
        say "creating the Python venv (extras: $EXTRAS)"
        python3 -m venv .venv
        .venv/bin/pip install -q --disable-pip-version-check -e ".[$EXTRAS]"
        echo "$wanted" > "$stamp"
    fi
fi

if want images; then
    say "board images"
    .venv/bin/rtlab image build --board all --flavour all
fi

if want kernel-tools; then
    # Kernel builds from source (rtlab kernel config|build, docs/kernel.md): cross compilers, the
    # kernel's host build tools, dpkg-source + patch for the RT-patched Debian source.
    install_missing "kernel builds" $KERNEL_PACKAGES
fi

if want kernel-source; then
    # the pinned source of kernel/source.yaml, SHA-256 checked, unpacked and RT-patched once
    # (about 150 MB download, 1.5 GB unpacked; RTLAB_KERNEL_CACHE moves it)
    say "kernel source"
    .venv/bin/rtlab kernel source >/dev/null
fi

if want lava-tools; then
    # lava-run, to run a rendered QEMU job here (rtlab lava local): about 200 packages
    # (systemd, libguestfs, …) that only this machine's LAVA test needs, not the CI job
    # image (docker/ci/Dockerfile), whose check stage validates jobs with lava-common alone
    install_missing "LAVA's lava-run" lava-dispatcher
fi

if want lava-server; then
    # LAVA 2023.01 as a lab runs it, on loopback: lava-server (gunicorn, the scheduler, the
    # publisher) and lava-dispatcher's lava-worker, without apache2 or lava-coordinator
    # (multinode jobs only; --no-install-recommends). The Debian packages expect systemd;
    # `rtlab lava server` starts the same programs itself, on a PostgreSQL cluster of the
    # instance's own (under .cache/lava-server, a unix socket only), never the system's.
    # `rtlab lava server setup` makes that cluster, the database, the user rtlab and its
    # token (a file only root reads), the worker and the two QEMU devices; idempotent.
    install_missing "a LAVA server on loopback" lava-server lava-dispatcher
    say "LAVA server instance"
    as_root .venv/bin/rtlab lava server setup
fi

if want pipeline-tools; then
    # gitlab-ci-local and rsync: the local pipeline run of `make test` and `make demo PIPELINE=1`
    ./scripts/install-pipeline-tools.sh
fi

if want container-tools; then
    # the container engine and debootstrap of `make test-images` (not for `make test`);
    # scripts/container-host.sh starts the engine with its own settings, so a policy-rc.d
    # keeps docker.io's maintainer scripts from starting it with Debian's (its own bridge
    # and iptables rules)
    policy=/usr/sbin/policy-rc.d
    own_policy=no
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' | as_root tee "$policy" >/dev/null
        as_root chmod 755 "$policy"
        own_policy=yes
    fi
    status=0
    install_missing "make test-images" docker.io debootstrap iptables || status=$?
    [ "$own_policy" = no ] || as_root rm -f "$policy"
    [ "$status" -eq 0 ] || exit "$status"
    # the Compose v2 plugin, which Debian bookworm does not package
    ./scripts/install-compose.sh
fi
say "done"
