"""rtlab: hardware-in-the-loop CI for real-time Linux kernels.

The packages in the order data flows, from a push to a verdict and a report:

- :mod:`rtlab.kernel`        a board's kernel: built from ``kernel/`` (fragments), or Debian's
- :mod:`rtlab.image`         the SD card image, its bmap and manifest, from Debian's packages
- :mod:`rtlab.lab`           labgrid: the strategy (flash, boot, log in), drivers, ``rtlab run``,
                             reservations, the places' health, env file checks
- :mod:`rtlab.vlab`          the virtual rack (QEMU boards, PDU, SD muxes, serial) and the demo
- :mod:`rtlab.lava`          the other backend: the suite as LAVA jobs, their logs as records,
                             and a LAVA server on this machine to run them
- :mod:`rtlab.measure`       on the board: the suite file, loads, a measurement window, rt-tests
- :mod:`rtlab.verdict`       thresholds, statistics, the judges, the result record
- :mod:`rtlab.pytestplugin`  the on-board suite's pytest options, case records, atomic JUnit
- :mod:`rtlab.store`         the results store (SQLAlchemy: SQLite or PostgreSQL), ingest
- :mod:`rtlab.report`        trends, histograms, comparisons: HTML, PNG, metrics, summary
- :mod:`rtlab.tuning`        threshold suggestions and replays from the stored history,
                             proposed as the lab's own merge request
- :mod:`rtlab.campaign`      a study across kernel variants (``campaigns/*.yaml``): the file,
                             each variant's identity, the stages above looped per variant
- :mod:`rtlab.util`          paths, the infrastructure error, file readers that name the line

Every package with commands registers them the same way (``<package>/cli.py``:
``register(subparsers)``); :mod:`rtlab.cli` calls them in this order.
"""
