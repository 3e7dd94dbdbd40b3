"""A free loopback port for a test's own server, never one of the virtual rack's: a rack
started later by the integration tests must find its ports free."""

import functools
import socket

from rtlab.util import paths
from rtlab.vlab.config import load_config


@functools.cache
def rack_ports() -> frozenset[int]:
    """The ports the virtual rack's config (the one the integration tests start) serves."""
    config = load_config(paths.default_vlab_config())
    ports = {config.coordinator_port, config.api_port}
    for board in config.boards:
        ports.add(board.serial_port)
        if board.network_port is not None:
            ports.add(board.network_port)
    return frozenset(ports)


def free_port() -> int:
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if port not in rack_ports():
            return port
