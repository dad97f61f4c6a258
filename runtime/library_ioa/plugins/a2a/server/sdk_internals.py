"""Every private a2a-sdk name MAS Lab relies on, reached through this module only.

Written against a2a-sdk 1.3.0 (:data:`SDK_VERSION`); the lock file keeps the image on it.
``tests/unit/test_sdk_internals.py`` pins each name below on the installed SDK, and
``scripts/check-sdk-internals.py`` fails when a private ``a2a`` name is used anywhere else.
Moving the SDK means moving this module, its test and the lock together.

What is relied on, and why:

- ``DefaultRequestHandler`` (``DefaultRequestHandlerV2``) attributes set in its
  ``__init__`` (:data:`HANDLER_ATTRIBUTES`), read by ``CountingRequestHandler`` and the
  fast path (``FastSendHandler``) so that they validate, build request contexts, store,
  push, stream and park a task exactly as the SDK's handler does:
  ``_agent_card`` (the card it checks capabilities and input modes against),
  ``_validate_input_modes`` (whether it checks them), ``_request_context_builder`` (the
  ids and context of a new task), ``_versioned_store`` (the store, versioned or adapted),
  ``_push_sender`` and ``_event_stream`` (what an ``ActiveTask`` is given), and
  ``_active_task_registry`` (where a task that waits for input is parked, and followed).
- ``DefaultRequestHandler._setup_active_task`` (:data:`SETUP_ACTIVE_TASK`): overridden by
  ``FastSendHandler`` (the one declared override, :data:`OVERRIDES`), the only point where
  a message naming a running task can wait behind the running turn before the SDK's
  ``ActiveTask`` takes it. The override stays in its class (the SDK calls it by name),
  and so does its ``super()`` call of the SDK's own.
- ``a2a.client.transports.grpc._map_grpc_error`` (:func:`map_grpc_error`): ``GrpcSend``
  maps a failed stub call to the same error the SDK's client raises. Imported on first
  use, so that a process without gRPC calls does not load the SDK's gRPC client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    import grpc
    from a2a.server.request_handlers import DefaultRequestHandler

__all__ = [
    "HANDLER_ATTRIBUTES",
    "MAP_GRPC_ERROR",
    "OVERRIDES",
    "PRIVATE_NAMES",
    "SDK_VERSION",
    "SETUP_ACTIVE_TASK",
    "active_task_registry",
    "agent_card",
    "event_stream",
    "map_grpc_error",
    "push_sender",
    "request_context_builder",
    "validates_input_modes",
    "versioned_store",
]

SDK_VERSION = "1.3.0"
"""The a2a-sdk release this module was written against."""

HANDLER_ATTRIBUTES = (
    "_agent_card",
    "_validate_input_modes",
    "_request_context_builder",
    "_versioned_store",
    "_push_sender",
    "_event_stream",
    "_active_task_registry",
)
"""Instance attributes of ``DefaultRequestHandler`` read here (module docstring)."""

SETUP_ACTIVE_TASK = "_setup_active_task"
"""The ``DefaultRequestHandler`` method ``FastSendHandler`` overrides."""

MAP_GRPC_ERROR = ("a2a.client.transports.grpc", "_map_grpc_error")
"""The module and name of the SDK client's gRPC error mapping."""

OVERRIDES = frozenset(
    {("library_ioa.plugins.a2a.server.fast.handler", "FastSendHandler", SETUP_ACTIVE_TASK)}
)
"""(module, class, method): the private SDK methods our classes override, each declared
here; ``scripts/check-sdk-internals.py`` accepts the override and its ``super()`` call there."""

PRIVATE_NAMES = frozenset({*HANDLER_ATTRIBUTES, SETUP_ACTIVE_TASK, MAP_GRPC_ERROR[1]})
"""Every private SDK name this module reaches."""


def agent_card(handler: DefaultRequestHandler) -> Any:
    """The ``AgentCard`` the SDK's handler was given."""
    return handler._agent_card


def validates_input_modes(handler: DefaultRequestHandler) -> bool:
    """Whether the SDK's handler checks a message's input modes against its card."""
    return bool(handler._validate_input_modes)


def request_context_builder(handler: DefaultRequestHandler) -> Any:
    """The SDK handler's ``RequestContextBuilder`` (given, or its simple default)."""
    return handler._request_context_builder


def versioned_store(handler: DefaultRequestHandler) -> Any:
    """The SDK handler's ``VersionedTaskStore`` (the store given, or its legacy adapter)."""
    return handler._versioned_store


def push_sender(handler: DefaultRequestHandler) -> Any:
    """The SDK handler's ``PushNotificationSender``, or ``None``."""
    return handler._push_sender


def event_stream(handler: DefaultRequestHandler) -> Any:
    """The SDK handler's ``TaskEventStream``, or ``None``."""
    return handler._event_stream


def active_task_registry(handler: DefaultRequestHandler) -> Any:
    """The SDK handler's ``ActiveTaskRegistry``."""
    return handler._active_task_registry


def map_grpc_error(exc: grpc.aio.AioRpcError) -> NoReturn:
    """Raise the error the SDK's gRPC client raises for a failed call."""
    from a2a.client.transports.grpc import _map_grpc_error

    _map_grpc_error(exc)
