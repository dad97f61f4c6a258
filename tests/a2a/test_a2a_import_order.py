"""A process that imports our A2A server side first still gets the SDK's 0.3 gRPC client.

The SDK's import cycle (``library_ioa/plugins/a2a/__init__.py``) made the factory pick its
1.0 gRPC transport for a 0.3-only card in such a process. Each case runs in a fresh
interpreter: the import order is the state under test.
"""

from __future__ import annotations

import subprocess
import sys

from tests.deadlines import COLD_START

PROBE = """
import asyncio
import {module}
import grpc
from a2a.client import ClientConfig, ClientFactory
from a2a.types import AgentCapabilities, AgentCard, AgentInterface


async def main() -> None:
    card = AgentCard(
        name="legacy",
        description="legacy",
        version="1",
        capabilities=AgentCapabilities(),
        supported_interfaces=[
            AgentInterface(protocol_binding="GRPC", protocol_version="0.3", url="127.0.0.1:9")
        ],
    )
    channels = []

    def channel(target: str) -> grpc.aio.Channel:
        channels.append(grpc.aio.insecure_channel(target))
        return channels[-1]

    config = ClientConfig(supported_protocol_bindings=["GRPC"], grpc_channel_factory=channel)
    client = ClientFactory(config).create(card)
    print(type(client._transport).__name__)
    await client.close()
    for made in channels:
        await made.close()


asyncio.run(main())
"""


# the modules that import the SDK's server side; each probe runs in its own interpreter,
# side by side
SERVER_SIDE = ("library_ioa.plugins.a2a.exposure", "library_ioa.plugins.a2a.server.fast.jsonrpc")


def test_the_0_3_grpc_client_survives_importing_the_server_first() -> None:
    probes = {
        module: subprocess.Popen(
            [sys.executable, "-c", PROBE.format(module=module)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for module in SERVER_SIDE
    }
    try:
        answers = {m: probe.communicate(timeout=COLD_START) for m, probe in probes.items()}
    finally:
        for probe in probes.values():
            if probe.poll() is None:
                probe.kill()
                probe.communicate()
    for module, (stdout, stderr) in answers.items():
        assert probes[module].returncode == 0, (module, stderr)
        assert (module, stdout.strip()) == (module, "CompatGrpcTransport"), stderr
