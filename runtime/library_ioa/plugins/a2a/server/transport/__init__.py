"""Guards on the wire in front of the SDK: bad input is answered before the SDK reads it.

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
