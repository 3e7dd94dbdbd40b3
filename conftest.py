"""pytest for the whole repository: rtlab's plugin (the suite's options, a result record
for every case, atomic JUnit; rtlab/pytestplugin/) beside labgrid's, which its entry point
loads."""

pytest_plugins = [
    "rtlab.pytestplugin.hooks", "rtlab.pytestplugin.junit", "rtlab.pytestplugin.queue",
]
