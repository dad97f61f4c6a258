"""The cap on push-notification configs per task (``a2a.push.max_configs_per_task``).

:class:`CappedPushConfigStore` wraps the endpoint's push-config store (memory or SQL). A
config whose id is new to its task is refused when the task already has
``max_configs_per_task`` configs, counted across all principals (every config of a task
is pushed to, whoever set it); replacing a config of the same id is always accepted. The
refusal is the A2A ``InvalidParamsError`` (JSON-RPC -32602, HTTP+JSON 400, gRPC
INVALID_ARGUMENT) naming the limit and its setting, whether the config came with a
``SendMessage`` or on its own. Reads and deletes go to the wrapped store unchanged.

The count and the write are two calls: two concurrent creates on one task may pass the
cap by one each, never more (each request adds one config).
"""

from __future__ import annotations

from a2a.server.context import ServerCallContext
from a2a.server.tasks import PushNotificationConfigStore
from a2a.types import TaskPushNotificationConfig
from a2a.utils.errors import InvalidParamsError

__all__ = ["CappedPushConfigStore"]


class CappedPushConfigStore(PushNotificationConfigStore):
    """A push-config store that refuses a task's config past ``max_per_task``."""

    def __init__(self, inner: PushNotificationConfigStore, max_per_task: int) -> None:
        if max_per_task < 1:
            raise ValueError(f"max_per_task {max_per_task!r} must be >= 1")
        self.inner = inner
        self.max_per_task = max_per_task

    async def set_info(
        self,
        task_id: str,
        notification_config: TaskPushNotificationConfig,
        context: ServerCallContext,
    ) -> TaskPushNotificationConfig | None:
        config_id = notification_config.id or task_id  # the SDK's normalized id
        existing = await self.inner.get_info_for_dispatch(task_id)
        ids = {config.id or task_id for config in existing}
        if config_id not in ids and len(ids) >= self.max_per_task:
            raise InvalidParamsError(
                message=(
                    f"task {task_id} already has {len(ids)} push notification configs, the "
                    f"most a2a.push.max_configs_per_task ({self.max_per_task}) allows; delete "
                    "one or reuse its id"
                )
            )
        return await self.inner.set_info(task_id, notification_config, context)

    async def get_info(
        self, task_id: str, context: ServerCallContext
    ) -> list[TaskPushNotificationConfig]:
        return await self.inner.get_info(task_id, context)

    async def get_info_for_dispatch(self, task_id: str) -> list[TaskPushNotificationConfig]:
        return await self.inner.get_info_for_dispatch(task_id)

    async def delete_info(
        self, task_id: str, context: ServerCallContext, config_id: str | None = None
    ) -> None:
        await self.inner.delete_info(task_id, context, config_id)
