"""A copy of the repository's rack config on ports nobody uses, for tests that start a
rack (or a part of one) beside the other tests' rack."""

import socket
from pathlib import Path

from ruamel.yaml import YAML

from rtlab.util import paths
from rtlab.vlab.config import LOOPBACK, VlabConfig, load_config


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind((LOOPBACK, 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def rack_config_on_free_ports(folder: Path) -> VlabConfig:
    yaml = YAML(typ="rt")
    data = yaml.load(paths.default_vlab_config().read_text())
    numbers = iter(free_ports(2 + 2 * len(data["boards"])))
    data["coordinator_port"] = next(numbers)
    data["api_port"] = next(numbers)
    for board in data["boards"].values():
        board["serial_port"] = next(numbers)
        if "network_port" in board:
            board["network_port"] = next(numbers)
    path = folder / "vlab.yaml"
    with path.open("w") as out:
        yaml.dump(data, out)
    return load_config(path)
