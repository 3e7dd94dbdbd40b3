"""Threshold tuning from the results store: ``rtlab thresholds suggest`` proposes limits from
the measured history and writes them into ``thresholds.yaml``
(:mod:`rtlab.tuning.suggest`, which describes the method); ``rtlab thresholds replay`` judges
the stored runs by a thresholds file (:mod:`rtlab.tuning.replay`)."""

from rtlab.tuning.evidence import Method, high_quantile, nice_ceil
from rtlab.tuning.replay import relabel, replay, thresholds_at
from rtlab.tuning.suggest import suggest

__all__ = ["Method", "high_quantile", "nice_ceil", "relabel", "replay", "suggest",
           "thresholds_at"]
