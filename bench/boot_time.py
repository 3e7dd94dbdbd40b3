"""Boot-to-login time of each virtual board and kernel flavour.

Builds (or reuses) the SD images, boots each one the way the virtual rack does (bootloader
emulation from the card, QEMU with its console on a Unix socket) and prints the seconds
from QEMU start to the `rtlab-<board> login:` prompt.

    .venv/bin/python bench/boot_time.py [--runs N] [--board imx6q] [--flavour rt]
"""

from __future__ import annotations

import argparse
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rtlab.image.build import build_image
from rtlab.platform.boards import BOARD_MODELS, FLAVOURS, board_model
from rtlab.util import paths
from rtlab.vlab.qemu import qemu_command, read_boot_config


def boot_once(board: str, sd_image: Path, timeout_s: float) -> float:
    model = board_model(board)
    prompt = f"rtlab-{board} login: ".encode()
    with tempfile.TemporaryDirectory(prefix=f"boot-time-{board}-") as tmp:
        work = Path(tmp)
        # Boot a copy: the guest writes to its data partition.
        card = work / "card.img"
        subprocess.run(["cp", "--sparse=always", str(sd_image), str(card)], check=True)
        boot = read_boot_config(card, work / "boot")
        sock_path = work / "console.sock"
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
            listener.bind(str(sock_path))
            listener.listen(1)
            argv = qemu_command(model, boot, card, sock_path)
            started = time.monotonic()
            qemu = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
            )
            try:
                listener.settimeout(timeout_s)
                conn, _ = listener.accept()
                with conn:
                    conn.settimeout(0.5)
                    seen = b""
                    while prompt not in seen:
                        if time.monotonic() - started > timeout_s:
                            raise TimeoutError(f"{board}: no login prompt in {timeout_s:.0f} s")
                        try:
                            data = conn.recv(65536)
                        except TimeoutError:
                            continue
                        if not data:
                            err = qemu.stderr.read().decode() if qemu.stderr else ""
                            raise RuntimeError(f"{board}: console closed before login: {err}")
                        seen = (seen + data)[-4096:]
                    return time.monotonic() - started
            finally:
                qemu.kill()
                qemu.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--board", choices=sorted(BOARD_MODELS), action="append")
    parser.add_argument("--flavour", choices=FLAVOURS, action="append")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args()
    if shutil.which("qemu-system-arm") is None:
        print("qemu-system-arm is not installed", file=sys.stderr)
        return 2
    print(f"{'board':8} {'flavour':8} boot-to-login (s)")
    for board in args.board or sorted(BOARD_MODELS):
        for flavour in args.flavour or FLAVOURS:
            image = build_image(
                board, flavour, paths.debs_dir(), paths.images_dir(), progress=lambda _: None
            ).sd_image
            times = [boot_once(board, image, args.timeout) for _ in range(args.runs)]
            figures = " ".join(f"{t:5.1f}" for t in times)
            summary = f"  (median {statistics.median(times):.1f})" if len(times) > 1 else ""
            print(f"{board:8} {flavour:8} {figures}{summary}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
