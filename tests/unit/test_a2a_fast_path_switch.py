"""``a2a.fast_path``: on by default; off, the exposure is built from the SDK's pieces only.

The exposure is built, never started: no socket is opened.
"""

from __future__ import annotations

from typing import Any

import pytest
from a2a.server.request_handlers import GrpcHandler

from library_ioa.plugins.a2a.exposure import A2AExposure
from library_ioa.plugins.a2a.server.fast.grpc_handler import FastGrpcHandler
from library_ioa.plugins.a2a.server.fast.hot_lane import HotLane
from library_ioa.plugins.a2a.server.fast.jsonrpc import fast_endpoint
from mas.infra.models import A2AOptions, AgentManifest, Application, Endpoint


class _Mailbox:
    """Never called: the exposure is not started."""

    def submit(self, turn: Any) -> Any:  # pragma: no cover
        raise AssertionError("not served")


def endpoint(**a2a: Any) -> Endpoint:
    return Endpoint(url="http://127.0.0.1:18401", usage="deploy", a2a={"grpc_port": 18411, **a2a})


def built(end: Endpoint, **options: Any) -> A2AExposure:
    return A2AExposure(
        agent_id="a",
        manifest=AgentManifest(),
        endpoint=end,
        mailbox=_Mailbox(),
        grpc=True,
        **options,
    )


def grpc_servicers(exposure: A2AExposure) -> list[type]:
    assert exposure._grpc is not None
    return [type(servicer) for servicer, _ in exposure._grpc._servicers]


def test_the_fast_path_is_on_by_default() -> None:
    assert A2AOptions().fast_path is True
    assert Endpoint(usage="deploy").a2a.fast_path is True


def test_an_application_turns_it_off() -> None:
    app = Application.model_validate(
        {
            "apiVersion": "infra.maslab.io/v1",
            "kind": "Application",
            "metadata": {"name": "x"},
            "spec": {
                "agency": {"agents": {"a": {}}},
                "endpoints": {"a": {"usage": "deploy", "a2a": {"fast_path": False}}},
            },
        }
    )
    assert app.spec.endpoints["a"].a2a.fast_path is False


def test_a_fast_path_that_is_not_a_boolean_is_refused() -> None:
    with pytest.raises(ValueError, match="fast_path"):
        A2AOptions.model_validate({"fast_path": "sometimes"})


def test_on_the_exposure_serves_the_fast_routes() -> None:
    exposure = built(endpoint())
    assert exposure.fast_path is True
    assert fast_endpoint(exposure.app.routes) is not None
    assert isinstance(exposure._http._app, HotLane)
    assert FastGrpcHandler in grpc_servicers(exposure)


@pytest.mark.parametrize(
    "end, options",
    [(endpoint(fast_path=False), {}), (endpoint(), {"fast_send": False})],
    ids=["a2a.fast_path false", "fast_send=False"],
)
def test_off_the_exposure_serves_the_sdk_path_only(end: Endpoint, options: Any) -> None:
    exposure = built(end, **options)
    assert exposure.fast_path is False
    assert fast_endpoint(exposure.app.routes) is None  # the SDK's JSON-RPC dispatcher
    assert not isinstance(exposure._http._app, HotLane)
    servicers = grpc_servicers(exposure)
    assert GrpcHandler in servicers
    assert FastGrpcHandler not in servicers
    assert exposure.handler._mailbox is None  # no fast blocking send, no fast stream


def test_fast_send_overrides_the_endpoint() -> None:
    exposure = built(endpoint(fast_path=False), fast_send=True)
    assert exposure.fast_path is True
    assert fast_endpoint(exposure.app.routes) is not None
