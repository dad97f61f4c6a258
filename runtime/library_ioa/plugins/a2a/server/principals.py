"""Who owns a task: the authenticated principal of a request (``a2a.auth``).

With ``a2a.auth`` each scheme of the endpoint is a principal, named by its id on the card
(``bearer``, ``apiKey``, ``bearer2``, ...): whoever presents that credential. After
:class:`~library_ioa.plugins.a2a.server.auth.HttpAuth` or the gRPC builder here has
matched a credential, the request's ``ServerCallContext.user`` is that principal, and the
SDK's stores scope by it (their ``owner_resolver`` is ``context.user.user_name``): a task
and its push-notification configs belong to the principal that created the task. Another
principal that names the task (``GetTask``, ``CancelTask``, ``SubscribeToTask``, a message
with its ``taskId``, and the push-config methods: attach, get, list, delete) is answered
``TaskNotFoundError``, exactly as for a task that does not exist, so a task id says
nothing to anyone else.

Without ``a2a.auth`` every request is the same anonymous principal (user name ``""``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from a2a.auth.user import UnauthenticatedUser, User
from a2a.server.request_handlers.grpc_handler import DefaultGrpcServerCallContextBuilder

if TYPE_CHECKING:  # auth.py imports this module
    from library_ioa.plugins.a2a.server.auth import Authenticator


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


class GrpcPrincipals(DefaultGrpcServerCallContextBuilder):
    """The gRPC context builder that names the principal from the call's metadata."""

    def __init__(self, authenticator: Authenticator) -> None:
        self.authenticator = authenticator

    def build_user(self, context: Any) -> User:
        wanted = self.authenticator.headers
        presented: dict[str, bytes] = {}
        for key, value in context.invocation_metadata() or ():
            if key.lower() in wanted:
                presented[key.lower()] = value.encode() if isinstance(value, str) else value
        name = self.authenticator.principal(presented)
        return Principal(name) if name is not None else UnauthenticatedUser()
