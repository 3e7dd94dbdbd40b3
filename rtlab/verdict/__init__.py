"""From figures to a verdict: the gate's limits, the statistics beside it, the judges every
runner shares, and the result record that keeps it all.

- :mod:`.thresholds`  ``thresholds.yaml``: load, validate, look up, judge
- :mod:`.stats`       percentiles, tail estimates, comparisons between runs
- :mod:`.judge`       a latency case and an rt-test judged, whichever runner measured them
- :mod:`.record`      the result record (``rtlab.result/2``): read, write atomically
- :mod:`.cli`         ``rtlab thresholds check|show`` (suggest|replay: :mod:`rtlab.tuning`)
"""
