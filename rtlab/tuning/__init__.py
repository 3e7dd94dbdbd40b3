"""Threshold tuning from the results store: ``rtlab thresholds suggest`` proposes limits from
the measured history and writes them into ``thresholds.yaml``
(:mod:`rtlab.tuning.suggest`, which describes the method); ``rtlab thresholds replay`` judges
the stored runs by a thresholds file (:mod:`rtlab.tuning.replay`); ``rtlab thresholds
propose`` makes both for every board (:mod:`rtlab.tuning.proposal`) and publishes them as a
merge request (:mod:`rtlab.tuning.publish`, git through :mod:`rtlab.tuning.gitbranch`)."""

from rtlab.tuning.evidence import Method, high_quantile, nice_ceil
from rtlab.tuning.replay import relabel, replay, thresholds_at
from rtlab.tuning.suggest import suggest

__all__ = ["Method", "high_quantile", "nice_ceil", "relabel", "replay", "suggest",
           "thresholds_at"]
