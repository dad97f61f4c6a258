"""The A2A server side of an agent: how a request becomes a turn, on two paths.

An HTTP request, outside in (``exposure.A2AExposure`` assembles the chain; gRPC has the
same stages as interceptors and servicers)::

    library_ioa.serving     listener and connection limits, then inbound auth
    tracing                 the request's span and log line, when tracing is on
                            (grpc_tracing on gRPC)
    fast/hot_lane           a plain 1.0 send, answered here when every guard below would
                            pass it untouched (fast path only)
    transport/              wire guards in front of the SDK: protocol corrections, body
                            limits and the JSON-RPC envelope, 0.3 params and stream errors
                            (gRPC: grpc_corrections' version check, undecodable bytes)
    routes                  the SDK's REST routes; JSON-RPC: the SDK's route, or
                            fast/jsonrpc on the fast path (gRPC: fast/grpc_handler)
    handler                 the SDK's DefaultRequestHandler, counted and bounded
                            (list_pages, transport/finite_values, push/ownership);
                            fast/handler and fast/stream shorten a new task's send
    executor, publisher     a send becomes one turn on the session mailbox; the turn's
                            events become A2A events
    stores/, push/          where tasks, push configs and conversations are kept; push
                            URL policy, caps and delivery off the event path

Beside them: ``sdk_internals`` (every private a2a-sdk name, in one place, with the SDK
version it was written against), ``metrics`` (the A2A request counters) and ``ids`` (the
ids the server makes up).

Both paths answer alike: the fast path (``a2a.fast_path``, on by default) takes only the
requests it shortens and hands every other to the SDK path, and the differential tests
hold the two to the same answers.
"""
