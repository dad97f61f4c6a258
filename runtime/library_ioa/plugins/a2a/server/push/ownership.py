"""Who may attach a push-notification config to a task (``a2a.push.allow_anonymous_create``).

With ``a2a.auth`` a task belongs to the principal that created it, and the SDK's stores
scope by principal: another principal attaching a config to it gets ``TaskNotFoundError``
(:mod:`library_ioa.serving.principals`).

Without ``a2a.auth`` every caller is the same anonymous principal, so that scoping proves
nothing, and the A2A request that attaches a config to an existing task
(``CreateTaskPushNotificationConfig``, 0.3 ``tasks/pushNotificationConfig/set``) carries
only the task id: no context id, no credential, nothing that shows it comes from the
task's own conversation. (A task id is no secret among anonymous callers either:
``ListTasks`` lists them.) The one way a request shows it belongs to the task's context
is to *be* a message of it: a ``SendMessage`` whose ``configuration`` carries the config
inline, on a new task or with the task's ``taskId`` (the SDK refuses a message whose
``contextId`` is not its task's).

So, without ``a2a.auth``, a standalone create is refused unless the endpoint allows it
(``a2a.push.allow_anonymous_create: true``): :func:`refuse_anonymous_create` raises the A2A
``UnsupportedOperationError`` (JSON-RPC -32004, HTTP+JSON 400 ``UNSUPPORTED_OPERATION``,
gRPC ``FAILED_PRECONDITION``) with a message that says what to do instead. It is checked
before the task is looked up, so a refused caller learns nothing about the task id.
Configs given inline with ``SendMessage`` are accepted as before, and getting, listing
and deleting configs are unchanged.
"""

from __future__ import annotations

from typing import Any

from a2a.utils.errors import UnsupportedOperationError

REFUSAL = (
    "CreateTaskPushNotificationConfig without authentication is refused: the request "
    "cannot show it comes from the task's own context. Give the config inline with the "
    "task's SendMessage (configuration.taskPushNotificationConfig), or have the endpoint "
    "set a2a.auth (or a2a.push.allow_anonymous_create: true)"
)


def is_anonymous(context: Any) -> bool:
    """Whether the request was made without a credential (no ``a2a.auth``)."""
    user = getattr(context, "user", None)
    return user is None or not user.is_authenticated


def refuse_anonymous_create(context: Any) -> None:
    """Raise ``UnsupportedOperationError`` for a standalone create made anonymously."""
    if is_anonymous(context):
        raise UnsupportedOperationError(message=REFUSAL)
