"""Errors of ``library_ioa``: the protocol plugins and the listeners they share.

The tree::

    LibraryError           base of everything raised by library_ioa
    ├── AgentCardError     (also ValueError) an endpoint's fields cannot make its AgentCard
    │                      (plugins.a2a.agentcard)
    ├── AuthConfigError    (also ValueError) ``a2a.auth`` names a credential the environment
    │                      does not hold (serving.auth)
    ├── ListenError        (also OSError) a listener cannot bind or start (serving.listeners)
    ├── TaskStoreError     (also OSError) the task store cannot be configured or reached
    │                      (plugins.a2a.server.stores.task_stores)
    └── BadBody            a request body refused before the SDK reads it; answered to the
                           client, never raised past the middleware
                           (plugins.a2a.server.transport.limits)

Each class lives beside the code that raises it and keeps its standard-library base, so a
caller that catches ``ValueError`` or ``OSError`` still catches it. The private signals
``_ClientGone`` (transport.limits), ``_HeadRefused`` (serving.http_guard) and ``_Failed``
(push.delivery) derive from :class:`LibraryError` too and never leave their module.

What a turn sees of a peer or a store (``PeerProtocolError``, ``PeerUnavailable``,
``HistoryError``, ...) is :mod:`mas.runtime.errors`: the plugins raise the runtime's own
errors where the runtime catches them.
"""

from __future__ import annotations


class LibraryError(Exception):
    """Base of the errors raised by ``library_ioa``."""
