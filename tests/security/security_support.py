"""Support of the security tests: agents served in-process the way mas-ctl serve does."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

from tests.fast_path import fast_path_options
from tests.ports import free_port
from tests.security.served_process import app_document

from library_ioa.plugins.a2a.exposure import A2AExposure
from mas.ctl.session.exposure import Listeners, bind_listeners
from mas.ctl.session.host import RuntimeHost
from mas.infra.models import SecretKeyRef
from mas.infra.wiring import wire
from mas.runtime.registry import default_registry

BEARER_REF = SecretKeyRef(name="a2a-inbound", key="token")
API_KEY_HEADER = "X-Api-Key"
AUTH = {
    "schemes": [
        {"type": "bearer", "secret_key_ref": BEARER_REF.model_dump()},
        {"type": "api_key", "name": API_KEY_HEADER, "value_env": "SEC_TEST_API_KEY"},
    ]
}
V1 = {"A2A-Version": "1.0"}


@dataclass(frozen=True)
class Secrets:
    """The distinctive secret values of one test."""

    token: str
    api_key: str


def rpc_send(text: str) -> dict[str, Any]:
    """A JSON-RPC SendMessage request."""
    message = {"role": "ROLE_USER", "messageId": uuid.uuid4().hex, "parts": [{"text": text}]}
    return {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}


@contextlib.asynccontextmanager
async def serve(
    agents: Mapping[str, Mapping[str, Any]],
    endpoints: Mapping[str, Any],
    agent: str,
    *,
    grpc: bool = True,
    **options: Any,
) -> AsyncIterator[A2AExposure]:
    """Serve ``agent`` of this Application on loopback (bind_listeners, as mas-ctl serve)."""
    wired = wire(app_document(agents, endpoints, entry=agent), default_registry().known_plugins())
    host = RuntimeHost.build(wired, [agent])
    listeners: Listeners | None = None
    try:
        listeners = await bind_listeners(
            wired, host, agents=[agent], grpc=grpc, drain_timeout=1, **options
        )
        exposure: Any = listeners.get(agent).exposure
        yield exposure
    finally:
        if listeners is not None:
            await listeners.aclose()
        await host.aclose()


def echo_endpoint(**a2a: Any) -> dict[str, Any]:
    """A deployed endpoint on a free loopback port (with a gRPC port)."""
    a2a.setdefault("grpc_port", free_port())
    return {
        "url": f"http://127.0.0.1:{free_port()}",
        "usage": "deploy",
        "a2a": fast_path_options(a2a),
    }


AUTH_REF = SecretKeyRef(name="front-auth", key="token")
HEADER_REF = SecretKeyRef(name="back-token", key="token")
ENV_REF = SecretKeyRef(name="model-key", key="api-key")


def secured_app() -> dict[str, Any]:
    """Two deployed agents: inbound auth, a Secret header to the peer, a Secret env var."""
    return {
        "apiVersion": "infra.maslab.io/v1",
        "kind": "Application",
        "metadata": {"name": "desk", "namespace": "team-a"},
        "spec": {
            "agency": {
                "entry": "front",
                "agents": {"front": {"spec": {"delegates_to": ["back"]}}, "back": {}},
            },
            "endpoints": {
                "front": {
                    "usage": "deploy",
                    "a2a": {
                        "grpc_port": 9000,
                        "auth": {
                            "schemes": [
                                {"type": "bearer", "secret_key_ref": AUTH_REF.model_dump()},
                                {"type": "api_key", "value_env": "FRONT_KEY"},
                            ]
                        },
                    },
                },
                "back": {
                    "usage": "use-and-deploy",
                    "headers": {"Authorization": {"secret_key_ref": HEADER_REF.model_dump()}},
                },
            },
            "runtime": {"env": [{"name": "FRONT_KEY", "secret_key_ref": ENV_REF.model_dump()}]},
        },
    }


def document(a2a: dict[str, Any]) -> dict[str, Any]:
    """A one-agent Application whose deployed endpoint has these ``a2a`` options."""
    return {
        "apiVersion": "infra.maslab.io/v1",
        "kind": "Application",
        "metadata": {"name": "x"},
        "spec": {
            "agency": {"agents": {"a": {}}},
            "endpoints": {"a": {"url": "http://127.0.0.1:8000", "usage": "deploy", "a2a": a2a}},
        },
    }
