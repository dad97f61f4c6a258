# The node tier's fixtures; `pytest tests/node` runs it on its own.
from .agency import desk, operator_release  # noqa: F401
from .fixtures import node_alive, node_cluster, two_nodes  # noqa: F401
