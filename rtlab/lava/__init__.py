"""Labs that run LAVA instead of labgrid: the same suite as LAVA jobs.

- :mod:`.plan`     what a job measures (board, flavour, cases), kept in the job itself
- :mod:`.board`    the scripts the board runs, made by rtlab.measure.window (not a second copy)
- :mod:`.render`   jobs/ templates (Jinja2) → a LAVA job for one board and flavour
- :mod:`.validate` jobs against LAVA's own schema (Debian's lava-common), file:line errors
- :mod:`.joblog`   a finished job's log: the board's output, LAVA's results and status
- :mod:`.records`  log + plan → result records judged by thresholds.yaml (rtlab.verdict.judge)
- :mod:`.junit`    the records as JUnit XML, as the labgrid path's pytest writes it
- :mod:`.server`   submit and fetch through lavacli; what a server's answers mean
- :mod:`.local`    a QEMU job run here with Debian's lava-run
- :mod:`.instance`  a LAVA server on this machine (env/lava-server.yaml): its folder, settings
- :mod:`.provision` ``rtlab lava server setup``: database, user and token, worker, devices
- :mod:`.daemons`   its programs (PostgreSQL, gunicorn, publisher, scheduler, worker) without
                    systemd: start, stop, status
- :mod:`.cli`      ``rtlab lava …``
"""
