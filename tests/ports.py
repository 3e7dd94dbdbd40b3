"""A free loopback port for a test's own server, never one of the virtual rack's: a rack
started later by the integration tests must find its ports free."""

import socket

RACK_PORTS = {20408, 20480, *range(20500, 20510), *range(20600, 20610)}


def free_port() -> int:
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if port not in RACK_PORTS:
            return port
