"""The loopback ports the virtual rack serves on: free before it starts, and held by its
own services once they run. A machine that serves a real lab may already run a labgrid
coordinator on the default port; the rack must refuse rather than register its boards
there."""

import errno
import os
import socket

import attr
import psutil

from rtlab.vlab.config import LOOPBACK, VlabConfig


class PortTaken(RuntimeError):
    """A port of the rack is held by another process; the message says which and how to
    move the rack."""


@attr.frozen
class RackPort:
    port: int
    setting: str
    """The key of the rack config that sets it, e.g. ``boards.imx6q-01.serial_port``."""
    service: str


def rack_ports(config: VlabConfig) -> tuple[RackPort, ...]:
    ports = [RackPort(config.coordinator_port, "coordinator_port", "the labgrid coordinator"),
             RackPort(config.api_port, "api_port", "the PDU and SD mux API")]
    for board in config.boards:
        ports.append(RackPort(board.serial_port, f"boards.{board.place}.serial_port",
                              f"{board.place}'s serial console"))
        if board.network_port is not None:
            ports.append(RackPort(board.network_port, f"boards.{board.place}.network_port",
                                  f"{board.place}'s forwarded network port"))
    return tuple(ports)


@attr.frozen
class Listener:
    process: psutil.Process | None
    """None for a socket whose process this user cannot see."""
    address: str
    """Where it listens: ``127.0.0.1``, ``[::1]``, ``[::]``..."""


def listeners(port: int) -> list[Listener]:
    """Who listens on a TCP port of this host, on any address, IPv4 or IPv6 (a client of
    ``localhost`` may reach an IPv6 listener first)."""
    held = []
    for conn in psutil.net_connections("tcp"):
        if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port:
            ip = conn.laddr.ip
            address = f"[{ip}]" if ":" in ip else ip
            try:
                held.append(Listener(psutil.Process(conn.pid) if conn.pid else None, address))
            except psutil.NoSuchProcess:
                continue
    return held


def holders(port: int) -> str | None:
    """Who listens on ``port``, as the error names them; None when nobody does."""
    found = listeners(port)
    return ", ".join(f"{_describe(listener.process)} listening on {listener.address}"
                     for listener in found) if found else None


def _describe(process: psutil.Process | None) -> str:
    if process is None:
        return "a process this user cannot see"
    try:
        command = " ".join(process.cmdline()) or process.name()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return f"pid {process.pid}"
    return f"pid {process.pid} ({command})"


def _bindable(port: int) -> bool:
    """Whether the port is free on IPv4's and IPv6's loopback (where the host has IPv6)."""
    for family, address in ((socket.AF_INET, LOOPBACK), (socket.AF_INET6, "::1")):
        try:
            probe = socket.socket(family, socket.SOCK_STREAM)
        except OSError as error:
            if error.errno == errno.EAFNOSUPPORT:
                continue  # a host without IPv6 has no IPv6 listener either
            raise
        with probe:
            # a port our own last run left in TIME_WAIT is free to the rack's services,
            # which set SO_REUSEADDR too; a listener is not
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((address, port))
            except OSError as error:
                if error.errno == errno.EADDRINUSE:
                    return False
                if error.errno == errno.EADDRNOTAVAIL:
                    continue  # IPv6 without a loopback address
                raise
    return True


def taken_message(config: VlabConfig, setting: str, holder: str) -> str:
    rack_port = next(p for p in rack_ports(config) if p.setting == setting)
    return (f"port {rack_port.port} on {LOOPBACK} ({rack_port.service}, "
            f"'{rack_port.setting}' in {os.fspath(config.path)}) is taken by {holder}: stop "
            f"that process, or set '{rack_port.setting}' to a free port")


def check_free(config: VlabConfig) -> None:
    """Refuse to start while another process holds one of the rack's ports."""
    problems = []
    for rack_port in rack_ports(config):
        # a listener on another address (IPv6's wildcard with IPV6_V6ONLY, another
        # interface) leaves the loopback bindable, but is found among the listeners
        if _bindable(rack_port.port) and not listeners(rack_port.port):
            continue
        holder = holders(rack_port.port) or "a socket that is not listening (no process found)"
        problems.append(taken_message(config, rack_port.setting, holder))
    if problems:
        raise PortTaken("the virtual rack cannot start: " + "; ".join(problems))


def held_by(port: int, pid: int) -> bool:
    """Whether ``pid`` (or a process it started) listens on ``port``, and nothing else."""
    holders = [listener.process for listener in listeners(port)]
    if not holders:
        return False
    for process in holders:
        if process is None:
            return False
        family = {process.pid, *(parent.pid for parent in _parents(process))}
        if pid not in family:
            return False
    return True


def _parents(process: psutil.Process) -> list[psutil.Process]:
    try:
        return process.parents()
    except psutil.NoSuchProcess:
        return []
