"""`make test-kernel`: the virtual rack's fixtures, shared with tests/integration (this
folder is outside pytest's testpaths, so that `make test` never starts a kernel build)."""

from tests.integration.conftest import own_health_records, vlab  # noqa: F401
