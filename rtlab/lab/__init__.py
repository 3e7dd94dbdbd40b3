"""labgrid glue: importing this package registers rtlab's resources, drivers and strategy
with labgrid's target factory (environment files name it under ``imports:``)."""

from rtlab.lab import drivers, resources, strategy

__all__ = ["drivers", "resources", "strategy"]
