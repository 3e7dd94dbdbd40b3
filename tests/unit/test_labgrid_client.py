"""rtlab's own labgrid-client calls: the coordinator and place they name, never a manual
session's LG_* variables from the caller's shell (README, "A manual session")."""

import json
import sys

import pytest

from rtlab.lab import client as labgrid_client

SESSION = {"LG_ENV": "env/virtual.yaml", "LG_PLACE": "imx6q-01", "LG_IMAGE": "/x.img",
           "LG_TOKEN": "ABC", "LG_STATE": "shell", "LG_INITIAL_STATE": "off",
           "LG_COORDINATOR": "elsewhere:20408"}


@pytest.fixture
def fake_client(tmp_path):
    """A labgrid-client that prints its argv and its LG_* environment as JSON."""
    program = tmp_path / "labgrid-client"
    program.write_text(f"#!{sys.executable}\nimport json, os, sys\n"
                       "print(json.dumps({'argv': sys.argv[1:], 'env': {k: v for k, v in "
                       "os.environ.items() if k.startswith('LG_')}}))\n"
                       "sys.exit(3 if 'fail' in sys.argv else 0)\n")
    program.chmod(0o755)
    return program


def test_a_manual_sessions_variables_never_reach_rtlabs_calls(fake_client, monkeypatch):
    for key, value in {**SESSION, "LG_USERNAME": "ci", "LG_HOSTNAME": "runner-1"}.items():
        monkeypatch.setenv(key, value)
    seen = json.loads(labgrid_client.run("127.0.0.1:20408", "acquire", place="rpi3-01",
                                         client=fake_client))
    assert seen["argv"] == ["-x", "127.0.0.1:20408", "-p", "rpi3-01", "acquire"]
    # the identity CI sets is kept; the session's place, file, image and token are not
    assert seen["env"] == {"LG_USERNAME": "ci", "LG_HOSTNAME": "runner-1"}


def test_environment_adds_what_the_caller_names(monkeypatch):
    for key, value in SESSION.items():
        monkeypatch.setenv(key, value)
    env = labgrid_client.environment(LG_PLACE="rpi3-01", LG_IMAGE="/card.img")
    assert {k: v for k, v in env.items() if k.startswith("LG_")} == {
        "LG_PLACE": "rpi3-01", "LG_IMAGE": "/card.img"}


def test_a_failing_call_says_which_command_and_place(fake_client):
    with pytest.raises(RuntimeError, match=r"^labgrid-client fail on imx6q-01 failed: "):
        labgrid_client.run("127.0.0.1:20408", "fail", place="imx6q-01", client=fake_client)
