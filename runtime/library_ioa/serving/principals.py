"""Who owns a task: the authenticated principal of a request (``a2a.auth``).

With ``a2a.auth`` each scheme of the endpoint is a principal, named by its id on the card
(``bearer``, ``apiKey``, ``bearer2``, ...): whoever presents that credential. After
:class:`~library_ioa.serving.auth.HttpAuth` or the gRPC builder
(:class:`~library_ioa.serving.grpc_auth.GrpcPrincipals`) has
matched a credential, the request's ``ServerCallContext.user`` is that principal, and the
SDK's stores scope by it (their ``owner_resolver`` is ``context.user.user_name``): a task
and its push-notification configs belong to the principal that created the task. Another
principal that names the task (``GetTask``, ``CancelTask``, ``SubscribeToTask``, a message
with its ``taskId``, and the push-config methods: attach, get, list, delete) is answered
``TaskNotFoundError``, exactly as for a task that does not exist, so a task id says
nothing to anyone else.

Without ``a2a.auth`` every request is the same anonymous principal (user name ``""``).

A conversation is owned the same way (:func:`owned_session`): the session a ``contextId``
(or an MCP ``session``) names is the caller's own. Under ``a2a.auth`` the session id is the
principal's name and the context id (``bearer/ctx-1``), so another principal naming the
same context id gets a conversation of its own, exactly as if the id were new: it never
joins, reads or queues behind the other's, and learns nothing of it. Every door of an
agent (A2A on each transport, MCP) keys the mailbox, the history and the stored
conversation by it, so ownership survives a restart with the durable stores.
"""

from __future__ import annotations

from typing import Any

from a2a.auth.user import User

SESSION_SEPARATOR = "/"


def owned_session(owner: str, context_id: str) -> str:
    """The session id of ``context_id`` for the principal ``owner``.

    The anonymous principal (``""``: no ``a2a.auth``) keeps the context id as it is; a
    principal's sessions are ``<owner>/<context id>``. Principal names are scheme ids
    (``bearer``, ``apiKey2``), which hold no ``/``, and under ``a2a.auth`` every caller is a
    named principal, so two principals' sessions never share an id.
    """
    return f"{owner}{SESSION_SEPARATOR}{context_id}" if owner else context_id


def owner_of(context: Any) -> str:
    """The principal's name of a ``ServerCallContext`` (``""``: anonymous or unknown)."""
    user = getattr(context, "user", None)
    if user is None or not getattr(user, "is_authenticated", False):
        return ""
    return str(getattr(user, "user_name", "") or "")


class Principal(User):
    """A task owner by name: the scheme id of the credential a request presented (or the
    owner a store acts for when it sweeps or evicts; ``""`` is the anonymous one).

    Also a Starlette user (``display_name``), since the SDK's HTTP context builder reads
    ``request.user.display_name``.
    """

    def __init__(self, name: str) -> None:
        self._name = name

    @property
    def is_authenticated(self) -> bool:
        return bool(self._name)

    @property
    def user_name(self) -> str:
        return self._name

    @property
    def display_name(self) -> str:
        return self._name
