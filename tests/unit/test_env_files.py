"""Every environment and exporter file loads, and every driver binds, without hardware:
a typo in a class, driver or binding name fails here instead of in the lab."""

import io
from pathlib import Path

import attr
import pytest
from labgrid import Environment
from labgrid.factory import target_factory
from labgrid.remote.config import ResourceConfig
from labgrid.strategy.common import StrategyError
from ruamel.yaml import YAML

from rtlab.lab.drivers import VirtualSDMuxDriver, VirtualStorageDriver
from rtlab.lab.envfile import check_env_file, check_exporter_file
from rtlab.lab.strategy import RTLabStrategy
from rtlab.util.paths import REPO_ROOT
from rtlab.vlab.config import load_config
from rtlab.vlab.server import exporter_config

ENV = REPO_ROOT / "env"
EXPORTER_FILES = sorted((ENV / "exporter").glob("*.yaml"))
# env/vlab.yaml configures the virtual rack itself, env/lava-server.yaml the LAVA instance
# (rtlab lava server); the rest are labgrid environments
ENV_FILES = sorted(path for path in ENV.glob("*.yaml")
                   if path.name not in ("vlab.yaml", "lava-server.yaml"))

# What a client sees of each class a lab host exports (labgrid's exporter turns local USB
# resources into their Network* counterparts).
CLIENT_CLASS = {
    "USBSerialPort": "NetworkSerialPort",
    "USBSDMuxDevice": "NetworkUSBSDMuxDevice",
    "USBSDWireDevice": "NetworkUSBSDWireDevice",
    "USBMassStorage": "NetworkUSBMassStorage",
}
USB_PARAMS = {"host": "labhost-01", "busnum": 1, "devnum": 2, "path": "1-1.2",
              "vendor_id": 0x0424, "model_id": 0x4041}


def client_resources(group: dict) -> dict:
    """The resources a RemotePlace expands to, for one exporter group."""
    resources = {}
    for cls, params in group.items():
        client_cls = CLIENT_CLASS.get(cls, cls)
        if client_cls == "NetworkSerialPort" and cls != client_cls:
            params = {"host": "labhost-01", "port": 4000, "speed": params.get("speed", 115200)}
        elif client_cls.startswith("NetworkUSB"):
            params = dict(USB_PARAMS)
            if client_cls == "NetworkUSBSDMuxDevice":
                params["control_path"] = "/dev/sg1"
            else:
                params["path"] = "/dev/sdb"
        resources[client_cls] = dict(params)
    return resources


def bind(env_file: Path, resources: dict, tmp_path: Path, monkeypatch) -> object:
    """Load ``env_file`` with its RemotePlace replaced by ``resources`` and bind all
    drivers (binding never activates, so no hardware is touched)."""
    monkeypatch.setenv("LG_PLACE", "imx6q-01")
    monkeypatch.setenv("LG_IMAGE", str(tmp_path / "sdcard.img"))
    yaml = YAML(typ="rt")
    data = yaml.load(env_file.read_text())
    assert "RemotePlace" in data["targets"]["main"]["resources"]
    data["targets"]["main"]["resources"] = resources
    out = io.StringIO()
    yaml.dump(data, out)
    copy = tmp_path / env_file.name
    copy.write_text(out.getvalue())
    env = Environment(str(copy))
    target = env.get_target("main")
    assert target is not None
    # the files name no image: the strategy flashes what LG_IMAGE names
    assert target.get_driver(RTLabStrategy, activate=False).image_path() == str(
        tmp_path / "sdcard.img")
    return target


def test_virtual_env_binds_to_what_the_virtual_exporter_exports(tmp_path, monkeypatch):
    config = load_config(ENV / "vlab.yaml")
    exported = YAML(typ="safe").load(exporter_config(config, tmp_path / "state"))
    assert set(exported) == {"imx6q-01", "rpi3-01", "imx6q-02"}
    target = bind(ENV / "virtual.yaml", exported["imx6q-01"], tmp_path, monkeypatch)
    strategy = target.get_driver(RTLabStrategy)
    assert isinstance(strategy.sdmux, VirtualSDMuxDriver)
    assert isinstance(strategy.storage, VirtualStorageDriver)
    assert type(strategy.power).__name__ == "NetworkPDUDriver"
    assert type(strategy.shell).__name__ == "ShellDriver"
    assert strategy.image_path() == str(tmp_path / "sdcard.img")


@pytest.mark.parametrize("env_file", ["virtual.yaml", "rack.yaml"])
def test_an_env_file_loads_without_an_image_and_flashing_says_what_to_set(
        env_file, tmp_path, monkeypatch):
    # a console or power session in a second terminal sets no LG_IMAGE
    config = load_config(ENV / "vlab.yaml")
    exported = YAML(typ="safe").load(exporter_config(config, tmp_path / "state"))
    resources = (exported["imx6q-01"] if env_file == "virtual.yaml"
                 else client_resources(next(iter(
                     ResourceConfig(str(EXPORTER_FILES[0])).data.values()))))
    target = bind(ENV / env_file, resources, tmp_path, monkeypatch)
    monkeypatch.delenv("LG_IMAGE")
    strategy = target.get_driver(RTLabStrategy, activate=False)
    with pytest.raises(StrategyError, match=r"^no SD card image to flash: the environment "
                       r"has no image 'sdcard' under 'images:' and LG_IMAGE is not set "
                       r"\(export LG_IMAGE=<path>/sdcard.img, with its .bmap beside it\)$"):
        strategy.image_path()


@pytest.mark.parametrize("exporter_file", EXPORTER_FILES, ids=lambda p: p.name)
def test_physical_env_binds_to_every_group_of_every_lab_host(
        exporter_file, tmp_path, monkeypatch):
    groups = ResourceConfig(str(exporter_file)).data
    assert groups, f"{exporter_file} exports nothing"
    for name, group in groups.items():
        target = bind(ENV / "rack.yaml", client_resources(group), tmp_path, monkeypatch)
        strategy = target.get_driver(RTLabStrategy)
        assert type(strategy.sdmux).__name__ in {"USBSDMuxDriver", "USBSDWireDriver"}, name
        assert type(strategy.storage).__name__ == "USBStorageDriver", name
        # the PDU's requests bounded in time, as on the virtual rack
        assert type(strategy.power).__name__ == "NetworkPDUDriver", name
        target.cleanup()


@pytest.mark.parametrize("exporter_file", EXPORTER_FILES, ids=lambda p: p.name)
def test_exporter_files_use_real_classes_and_parameters(exporter_file):
    groups = ResourceConfig(str(exporter_file)).data
    for group_name, group in groups.items():
        for cls, params in group.items():
            assert cls in target_factory.resources, f"{group_name}: unknown class {cls}"
            fields = {f.name for f in attr.fields(target_factory.resources[cls])}
            unknown = set(params) - fields
            assert not unknown, f"{exporter_file.name} {group_name}/{cls}: {unknown}"
        # every board needs power, console, mux and card, or CI cannot run it
        assert {"NetworkPowerPort", "USBSerialPort"} <= set(group), group_name
        assert {"USBSDMuxDevice", "USBSDWireDevice"} & set(group), group_name


@pytest.mark.parametrize("env_file", ENV_FILES, ids=lambda p: p.name)
def test_env_files_pass_rtlabs_own_check(env_file):
    assert check_env_file(env_file) == []


@pytest.mark.parametrize("exporter_file", EXPORTER_FILES, ids=lambda p: p.name)
def test_exporter_files_pass_rtlabs_own_check(exporter_file):
    assert check_exporter_file(exporter_file) == []
