"""``rtlab run``: the suite on the lab's places, its results kept whatever happens.

- :mod:`.runner`  one place: reserve, flash and boot (labgrid), the on-board suite
                  (pytest), records and JUnit, the place's health
- :mod:`.sharing` several places of one board type sharing a plan (``--boards``), and an
                  error record for every case of it that no place measured
- :mod:`.queue`   the plan's cases in the results store: each taken by one place
- :mod:`.doctor`  ``rtlab lab doctor``: what a pipeline needs of the lab, checked first
                  (the lab's half: rtlab.lab.preflight)
- :mod:`.cli`     ``rtlab run``, ``rtlab lab health|check|doctor``
"""
