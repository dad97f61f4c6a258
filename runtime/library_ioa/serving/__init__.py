"""What every listener of an agent process shares, whichever protocol it serves.

The A2A exposure (:mod:`library_ioa.plugins.a2a`), the MCP door
(:mod:`library_ioa.plugins.mcp`) and ``mas-ctl serve`` (its metrics and health listener)
bind, bound, authenticate and measure their sockets with this one package:

- :mod:`.listeners`: ``HttpListener`` (uvicorn on a socket it binds itself, so port 0 works
  and a port in use is a clear ``ListenError``); :mod:`.grpc_listener`: ``GrpcListener``
  (``grpc.aio``, imported only by a process that serves gRPC);
- :mod:`.http_guard`: ``HttpLimits``, the bounds of every HTTP connection (head and body
  size and time, idle time, connection count); :mod:`.grpc_guard`: ``GrpcLimits``, the
  same for the gRPC listener;
- :mod:`.auth`: inbound credentials (``a2a.auth``: bearer tokens, API keys), checked on
  HTTP; :mod:`.grpc_auth`: the same on gRPC; :mod:`.principals`: who a request is and what
  it owns (``Principal``, ``owned_session``); :mod:`.callers` and :mod:`.grpc_callers`: the
  caller check of an agent that verifies workload identities (``a2a.auth`` included), in
  place of :mod:`.auth` on each transport;
- :mod:`.metrics`: the Prometheus text of the process's registries (``GET /metrics``);
- :mod:`.json_answers` and :mod:`.asgi`: a JSON answer sent from ASGI middleware, and the
  ASGI types the middleware is written against.

Nothing here imports a protocol plugin (``library_ioa.plugins``); the plugins and
``mas.ctl`` import it, never each other's internals (the import-linter contracts in
``pyproject.toml``).
"""
