# Lets `pytest tests/envtest` run on its own; the suite-wide tests/conftest.py
# imports the same fixtures from fixtures.py.
from .fixtures import control_plane, envtest_namespace  # noqa: F401


def pytest_configure(config):
    config.addinivalue_line("markers", "envtest: needs the envtest control plane binaries")
