"""The LAVA instance on this machine: a LAVA server and worker on loopback, for the jobs of
rtlab.lava (``rtlab lava submit|fetch`` use it as any LAVA server). It sits above the job
path: it may use rtlab.lava, which never imports it.

- :mod:`.instance`  a LAVA server on this machine (env/lava-server.yaml): its folder, settings,
                    whether it is set up (its setup stamp)
- :mod:`.provision` ``rtlab lava server setup``: database, user and token, worker, devices
- :mod:`.daemons`   its programs (PostgreSQL, gunicorn, publisher, scheduler, worker) without
                    systemd: start, stop, status
- :mod:`.cli`       ``rtlab lava server …``, an action of rtlab.lava.cli's ``rtlab lava``
"""
