"""The env file of a board behind a network PDU that nothing answers for (no PDU, no
network): the PDU tests put a stand-in backend in front of it."""

from pathlib import Path

TIMEOUT_S = 0.5
# nothing listens there: whatever the stand-in backend does not stand in for fails at once
NOWHERE = "http://127.0.0.1:9"
PDU_URL = f"{NOWHERE}/pdu/{{index}}/{{value}}"


def env_file(tmp_path: Path, model: str = "simplerest", host: str = PDU_URL,
             driver: str = f"timeout: {TIMEOUT_S}", strategy: str = "") -> Path:
    """``driver`` and ``strategy``: the NetworkPDUDriver's and RTLabStrategy's settings,
    as the inside of a YAML flow mapping."""
    path = tmp_path / "env.yaml"
    path.write_text(f"""\
imports:
  - rtlab.lab
targets:
  main:
    resources:
      NetworkSerialPort:
        host: 127.0.0.1
        port: 9
      NetworkPowerPort:
        model: {model}
        host: '{host}'
        index: 3
      VirtualSDMuxDevice:
        url: {NOWHERE}/sdmux/imx6q-01
      VirtualMassStorage:
        path: /nonexistent
    drivers:
      NetworkPDUDriver: {{{driver}}}
      SerialDriver: {{}}
      ShellDriver:
        login_prompt: 'login: '
        username: root
        prompt: '# '
      VirtualSDMuxDriver: {{}}
      VirtualStorageDriver: {{}}
      RTLabStrategy: {{{strategy}}}
images:
  sdcard: /nonexistent/sdcard.img
""")
    return path
