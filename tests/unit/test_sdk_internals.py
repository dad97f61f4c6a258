"""What ``server/sdk_internals.py`` relies on exists, with the shape it expects, on the
installed a2a-sdk: each private attribute of the SDK's request handler, the method the fast
path overrides, and the gRPC client's error mapping. A failure here means the SDK moved:
move the adapter, this test and the lock together (docs in the adapter's docstring)."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import grpc
import pytest
from a2a.client.errors import A2AClientError, A2AClientTimeoutError
from a2a.server.agent_execution import AgentExecutor, RequestContextBuilder
from a2a.server.agent_execution.active_task_registry import ActiveTaskRegistry
from a2a.server.cluster import VersionedTaskStore
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import AgentCapabilities, AgentCard, AgentInterface

from library_ioa.plugins.a2a.server import sdk_internals
from library_ioa.plugins.a2a.server.fast.handler import FastSendHandler
from library_ioa.plugins.a2a.server.handler import CountingRequestHandler


class _Idle(AgentExecutor):
    async def execute(self, context: Any, event_queue: Any) -> None:
        raise AssertionError("never run")

    async def cancel(self, context: Any, event_queue: Any) -> None:
        raise AssertionError("never run")


def _card() -> AgentCard:
    return AgentCard(
        name="pinned",
        description="d",
        version="1",
        supported_interfaces=[
            AgentInterface(url="http://x/", protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
    )


@pytest.fixture
def handler() -> DefaultRequestHandler:
    return DefaultRequestHandler(
        agent_executor=_Idle(),
        task_store=InMemoryTaskStore(),
        agent_card=_card(),
        validate_input_modes=True,
    )


def test_the_adapter_names_the_sdk_version_it_was_written_against() -> None:
    assert sdk_internals.SDK_VERSION == "1.3.0"
    assert "Written against a2a-sdk 1.3.0" in (sdk_internals.__doc__ or "")
    assert metadata.version("a2a-sdk").startswith("1.3.")


def test_default_request_handler_is_the_v2_handler_the_adapter_reads() -> None:
    assert DefaultRequestHandler.__name__ == "DefaultRequestHandlerV2"


def test_each_handler_attribute_exists_with_its_expected_kind(
    handler: DefaultRequestHandler,
) -> None:
    expected: dict[str, Any] = {
        "_agent_card": AgentCard,
        "_validate_input_modes": bool,
        "_request_context_builder": RequestContextBuilder,
        "_versioned_store": VersionedTaskStore,
        "_push_sender": type(None),
        "_event_stream": type(None),
        "_active_task_registry": ActiveTaskRegistry,
    }
    assert set(expected) == set(sdk_internals.HANDLER_ATTRIBUTES)
    for name, kind in expected.items():
        assert isinstance(vars(handler)[name], kind), name


def test_each_accessor_returns_the_handlers_own_object(handler: DefaultRequestHandler) -> None:
    own = vars(handler)
    card = sdk_internals.agent_card(handler)
    assert card.name == "pinned" and card.capabilities.streaming
    assert sdk_internals.validates_input_modes(handler) is True
    assert sdk_internals.request_context_builder(handler) is own["_request_context_builder"]
    assert sdk_internals.versioned_store(handler) is own["_versioned_store"]
    assert sdk_internals.push_sender(handler) is None
    assert sdk_internals.event_stream(handler) is None
    assert sdk_internals.active_task_registry(handler) is own["_active_task_registry"]


def test_the_given_push_sender_and_event_stream_are_the_ones_read() -> None:
    sender, stream = object(), object()
    handler = DefaultRequestHandler(
        agent_executor=_Idle(),
        task_store=InMemoryTaskStore(),
        agent_card=_card(),
        push_sender=sender,  # type: ignore[arg-type]
        event_stream=stream,  # type: ignore[arg-type]
    )
    assert sdk_internals.push_sender(handler) is sender
    assert sdk_internals.event_stream(handler) is stream
    assert sdk_internals.validates_input_modes(handler) is False


def test_the_methods_called_on_what_is_read_take_the_arguments_passed() -> None:
    build = inspect.signature(RequestContextBuilder.build)
    assert {"context", "params", "task_id", "context_id", "task"} <= set(build.parameters)
    get_or_create = inspect.signature(ActiveTaskRegistry.get_or_create)
    assert {"task_id", "call_context", "context_id", "create_task_if_missing"} <= set(
        get_or_create.parameters
    )
    assert inspect.iscoroutinefunction(ActiveTaskRegistry.get_or_create)
    assert list(inspect.signature(ActiveTaskRegistry.get).parameters) == ["self", "task_id"]
    assert inspect.iscoroutinefunction(ActiveTaskRegistry.get)
    get = inspect.signature(VersionedTaskStore.get)
    assert list(get.parameters)[:3] == ["self", "task_id", "context"]


def test_the_declared_override_overrides_an_sdk_method_of_the_same_shape() -> None:
    name = sdk_internals.SETUP_ACTIVE_TASK
    assert {
        ("library_ioa.plugins.a2a.server.fast.handler", "FastSendHandler", name)
    } == sdk_internals.OVERRIDES
    sdk = getattr(DefaultRequestHandler, name)
    ours = getattr(FastSendHandler, name)
    assert inspect.iscoroutinefunction(sdk) and inspect.iscoroutinefunction(ours)
    assert ours is not sdk
    assert list(inspect.signature(sdk).parameters) == ["self", "params", "call_context"]
    assert list(inspect.signature(ours).parameters) == ["self", "params", "call_context"]
    assert name not in vars(CountingRequestHandler)  # FastSendHandler's super() is the SDK's


def test_the_grpc_error_mapping_exists_and_maps_as_relied_on() -> None:
    module, name = sdk_internals.MAP_GRPC_ERROR
    mapping = getattr(importlib.import_module(module), name)
    assert inspect.isfunction(mapping)
    assert list(inspect.signature(mapping).parameters) == ["e"]

    def failed(code: grpc.StatusCode) -> grpc.aio.AioRpcError:
        empty = grpc.aio.Metadata()
        return grpc.aio.AioRpcError(code, empty, empty, details="it failed")

    with pytest.raises(A2AClientTimeoutError):
        sdk_internals.map_grpc_error(failed(grpc.StatusCode.DEADLINE_EXCEEDED))
    with pytest.raises(A2AClientError, match="gRPC Error UNAVAILABLE: it failed"):
        sdk_internals.map_grpc_error(failed(grpc.StatusCode.UNAVAILABLE))


def test_private_names_are_exactly_what_the_adapter_declares() -> None:
    assert {
        *sdk_internals.HANDLER_ATTRIBUTES,
        sdk_internals.SETUP_ACTIVE_TASK,
        sdk_internals.MAP_GRPC_ERROR[1],
    } == sdk_internals.PRIVATE_NAMES
    assert all(name.startswith("_") for name in sdk_internals.PRIVATE_NAMES)


def _check_script(monkeypatch: pytest.MonkeyPatch) -> Any:
    path = Path(__file__).resolve().parents[2] / "scripts" / "check-sdk-internals.py"
    spec = importlib.util.spec_from_file_location("check_sdk_internals", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # its dataclasses look it up
    spec.loader.exec_module(module)
    return module


_PROBE = """\
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.client.transports.grpc import _map_grpc_error
import a2a.client.transports.grpc as transport
from library_ioa.plugins.a2a.server.handler import CountingRequestHandler


def read(handler):
    getattr(handler, "_push_config_store")
    transport._map_grpc_error(handler)
    return handler._versioned_store, DefaultRequestHandler._setup_active_task


class Sub(CountingRequestHandler):
    async def _cancel_local(self):
        return await super()._setup_active_task(1, 2)

    def ours(self):
        return self._unary, self._lock, self._runs
"""


def test_the_check_passes_on_this_tree_and_names_each_use_elsewhere(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    check = _check_script(monkeypatch)
    _, found = check.problems()
    assert found == []
    probe = check.ROOT / "runtime" / "library_ioa" / "sdk_probe.py"
    _, found = check.problems({probe: _PROBE})
    where = "runtime/library_ioa/sdk_probe.py"
    assert found == [
        f"{where}:2: imports a2a.client.transports.grpc._map_grpc_error",
        f"{where}:8: getattr of the SDK's private _push_config_store",
        f"{where}:9: reads transport._map_grpc_error of a2a",
        f"{where}:10: reads DefaultRequestHandler._setup_active_task of a2a",
        f"{where}:10: reads the SDK's private _versioned_store",
        f"{where}:14: Sub overrides or shadows the SDK's private _cancel_local",
        f"{where}:15: Sub uses the SDK's private _setup_active_task",
    ]
