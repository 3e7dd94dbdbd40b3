"""One request to a running QEMU over its QMP socket (the machine protocol of QEMU's
monitor): what the rack changes on a board while it runs."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

QMP_TIMEOUT_S = 10.0


class QmpError(Exception):
    """QEMU refused the request, or did not answer it."""


async def qmp_execute(socket_path: Path, command: str, **arguments: Any) -> Any:
    """Run ``command`` and return QEMU's answer; QEMU's events on the way are skipped."""
    try:
        return await asyncio.wait_for(_execute(socket_path, command, arguments),
                                      QMP_TIMEOUT_S)
    except (TimeoutError, OSError, json.JSONDecodeError) as error:
        raise QmpError(f"QMP {command} on {socket_path}: {error!r}") from error


async def _execute(socket_path: Path, command: str, arguments: dict[str, Any]) -> Any:
    reader, writer = await asyncio.open_unix_connection(str(socket_path))
    try:
        await reader.readline()  # the greeting
        for request in ({"execute": "qmp_capabilities"},
                        {"execute": command, "arguments": arguments}):
            writer.write(json.dumps(request).encode() + b"\n")
            await writer.drain()
            while True:
                line = await reader.readline()
                if not line:
                    raise QmpError(f"QMP {command}: QEMU closed the connection")
                answer = json.loads(line)
                if "error" in answer:
                    raise QmpError(f"QMP {request['execute']}: {answer['error']}")
                if "return" in answer:
                    break
        return answer["return"]
    finally:
        writer.close()
