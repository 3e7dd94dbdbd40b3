#!/bin/sh
# The exporter container's entry point: sshd for the clients (usbsdmux and bmaptool run
# over SSH on the lab host), then labgrid-exporter as the unprivileged user, in the
# foreground so that the container ends when the exporter does.
set -eu
: "${LG_COORDINATOR:?set LG_COORDINATOR to the lab coordinator, host:port}"
config="${LG_EXPORTER_CONFIG:-/etc/labgrid/exporter.yaml}"
[ -f "$config" ] || { echo "no exporter configuration at $config (mount env/exporter/<host>.yaml)" >&2; exit 2; }
ssh-keygen -A >/dev/null
/usr/sbin/sshd
name="${LG_EXPORTER_NAME:-$(hostname)}"
exec runuser -u labgrid -- labgrid-exporter --coordinator "$LG_COORDINATOR" \
    --name "$name" --hostname "${LG_EXPORTER_HOSTNAME:-$name}" "$config"
