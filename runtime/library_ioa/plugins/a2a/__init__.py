"""The A2A protocol plugins: client (agent_comm), exposure (agent_expose), AgentCard.

Import order of the SDK (a2a-sdk 1.x): a module that imports the SDK's server side
(``a2a.server.routes``, ``a2a.compat.v0_3.grpc_handler``) must import ``a2a.client`` first.
Those server modules import ``a2a.compat.v0_3.extension_headers``, which imports
``a2a.client``, whose ``client_factory`` imports ``a2a.compat.v0_3.grpc_transport``, which
imports the half-initialised ``extension_headers`` back: the ``ImportError`` is swallowed and
the factory's 0.3 gRPC transport stays ``None`` for the life of the process, so a client
built later speaks gRPC 1.0 to a peer that advertises only 0.3. ``exposure`` and
``server.fast.jsonrpc`` therefore start with ``import a2a.client``;
``tests/a2a/test_a2a_import_order.py`` pins it.
"""
