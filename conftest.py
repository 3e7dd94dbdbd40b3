"""pytest for the whole repository: rtlab's plugin (the suite's options, a result record
for every case, atomic JUnit; rtlab/pytestplugin/) beside labgrid's, which its entry point
loads."""

pytest_plugins = [
    "rtlab.pytestplugin.hooks", "rtlab.pytestplugin.junit", "rtlab.pytestplugin.queue",
]

# helpers that test modules both import and load as a plugin (their fixtures): rewritten
# before the first import, so pytest does not warn that it could not
import pytest  # noqa: E402

pytest.register_assert_rewrite("tests.bisect_repo")
