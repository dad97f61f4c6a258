"""The fast path: a second pipeline for the hot requests, answering exactly as the SDK path.

A blocking or streaming send that starts a new task skips the SDK's per-task machinery
(``ActiveTask``, its queues and ``TaskManager``); everything else goes to the SDK's
``DefaultRequestHandler`` (:mod:`library_ioa.plugins.a2a.server.handler`). The endpoint's
``a2a.fast_path`` (on by default) switches the whole package off, and the differential tests
hold both paths to the same answers.

- :mod:`.handler`: ``FastSendHandler``, the SDK handler with a short blocking send;
- :mod:`.stream`: ``StreamRun``, a streamed turn of a new task, and ``TaskBook``;
- :mod:`.jsonrpc`: the JSON-RPC route with a short path for 1.0 ``SendMessage`` and
  ``SendStreamingMessage``; :mod:`.hot_lane`: those posts answered in front of the
  middleware chain when it would change nothing;
- :mod:`.grpc_handler`: ``FastGrpcHandler``, the SDK's gRPC servicer with a short
  ``SendMessage``;
- :mod:`.codec`: cheaper equivalents of the SDK's parse and serialise steps, each falling
  back to the SDK's own.

Every private SDK name used here is reached through
:mod:`library_ioa.plugins.a2a.server.sdk_internals`.
"""
