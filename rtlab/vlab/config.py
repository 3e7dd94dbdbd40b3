"""The virtual rack's configuration file (``env/vlab.yaml``): which boards it emulates and
on which loopback ports it serves their serial consoles, PDU, SD muxes and the forwarded
ports of their networks."""

from pathlib import Path
from typing import Any

import attr

from rtlab.platform.boards import BOARD_MODELS, GATEWAY, STREAM_PORT
from rtlab.util.yamlfile import YamlFileError, line_of, load_yaml

LOOPBACK = "127.0.0.1"
TOP_KEYS = {"coordinator_port", "api_port", "exporter_name", "boards"}
BOARD_KEYS = {"model", "serial_port", "outlet"}
NETWORK_KEY = "network_port"


@attr.frozen
class VirtualBoard:
    place: str
    model: str
    serial_port: int
    outlet: int
    network_port: int | None = None
    """Loopback port forwarded to the board's stream port; None: the board has no network."""

    @property
    def board_tag(self) -> str:
        """The board name thresholds and results use: emulated boards are their own
        boards, never confused with the physical ones they model."""
        return f"qemu-{self.model}"

    def place_tags(self) -> dict[str, str]:
        """The labgrid place tags of this board: what it is, and where the network load
        sends traffic (``net_ping``, ``net_stream``, ``net_stream_board_port``) or why the
        board has no network (``network``)."""
        tags = {"board": self.board_tag, "rack": "virtual"}
        if self.network_port is None:
            reason = BOARD_MODELS[self.model].no_network
            tags["network"] = reason or "the rack config gives it no network_port"
        else:
            tags["net_ping"] = GATEWAY
            tags["net_stream"] = f"{LOOPBACK}:{self.network_port}"
            tags["net_stream_board_port"] = str(STREAM_PORT)
        return tags


@attr.frozen
class VlabConfig:
    path: Path
    coordinator_port: int
    api_port: int
    exporter_name: str
    boards: tuple[VirtualBoard, ...]

    @property
    def coordinator_address(self) -> str:
        return f"{LOOPBACK}:{self.coordinator_port}"

    @property
    def api_url(self) -> str:
        return f"http://{LOOPBACK}:{self.api_port}"

    def board(self, place: str) -> VirtualBoard:
        for board in self.boards:
            if board.place == place:
                return board
        valid = ", ".join(b.place for b in self.boards)
        raise ValueError(f"{self.path}: no place '{place}' (valid: {valid})")


def _port(path: Path, node: Any, key: str) -> int:  # noqa: ANN401
    value = node.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or not 1024 <= value <= 65535:
        raise YamlFileError(
            f"{path}:{line_of(node, key)}: '{key}' must be a port number 1024-65535, "
            f"got {value!r}"
        )
    return value


def _check_keys(
    path: Path,
    node: Any,  # noqa: ANN401
    required: set[str],
    what: str,
    optional: frozenset[str] = frozenset(),
) -> None:
    if not isinstance(node, dict):
        raise YamlFileError(f"{path}:{line_of(node)}: {what} must be a mapping")
    allowed = required | optional
    for key in node:
        if key not in allowed:
            raise YamlFileError(
                f"{path}:{line_of(node, key)}: unknown key '{key}' in {what} "
                f"(expected one of: {', '.join(sorted(allowed))})"
            )
    for key in sorted(required - set(node)):
        raise YamlFileError(f"{path}:{line_of(node)}: {what} lacks '{key}'")


def _network_port(path: Path, node: Any, place: str, model: str) -> int | None:  # noqa: ANN401
    # Required exactly where the model has a network: a networked board without a port
    # could not take the stream, a port on a board without network would serve nothing.
    reason = BOARD_MODELS[model].no_network
    if reason is not None:
        if NETWORK_KEY in node:
            raise YamlFileError(
                f"{path}:{line_of(node, NETWORK_KEY)}: board '{place}' has no network "
                f"({reason}); remove '{NETWORK_KEY}'"
            )
        return None
    if NETWORK_KEY not in node:
        raise YamlFileError(
            f"{path}:{line_of(node)}: board '{place}' lacks '{NETWORK_KEY}' (the host port "
            f"forwarded to its network)"
        )
    return _port(path, node, NETWORK_KEY)


def load_config(path: Path) -> VlabConfig:
    data = load_yaml(path)
    _check_keys(path, data, TOP_KEYS, "the virtual rack config")
    boards_node = data["boards"]
    if not isinstance(boards_node, dict) or not boards_node:
        raise YamlFileError(f"{path}:{line_of(data, 'boards')}: 'boards' must map places")
    boards = []
    for place, node in boards_node.items():
        _check_keys(path, node, BOARD_KEYS, f"board '{place}'", frozenset({NETWORK_KEY}))
        model = node["model"]
        if model not in BOARD_MODELS:
            raise YamlFileError(
                f"{path}:{line_of(node, 'model')}: unknown board model '{model}' "
                f"(valid: {', '.join(sorted(BOARD_MODELS))})"
            )
        outlet = node["outlet"]
        if not isinstance(outlet, int) or outlet < 1:
            raise YamlFileError(
                f"{path}:{line_of(node, 'outlet')}: 'outlet' must be a positive integer"
            )
        boards.append(
            VirtualBoard(
                str(place),
                model,
                _port(path, node, "serial_port"),
                outlet,
                _network_port(path, node, str(place), model),
            )
        )
    ports = [_port(path, data, "coordinator_port"), _port(path, data, "api_port")]
    ports += [b.serial_port for b in boards]
    ports += [b.network_port for b in boards if b.network_port is not None]
    if len(set(ports)) != len(ports):
        raise YamlFileError(f"{path}: ports must be distinct, got {ports}")
    if len({b.outlet for b in boards}) != len(boards):
        raise YamlFileError(f"{path}: two boards share a PDU outlet")
    return VlabConfig(
        path=path,
        coordinator_port=ports[0],
        api_port=ports[1],
        exporter_name=str(data["exporter_name"]),
        boards=tuple(boards),
    )
