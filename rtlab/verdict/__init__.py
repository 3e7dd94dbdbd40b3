"""From figures to a verdict: the gate's limits, the statistics beside it, and the judges
every runner shares (the result record that keeps it all is rtlab.artifacts.record).

- :mod:`.thresholds`  ``thresholds.yaml``: load, validate, look up, judge
- :mod:`.histogram`   one CPU's cyclictest histogram: percentiles, clipping, merging
- :mod:`.tail`        the tail estimate (GPD fit) and the maximum a run should have
- :mod:`.comparison`  the regression test of a run against its baseline runs
- :mod:`.variants`    what a kernel variant costs against another (campaigns)
- :mod:`.case`        the one judge of a latency case (both runners): plan, windows, verdict
- :mod:`.baseline`    which stored runs may stand as a case's baseline
- :mod:`.sequential`  when a case measured in windows has been measured long enough
- :mod:`.judge`       the limits on what a case measured, and an rt-test judged
- :mod:`.trace_choice`  which latency cases arm the kernel's trace, and why
- :mod:`.cli`         ``rtlab thresholds check|show`` (suggest|replay: :mod:`rtlab.tuning`)
"""
