"""bench/pipeline_times.py, the demo's pipeline driver, as the pipeline tests use it."""

import importlib.util

from rtlab.util.paths import REPO_ROOT

_spec = importlib.util.spec_from_file_location("pipeline_times",
                                               REPO_ROOT / "bench" / "pipeline_times.py")
pipeline_times = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pipeline_times)
