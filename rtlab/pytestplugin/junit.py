"""pytest plugin: JUnit goes to a temporary file that replaces the real one only once it
is complete and on disk, so a runner killed while pytest writes it leaves the previous
file or none, never half a file. pytest's junitxml writes the report in place."""

import os

import pytest
from _pytest import junitxml

FINAL_KEY = pytest.StashKey[str]()


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    xml = config.stash.get(junitxml.xml_key, None)
    if xml is None:
        return
    final = xml.logfile
    config.stash[FINAL_KEY] = final
    directory, name = os.path.split(final)
    xml.logfile = os.path.join(directory, f".{name}.{os.getpid()}.tmp")


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Runs after junitxml's own sessionfinish wrote the temporary file."""
    config = session.config
    final = config.stash.get(FINAL_KEY, None)
    xml = config.stash.get(junitxml.xml_key, None)
    if final is None or xml is None or not os.path.exists(xml.logfile):
        return
    with open(xml.logfile, "rb") as written:
        os.fsync(written.fileno())
    os.replace(xml.logfile, final)
    # the terminal summary names the file it finds here
    xml.logfile = final
