"""Labs that run LAVA instead of labgrid: the same suite as LAVA jobs (the job path).

- :mod:`.plan`         what a job measures (board, flavour, cases), kept in the job itself
- :mod:`.board`        the scripts the board runs, made by rtlab.measure.window (not a
                       second copy)
- :mod:`.templates`    the Jinja2 environment of jobs/: YAML-safe filters, file:line errors
- :mod:`.render`       jobs/ templates (Jinja2) → a LAVA job for one board and flavour
- :mod:`.validate`     jobs against LAVA's own schema (Debian's lava-common), file:line errors
- :mod:`.schema_check` that schema check, run by the system's python3 (it has lava-common)
- :mod:`.joblog`       a finished job's log: the board's output, LAVA's results and status
- :mod:`.records`      log + plan → result records judged by thresholds.yaml
                       (rtlab.verdict.judge)
- :mod:`.junit`        the records as JUnit XML, as the labgrid path's pytest writes it
- :mod:`.server`       submit and fetch through lavacli, a client of any LAVA server; what a
                       server's answers mean
- :mod:`.local`        a QEMU job run here with Debian's lava-run, without a server
- :mod:`.cli`          ``rtlab lava …``

The LAVA instance on this machine (``rtlab lava server``: its settings, setup and programs)
is rtlab.lavaserver, above this package: it uses the job path, nothing here imports it.
"""
