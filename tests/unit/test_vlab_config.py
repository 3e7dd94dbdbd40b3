from pathlib import Path

import pytest

from rtlab.paths import REPO_ROOT
from rtlab.vlab.config import load_config
from rtlab.yamlfile import YamlFileError

GOOD = """\
coordinator_port: 21408
api_port: 21480
exporter_name: vlab
boards:
  imx6q-01:
    model: imx6q
    serial_port: 21501
    outlet: 1
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "vlab.yaml"
    path.write_text(text)
    return path


def test_the_shipped_rack_config_loads():
    config = load_config(REPO_ROOT / "env" / "vlab.yaml")
    assert [b.place for b in config.boards] == ["imx6q-01", "rpi3-01"]
    assert [b.model for b in config.boards] == ["imx6q", "rpi3"]
    assert config.coordinator_address == "127.0.0.1:20408"
    assert config.board("rpi3-01").board_tag == "qemu-rpi3"


def test_unknown_place_lists_the_valid_ones():
    config = load_config(REPO_ROOT / "env" / "vlab.yaml")
    with pytest.raises(ValueError, match="no place 'bbb-01' .*imx6q-01, rpi3-01"):
        config.board("bbb-01")


@pytest.mark.parametrize(
    ("bad", "expected"),
    [
        (GOOD.replace("outlet: 1", "outlet: 1\n    outlett: 2"),
         r"vlab.yaml:9: unknown key 'outlett' in board 'imx6q-01'"),
        (GOOD.replace("model: imx6q", "model: bbb"),
         r"vlab.yaml:6: unknown board model 'bbb' \(valid: imx6q, rpi3\)"),
        (GOOD.replace("serial_port: 21501", "serial_port: 80"),
         r"vlab.yaml:7: 'serial_port' must be a port number"),
        (GOOD.replace("serial_port: 21501", "serial_port: 21480"),
         r"ports must be distinct"),
        (GOOD.replace("api_port: 21480\n", ""),
         r"vlab.yaml:1: the virtual rack config lacks 'api_port'"),
        (GOOD.replace("boards:", "boards: [", 1), r"vlab.yaml:\d+: invalid YAML"),
    ],
)
def test_bad_rack_config_names_file_and_line(tmp_path, bad, expected):
    with pytest.raises(YamlFileError, match=expected):
        load_config(write(tmp_path, bad))
