"""labgrid glue: importing this package registers rtlab's resources, drivers and strategy
with labgrid's target factory (environment files name it under ``imports:``), and makes a
remote place's resources cost one look at the coordinator per update (rtlab.lab.remotepoll)."""

from rtlab.lab import drivers, pdu, remotepoll, resources, strategy

remotepoll.install()

__all__ = ["drivers", "pdu", "resources", "strategy"]
