"""``mas-ctl`` as a client of any A2A agent: ``ask``, ``card``, ``tasks``, ``task``,
``cancel-task`` and the remote forms of ``chat`` and ``tui``.

- :mod:`~mas.ctl.client.targets`: what TARGET names (a URL, or ``APP/AGENT`` in a cluster);
- :mod:`~mas.ctl.client.credentials`: headers, bearer tokens and the CA bundle;
- :mod:`~mas.ctl.client.connection`: the card, the transport and the SDK client;
- :mod:`~mas.ctl.client.grpc_calls`: the channel and status codes, on the gRPC transport only;
- :mod:`~mas.ctl.client.exchange`: one turn, or one followed task, as turn events;
- :mod:`~mas.ctl.client.turn_output` and :mod:`~mas.ctl.client.output`: what is printed;
- :mod:`~mas.ctl.client.running`: one command's event loop, Ctrl-C and its exit code;
- :mod:`~mas.ctl.client.errors`: the one-line errors and their exit codes.
"""
