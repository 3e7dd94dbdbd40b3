"""Environment variables through which rtlab hands the processes it starts what must not
be on their command lines: a database URL may hold a password, and a command line is
every user's to read (ps, /proc/*/cmdline) and CI logs echo it."""

QUEUE_VARIABLE = "RTLAB_QUEUE_DB"
"""The results store that holds a shared plan's cases (rtlab.run.queue), as `rtlab run`
hands it to the places' runs and their suites."""
