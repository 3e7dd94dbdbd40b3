"""rtlab's pytest plugin for the on-board suite (tests/target/), named by the root
conftest.py beside labgrid's own.

- :mod:`.hooks`   the suite's options (--rt-duration, --rt-suite, …), the case record's
                  life (started, verdict from pytest's reports, written whatever happens),
                  the console log attached to a case that did not pass
- :mod:`.record`  the case record and how pytest's reports make its verdict
- :mod:`.junit`   JUnit written atomically (a killed run leaves the old file or none)
"""
