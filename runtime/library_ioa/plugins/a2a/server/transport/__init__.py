"""Guards on the wire in front of the SDK: bad input is answered before the SDK reads it.

- :mod:`.corrections`: where the SDK's wire behaviour departs from the protocol (REST content
  type, JSON-RPC content-type error, card caching headers, the ``A2A-Version`` header),
  ``HttpCorrections`` mends it; :mod:`.grpc_corrections`: ``GrpcVersionCheck``, the same
  version check on gRPC (imported only when gRPC is served);
- :mod:`.limits`: ``RequestLimits``, ASGI middleware bounding bodies and checking the
  JSON-RPC envelope;
- :mod:`.compat_params`: the params of the 0.3 JSON-RPC methods, answered -32602 when wrong;
- :mod:`.stream_errors`: a 0.3 HTTP+JSON stream that fails before its first event is
  answered as the error it is;
- :mod:`.grpc_decode`: a gRPC request whose bytes do not decode is INVALID_ARGUMENT;
- :mod:`.finite_values`: a request holding NaN or an infinity is invalid params, on every
  transport.

Connection-level limits shared by every listener (head and body size and time, idle time,
connection counts) live in :mod:`library_ioa.serving`.
"""
