"""The measurement on the board: the suite file (which scenarios, intervals and rt-tests),
the loads and their proof, one measurement window, and the rt-tests' command lines and
strict parsers.

- :mod:`.suite`       ``suite.yaml``: scenarios, intervals, rt-tests, per-board load settings
- :mod:`.loads`       load profiles as data → shell on the board, and the proof each ran
- :mod:`.window`      one window: loads started, the program run under them, the evidence
- :mod:`.cyclictest`  cyclictest's command line, its ``--json`` and histogram parsers
- :mod:`.rttests`     the other rt-tests, a module per tool: command lines, parsers,
                      functional verdicts; :mod:`.rttests.board` runs and judges them
- :mod:`.sysinfo`     the board's kernel and CPUs, read through its shell
"""
