"""The virtual rack's configuration file (``env/vlab.yaml``): which boards it emulates and
on which loopback ports it serves their serial consoles, PDU and SD muxes."""

from pathlib import Path
from typing import Any

import attr

from ..yamlfile import YamlFileError, line_of, load_yaml
from .boards import BOARD_MODELS

LOOPBACK = "127.0.0.1"
TOP_KEYS = {"coordinator_port", "api_port", "exporter_name", "boards"}
BOARD_KEYS = {"model", "serial_port", "outlet"}


@attr.frozen
class VirtualBoard:
    place: str
    model: str
    serial_port: int
    outlet: int

    @property
    def board_tag(self) -> str:
        """The board name thresholds and results use: emulated boards are their own
        boards, never confused with the physical ones they model."""
        return f"qemu-{self.model}"


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


def _check_keys(path: Path, node: Any, allowed: set[str], what: str) -> None:  # noqa: ANN401
    if not isinstance(node, dict):
        raise YamlFileError(f"{path}:{line_of(node)}: {what} must be a mapping")
    for key in node:
        if key not in allowed:
            raise YamlFileError(
                f"{path}:{line_of(node, key)}: unknown key '{key}' in {what} "
                f"(expected one of: {', '.join(sorted(allowed))})"
            )
    for key in sorted(allowed - set(node)):
        raise YamlFileError(f"{path}:{line_of(node)}: {what} lacks '{key}'")


def load_config(path: Path) -> VlabConfig:
    data = load_yaml(path)
    _check_keys(path, data, TOP_KEYS, "the virtual rack config")
    boards_node = data["boards"]
    if not isinstance(boards_node, dict) or not boards_node:
        raise YamlFileError(f"{path}:{line_of(data, 'boards')}: 'boards' must map places")
    boards = []
    for place, node in boards_node.items():
        _check_keys(path, node, BOARD_KEYS, f"board '{place}'")
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
        boards.append(VirtualBoard(str(place), model, _port(path, node, "serial_port"), outlet))
    ports = [_port(path, data, "coordinator_port"), _port(path, data, "api_port")]
    ports += [b.serial_port for b in boards]
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
