from pathlib import Path

import attrs
import pytest

from rtlab.util.paths import REPO_ROOT
from rtlab.util.yamlfile import YamlFileError
from rtlab.vlab import config as vlab_config
from rtlab.vlab.config import load_config

GOOD = """\
coordinator_port: 21408
api_port: 21480
exporter_name: vlab
boards:
  imx6q-01:
    model: imx6q
    serial_port: 21501
    network_port: 21601
    outlet: 1
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "vlab.yaml"
    path.write_text(text)
    return path


def test_the_shipped_rack_config_loads():
    config = load_config(REPO_ROOT / "env" / "vlab.yaml")
    assert [b.place for b in config.boards] == ["imx6q-01", "rpi3-01", "imx6q-02"]
    assert [b.model for b in config.boards] == ["imx6q", "rpi3", "imx6q"]
    assert config.coordinator_address == "127.0.0.1:20408"
    assert config.board("rpi3-01").board_tag == "qemu-rpi3"
    assert config.board("imx6q-02").board_tag == "qemu-imx6q"
    assert [b.network_port for b in config.boards] == [20601, 20602, 20603]


def test_place_tags_say_where_the_network_load_sends_traffic(tmp_path):
    board = load_config(write(tmp_path, GOOD)).board("imx6q-01")
    assert board.place_tags() == {
        "board": "qemu-imx6q",
        "rack": "virtual",
        "net_ping": "10.0.2.2",
        "net_stream": "127.0.0.1:21601",
        "net_stream_board_port": "5001",
    }


@pytest.fixture
def imx6q_without_network(monkeypatch):
    reason = "no NIC in this QEMU machine"
    model = attrs.evolve(vlab_config.BOARD_MODELS["imx6q"], qemu_nic=(), no_network=reason)
    monkeypatch.setitem(vlab_config.BOARD_MODELS, "imx6q", model)
    return reason


def test_a_board_without_network_needs_no_port_and_tags_the_reason(
    tmp_path, imx6q_without_network
):
    board = load_config(write(tmp_path, GOOD.replace("    network_port: 21601\n", ""))).board(
        "imx6q-01"
    )
    assert board.network_port is None
    tags = board.place_tags()
    assert tags["network"] == imx6q_without_network
    assert not {"net_ping", "net_stream"} & set(tags)


def test_a_network_port_on_a_board_without_network_is_refused(tmp_path, imx6q_without_network):
    with pytest.raises(
        YamlFileError,
        match=r"vlab.yaml:8: board 'imx6q-01' has no network \(no NIC in this QEMU machine\)",
    ):
        load_config(write(tmp_path, GOOD))


def test_unknown_place_lists_the_valid_ones():
    config = load_config(REPO_ROOT / "env" / "vlab.yaml")
    with pytest.raises(ValueError, match="no place 'bbb-01' .*imx6q-01, rpi3-01"):
        config.board("bbb-01")


@pytest.mark.parametrize(
    ("bad", "expected"),
    [
        (GOOD.replace("outlet: 1", "outlet: 1\n    outlett: 2"),
         r"vlab.yaml:10: unknown key 'outlett' in board 'imx6q-01'"),
        (GOOD.replace("model: imx6q", "model: bbb"),
         r"vlab.yaml:6: unknown board model 'bbb' \(valid: imx6q, rpi3\)"),
        (GOOD.replace("serial_port: 21501", "serial_port: 80"),
         r"vlab.yaml:7: 'serial_port' must be a port number"),
        (GOOD.replace("serial_port: 21501", "serial_port: 21480"),
         r"ports must be distinct"),
        (GOOD.replace("network_port: 21601", "network_port: 21501"),
         r"ports must be distinct"),
        (GOOD.replace("network_port: 21601", "network_port: 80"),
         r"vlab.yaml:8: 'network_port' must be a port number"),
        (GOOD.replace("    network_port: 21601\n", ""),
         r"vlab.yaml:6: board 'imx6q-01' lacks 'network_port'"),
        (GOOD.replace("api_port: 21480\n", ""),
         r"vlab.yaml:1: the virtual rack config lacks 'api_port'"),
        (GOOD.replace("boards:", "boards: [", 1), r"vlab.yaml:\d+: invalid YAML"),
    ],
)
def test_bad_rack_config_names_file_and_line(tmp_path, bad, expected):
    with pytest.raises(YamlFileError, match=expected):
        load_config(write(tmp_path, bad))
