"""rtlab: hardware-in-the-loop CI for real-time Linux kernels.

The packages from the ground floor up; each imports only the ones below it, never a later
stage (import-linter holds it: ``[tool.importlinter]`` in pyproject.toml, ``make lint``):

- :mod:`rtlab.util`          paths, the infrastructure error, file readers that name the line,
                             atomic writes, GitLab's API, commands other packages add to
- :mod:`rtlab.artifacts`     the files between the stages, typed, with their readers, writers
                             and format versions: kernel.json, the image manifest, a campaign
                             variant's identity, the result record, a kernel's .config
- :mod:`rtlab.platform`      the board models and Debian's archive, which every stage shares
- :mod:`rtlab.kernel`        a board's kernel: built from ``kernel/`` (fragments), or Debian's
- :mod:`rtlab.image`         the SD card image, its bmap and manifest, from Debian's packages
- :mod:`rtlab.lab`           labgrid: the strategy (flash, boot, log in), drivers (the PDU),
                             reservations, the places' health, env file checks
- :mod:`rtlab.measure`       on the board: the suite file, loads, a measurement window, rt-tests
- :mod:`rtlab.verdict`       thresholds, statistics, the judges, which cases trace
- :mod:`rtlab.store`         the results store (SQLAlchemy: SQLite or PostgreSQL), ingest
- :mod:`rtlab.report`        trends, histograms, comparisons: HTML, PNG, metrics, summary
- :mod:`rtlab.tuning`        threshold suggestions and replays from the stored history,
                             proposed as the lab's own merge request
- :mod:`rtlab.run`           ``rtlab run``: the suite on one place or several sharing a plan,
                             records and JUnit kept whatever happens, the places' health checks
- :mod:`rtlab.vlab`          the virtual rack (QEMU boards, PDU, SD muxes, serial) and the demo
- :mod:`rtlab.campaign`      a study across kernel variants (``campaigns/*.yaml``): the file,
                             the stages looped per variant, its report
- :mod:`rtlab.bisect`        ``rtlab bisect``: a regression bisected to its commit and kernel
                             option, each step decided by the sequential verdict on the rack
- :mod:`rtlab.pytestplugin`  the on-board suite's pytest options, case records, atomic JUnit
- :mod:`rtlab.lava`          the other backend: the suite as LAVA jobs, their logs as records
- :mod:`rtlab.lavaserver`    a LAVA server on this machine to run those jobs

report and tuning import neither of each other, nor do pytestplugin and lava, nor
campaign and bisect.

Every package with commands registers them the same way (``<package>/cli.py``:
``register(subparsers)``); :mod:`rtlab.cli` calls them in its order, a package that adds
to another's command (tuning to ``thresholds``, lavaserver to ``lava``, campaign to
``report``) after it.
"""
