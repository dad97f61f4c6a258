"""The SDK's default request handler, counting every request by method and outcome.

Every transport (JSON-RPC, HTTP+JSON, gRPC, and the 0.3 adapters of each) goes through
one request handler, so counting here covers them all, and so do the no-auth rule for
attaching push configs (``anonymous_push_create``: :mod:`.push.ownership`), the bounds on a
``ListTasks`` page (``list_limits``: :mod:`.list_pages`), the refusal of numbers JSON
cannot carry (:mod:`.transport.finite_values`): a request holding NaN or an infinity is answered as
invalid params before it runs, and counted as such; and the bound on open
``SubscribeToTask`` streams (``max_subscriptions``): one past it is refused with
``UnsupportedOperationError`` before it holds anything.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import AsyncGenerator, Awaitable
from typing import Any, TypeVar

from a2a.server.request_handlers import DefaultRequestHandler
from a2a.utils.errors import A2AError, UnsupportedOperationError

from library_ioa.plugins.a2a.server import sdk_internals
from library_ioa.plugins.a2a.server.executor import STREAMING_STATE
from library_ioa.plugins.a2a.server.list_pages import ListLimits, bounded_list
from library_ioa.plugins.a2a.server.metrics import A2A_REQUEST_SECONDS, A2A_REQUESTS
from library_ioa.plugins.a2a.server.push.ownership import refuse_anonymous_create
from library_ioa.plugins.a2a.server.tracing import request_done, transport_of
from library_ioa.plugins.a2a.server.transport.finite_values import refuse_non_finite
from mas.infra.models import DEFAULT_MAX_SUBSCRIPTIONS

T = TypeVar("T")


def _outcome(exc: BaseException) -> str:
    return type(exc).__name__ if isinstance(exc, A2AError) else "internal_error"


class CountingRequestHandler(DefaultRequestHandler):
    """``DefaultRequestHandler`` plus ``maslab_a2a_requests_total{agent,method,transport,outcome}``,
    the request's span attributes and its INFO line (``server/tracing.py``)."""

    def __init__(
        self,
        *args: Any,
        agent_id: str,
        anonymous_push_create: bool = True,
        list_limits: ListLimits | None = None,
        max_subscriptions: int = DEFAULT_MAX_SUBSCRIPTIONS,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.agent_id = agent_id
        self.list_limits = list_limits or ListLimits()
        self.max_subscriptions = max_subscriptions
        self._subscriptions = 0  # SubscribeToTask streams open now, on every transport
        self.anonymous_push_create = anonymous_push_create
        # The metric children by labels: ``labels()`` takes a lock and builds a key each time.
        self._counters: dict[tuple[str, str, str], Any] = {}
        self._timers: dict[str, Any] = {}

    async def _unary(
        self, method: str, call: Awaitable[T], context: Any = None, params: Any = None
    ) -> T:
        started = time.perf_counter()
        try:
            try:
                refuse_non_finite(params)
            except BaseException:
                if inspect.iscoroutine(call):
                    call.close()  # never run: no "never awaited" warning
                raise
            result = await call
        except BaseException as exc:
            self._done(method, _outcome(exc), started, context=context, params=params, result=None)
            raise
        self._done(method, "ok", started, context=context, params=params, result=result)
        return result

    def _done(
        self, method: str, outcome: str, started: float, *, context: Any, params: Any, result: Any
    ) -> None:
        seconds = time.perf_counter() - started
        transport = transport_of(context)
        key = (method, transport, outcome)
        counter = self._counters.get(key)
        if counter is None:
            counter = self._counters[key] = A2A_REQUESTS.labels(self.agent_id, *key)
        counter.inc()
        timer = self._timers.get(method)
        if timer is None:
            timer = self._timers[method] = A2A_REQUEST_SECONDS.labels(self.agent_id, method)
        timer.observe(seconds)
        request_done(self.agent_id, method, transport, outcome, seconds, params, result)

    async def _stream(
        self,
        method: str,
        stream: AsyncGenerator[Any, None],
        context: Any = None,
        params: Any = None,
    ) -> AsyncGenerator[Any, None]:
        started = time.perf_counter()
        outcome, first = "ok", None
        counted = False
        try:
            refuse_non_finite(params)
            if method == "SubscribeToTask":
                self._open_subscription()
                counted = True
            async for item in stream:
                if first is None:
                    first = item[0] if isinstance(item, list) and item else item
                yield item
        except BaseException as exc:
            outcome = _outcome(exc)
            raise
        finally:
            if counted:
                self._subscriptions -= 1
            self._done(method, outcome, started, context=context, params=params, result=first)

    def _open_subscription(self) -> None:
        """Count one more SubscribeToTask stream; past ``max_subscriptions`` open ones it is
        refused (each holds its own copy of the task while it lasts: docs/security.md)."""
        if self._subscriptions >= self.max_subscriptions:
            raise UnsupportedOperationError(
                message=f"{self._subscriptions} SubscribeToTask streams are open, the most "
                f"this agent serves (a2a.responses.max_subscriptions); try again later, or "
                "poll with GetTask"
            )
        self._subscriptions += 1

    async def on_message_send(self, params: Any, context: Any) -> Any:
        context.state[STREAMING_STATE] = False
        return await self._unary(
            "SendMessage", super().on_message_send(params, context), context, params
        )

    def on_message_send_stream(self, params: Any, context: Any) -> AsyncGenerator[Any, None]:
        context.state[STREAMING_STATE] = True
        return self._stream(
            "SendStreamingMessage", super().on_message_send_stream(params, context), context, params
        )

    async def on_get_task(self, params: Any, context: Any) -> Any:
        return await self._unary("GetTask", super().on_get_task(params, context), context, params)

    async def on_list_tasks(self, params: Any, context: Any) -> Any:
        async def page(request: Any) -> Any:
            return await super(CountingRequestHandler, self).on_list_tasks(request, context)

        listed = bounded_list(page, params, self.list_limits)  # server/list_pages.py
        return await self._unary("ListTasks", listed, context, params)

    async def on_cancel_task(self, params: Any, context: Any) -> Any:
        return await self._unary(
            "CancelTask", super().on_cancel_task(params, context), context, params
        )

    def on_subscribe_to_task(self, params: Any, context: Any) -> AsyncGenerator[Any, None]:
        return self._stream(
            "SubscribeToTask", super().on_subscribe_to_task(params, context), context, params
        )

    async def on_create_task_push_notification_config(self, params: Any, context: Any) -> Any:
        return await self._unary(
            "CreateTaskPushNotificationConfig",
            self._create_push_config(params, context),
            context,
            params,
        )

    async def _create_push_config(self, params: Any, context: Any) -> Any:
        card = sdk_internals.agent_card(self)
        if not self.anonymous_push_create and card.capabilities.push_notifications:
            refuse_anonymous_create(context)
        return await super().on_create_task_push_notification_config(params, context)

    async def on_get_task_push_notification_config(self, params: Any, context: Any) -> Any:
        return await self._unary(
            "GetTaskPushNotificationConfig",
            super().on_get_task_push_notification_config(params, context),
            context,
            params,
        )

    async def on_list_task_push_notification_configs(self, params: Any, context: Any) -> Any:
        return await self._unary(
            "ListTaskPushNotificationConfigs",
            super().on_list_task_push_notification_configs(params, context),
            context,
            params,
        )

    async def on_delete_task_push_notification_config(self, params: Any, context: Any) -> Any:
        return await self._unary(
            "DeleteTaskPushNotificationConfig",
            super().on_delete_task_push_notification_config(params, context),
            context,
            params,
        )

    async def on_get_extended_agent_card(self, params: Any, context: Any) -> Any:
        return await self._unary(
            "GetExtendedAgentCard",
            super().on_get_extended_agent_card(params, context),
            context,
            params,
        )
