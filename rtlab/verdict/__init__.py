"""From figures to a verdict: the gate's limits, the statistics beside it, the judges every
runner shares, and the result record that keeps it all.

- :mod:`.thresholds`  ``thresholds.yaml``: load, validate, look up, judge
- :mod:`.stats`       percentiles, tail estimates, comparisons between runs
- :mod:`.case`        the one judge of a latency case (both runners): plan, windows, verdict
- :mod:`.baseline`    which stored runs may stand as a case's baseline
- :mod:`.sequential`  when a case measured in windows has been measured long enough
- :mod:`.judge`       the limits on what a case measured, and an rt-test judged
- :mod:`.record`      the result record (``rtlab.result/2``): read, write atomically
- :mod:`.cli`         ``rtlab thresholds check|show`` (suggest|replay: :mod:`rtlab.tuning`)
"""
