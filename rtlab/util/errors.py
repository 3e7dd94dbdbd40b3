"""Infrastructure errors: the board, its console or the lab failed. A test case that ends
in one is an ``error`` with the one-line cause, never a latency pass or fail."""


class InfrastructureError(Exception):
    """The board, its console or the lab failed: the test is an error, never a verdict on
    latency."""


class PowerError(InfrastructureError):
    """The PDU refused, failed or did not answer."""


class FlashError(InfrastructureError):
    """The SD card could not be written, or did not hold the image afterwards."""


class BootError(InfrastructureError):
    """The board did not reach a shell on its console."""


class ConsoleLost(InfrastructureError):
    """The serial console dropped while the board was in use."""


class BoardCrashed(InfrastructureError):
    """The kernel panicked or the board stopped answering while in use."""
