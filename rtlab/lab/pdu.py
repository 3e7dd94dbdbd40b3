"""A network PDU whose requests are bounded in time: labgrid's ``NetworkPowerDriver`` with
a timeout on every request, and what a request given up on can still do.

labgrid's HTTP power backends wait for an answer without a timeout, so a PDU that stalls
would stall the lab. ``NetworkPDUDriver`` drives the same backends (the modules in
``labgrid.driver.power``, named by the ``NetworkPowerPort``'s ``model``) through their
public functions ``power_set(host, port, index, value)`` and ``power_get(host, port,
index)``, each request in a thread of its own that is given up on after ``timeout``. Such
a request can not be cancelled, and the PDU may still carry it out: the next request waits
for it (up to ``timeout`` more), and :meth:`NetworkPDUDriver.late_on` tells whether a
power-on given up on was carried out after the last switch-off, so that whoever lets go of
the board can switch it off again and read the outlet back (:meth:`confirm_off`).

It offers labgrid's ``PowerProtocol`` (``on``, ``off``, ``cycle``) and ``get``, so that
``labgrid-client power`` and rtlab's strategy use it as they would ``NetworkPowerDriver``.
"""

import logging
import time
from collections.abc import Callable
from importlib import import_module
from threading import Thread
from urllib.parse import urlparse

import attr
from labgrid.driver.common import Driver
from labgrid.driver.powerdriver import PowerResetMixin
from labgrid.factory import target_factory
from labgrid.protocol import PowerProtocol
from labgrid.resource import NetworkPowerPort
from labgrid.step import step
from labgrid.util.proxy import proxymanager

from rtlab.util.errors import PowerError

logger = logging.getLogger("rtlab.pdu")
# where labgrid's power backends live: the port's `model` names one of them
BACKENDS = "labgrid.driver.power"
PDU_TIMEOUT_S = 30.0


def _one_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    return lines[-1] if lines else type(error).__name__


class PduTimeout(PowerError):
    """The PDU did not answer a request within the driver's ``timeout``."""


class _PduRequest:
    """One request to a network PDU, in a thread of its own: labgrid's HTTP power backends
    wait for an answer without a timeout, so a request that gets none can only be given
    up on, never cancelled. It is kept until it ends, because the PDU may still carry it
    out."""

    def __init__(self, what: str, call: Callable[[], object]) -> None:
        self.what = what
        self.sent = time.monotonic()
        self.answered: float | None = None
        self.result: object = None
        self.error: BaseException | None = None
        self.reported = False
        self._thread = Thread(target=self._run, args=(call,), name=f"pdu-{what}", daemon=True)
        self._thread.start()

    def _run(self, call: Callable[[], object]) -> None:
        try:
            self.result = call()
        except BaseException as error:  # noqa: BLE001 - handed to whoever waits for it
            self.error = error
        finally:
            self.answered = time.monotonic()

    def wait(self, timeout: float) -> bool:
        """True once it has ended (answered or failed), waiting at most ``timeout``."""
        self._thread.join(max(0.0, timeout))
        return not self._thread.is_alive()

    def outcome(self) -> str:
        return "ok" if self.error is None else _one_line(self.error)


@target_factory.reg_driver
@attr.s(eq=False)
class NetworkPDUDriver(Driver, PowerResetMixin, PowerProtocol):
    """Switches a ``NetworkPowerPort`` as labgrid's ``NetworkPowerDriver`` does, each
    request to the PDU bounded in time.

    Args:
        delay: seconds between off and on in :meth:`cycle`, and the least time
            ``RTLabStrategy`` keeps the board off before switching it on again
        timeout: seconds the PDU may take to answer a request; a request given up on
            makes the next one wait for it up to ``timeout`` more
    """

    bindings = {"port": NetworkPowerPort}

    delay: float = attr.ib(default=2.0, converter=float)
    timeout: float = attr.ib(default=PDU_TIMEOUT_S, converter=float)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self.backend = import_module(f"{BACKENDS}.{self.port.model}")
        # (host, TCP port) as the backend takes them; set on activation
        self.endpoint: tuple[str, int | None] = (self.port.host, None)
        # requests given up on after `timeout`; when the last switch-off that the PDU
        # confirmed was sent
        self._abandoned: list[_PduRequest] = []
        self._off_sent: float | None = None

    @property
    def outlet(self) -> str:
        return f"outlet {self.port.index}"

    @property
    def readable(self) -> bool:
        """Whether the backend can read the outlet's state back."""
        return callable(getattr(self.backend, "power_get", None))

    def on_activate(self) -> None:
        # as NetworkPowerDriver: through labgrid's proxy (an SSH tunnel when the resource
        # needs one) to the backend's fixed TCP port, or to the port of a URL in `host`
        # (the rest and simplerest backends), else to `host` as it is
        backend_port = getattr(self.backend, "PORT", None)
        url = urlparse(self.port.host)
        if backend_port:
            self.endpoint = proxymanager.get_host_and_port(self.port, force_port=backend_port)
        elif url.hostname and (url.port or url.scheme in ("http", "https")):
            port = url.port or (80 if url.scheme == "http" else 443)
            host, port = proxymanager.get_host_and_port(self.port, force_port=port)
            query = f"?{url.query}" if url.query else ""
            user = f"{url.netloc.split('@')[0]}@" if "@" in url.netloc else ""
            self.endpoint = (f"{url.scheme}://{user}{host}:{port}{url.path}{query}", None)
        else:
            self.endpoint = (self.port.host, None)

    @Driver.check_active
    @step()
    def on(self) -> None:
        self._switch(True)

    @Driver.check_active
    @step()
    def off(self) -> None:
        self._switch(False)

    @Driver.check_active
    @step()
    def cycle(self) -> None:
        self.off()
        time.sleep(self.delay)
        self.on()

    @Driver.check_active
    def get(self) -> bool:
        """The outlet's state as the PDU reports it (True: on). A ``PowerError`` if the
        backend can not read it, a ``PduTimeout`` if the PDU does not answer within
        ``timeout``; the backend's own error if it fails."""
        if not self.readable:
            raise PowerError(f"PDU: the {self.port.model} backend can not read "
                             f"{self.outlet} back")
        host, port = self.endpoint
        pdu = self.backend
        request = _PduRequest("get", lambda: pdu.power_get(host, port, self.port.index))
        if not request.wait(self.timeout):
            raise PduTimeout(f"PDU: no answer within {self.timeout:g} s to reading "
                             f"{self.outlet} back")
        if request.error is not None:
            raise request.error
        return bool(request.result)

    def late_on(self) -> bool:
        """Whether a power-on given up on earlier was carried out after the last
        switch-off was sent, so that the board may be on now: waits up to ``timeout`` for
        such requests to end. A ``PowerError`` if one is still unanswered then (the outlet
        may switch on whenever the PDU carries it out). It sends nothing to the PDU, so it
        needs no activation (a driver that never switched has nothing to tell)."""
        ons = [request for request in self._abandoned if request.what == "on"]
        if not ons:
            return False
        self._await_abandoned(self.timeout)
        pending = [request for request in ons if request.answered is None]
        if pending:
            oldest = time.monotonic() - min(request.sent for request in pending)
            logger.error("PDU: a request to power on on %s is still unanswered after %.0f s: "
                         "the outlet may switch on whenever the PDU carries it out",
                         self.outlet, oldest)
            raise PowerError(f"PDU: a request to power on on {self.outlet} is still "
                             f"unanswered after {oldest:.0f} s; the outlet may switch on "
                             "later")
        return any(request.answered is not None
                   and (self._off_sent is None or request.answered > self._off_sent)
                   for request in ons)

    @Driver.check_active
    def confirm_off(self) -> list[str]:
        """After switching off again: the outlet's state as the PDU reports it, where the
        backend can tell. Returns what could not be made sure of (the outlet reads on);
        an outlet that can not be read is logged, not returned."""
        if not self.readable:
            logger.warning("PDU: %s cannot be read back; switched off again unverified",
                           self.outlet)
            return []
        try:
            on = self.get()
        except Exception as error:  # noqa: BLE001 - logged; the switch-off was confirmed
            cause = "no answer" if isinstance(error, PduTimeout) else _one_line(error)
            logger.warning("PDU: could not read %s back after switching it off again: %s",
                           self.outlet, cause)
            return []
        if on:
            return [f"PDU: {self.outlet} reads on after switching it off again"]
        logger.info("PDU: %s reads off", self.outlet)
        return []

    def _switch(self, on: bool) -> None:
        """One request, given up on after ``timeout``. It is sent once the requests given
        up on earlier have ended (or had ``timeout`` more): of two requests the PDU holds
        at once, it decides which it carries out last. labgrid's step of ``on``/``off``
        stays in the caller's thread; the request's thread calls the backend alone, since
        a thread left hanging inside a step would corrupt labgrid's step tracking."""
        what = "on" if on else "off"
        self._await_abandoned(self.timeout)
        host, port = self.endpoint
        pdu = self.backend
        request = _PduRequest(what, lambda: pdu.power_set(host, port, self.port.index, on))
        if not request.wait(self.timeout):
            self._abandoned.append(request)
            raise PduTimeout(f"PDU: no answer within {self.timeout:g} s to power "
                             f"{what} on {self.outlet}")
        if request.error is not None:
            raise request.error
        if not on:
            self._off_sent = request.sent
        logger.info("power %s on %s", what, self.outlet)

    def _await_abandoned(self, timeout: float) -> None:
        """Give the requests abandoned earlier up to ``timeout`` in all to end, and log
        what each did when it ended."""
        deadline = time.monotonic() + timeout
        for request in self._abandoned:
            if request.answered is None:
                request.wait(deadline - time.monotonic())
            if request.answered is not None and not request.reported:
                request.reported = True
                logger.warning("PDU: the abandoned request to power %s on %s ended %.0f s "
                               "after it was sent: %s", request.what, self.outlet,
                               request.answered - request.sent, request.outcome())
        pending = [request for request in self._abandoned if request.answered is None]
        if pending:
            logger.warning("PDU: %s on %s still unanswered",
                           ", ".join(f"power {r.what} (sent {time.monotonic() - r.sent:.0f} s "
                                     "ago)" for r in pending), self.outlet)
