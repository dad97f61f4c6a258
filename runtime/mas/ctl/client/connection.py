"""One connection to an A2A agent, following its AgentCard, on the official a2a-sdk client.

:func:`connect` resolves the TARGET (:mod:`mas.ctl.client.targets`), fetches its card from
``/.well-known/agent-card.json``, passes every interface URL of the card through the
target's ``rewrite``, and opens an SDK client on one transport:

- by default the first of the card's interfaces (the agent's order of preference) that is
  JSON-RPC, HTTP+JSON or gRPC;
- ``--transport jsonrpc|rest|grpc`` forces one; a card without it is a
  :class:`~mas.ctl.client.errors.TransportMissing` naming what the card offers.

Sends stream when the card declares ``capabilities.streaming`` and block otherwise (the
SDK's client decides on the card). Credentials (:mod:`mas.ctl.client.credentials`) go on
every HTTP request as headers and on every gRPC call as metadata; TLS trusts ``--cacert``
when given. Answers pass through :class:`~library_ioa.plugins.a2a.peer_bodies.LenientTimestamps`
(a timestamp without a UTC offset is read as UTC), as the delegation comm reads its peers.

:meth:`Connection.failure` turns whatever a call raised into one
:class:`~mas.ctl.client.errors.ClientError` line: no exception of the SDK, httpx, gRPC or
protobuf reaches the user.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import grpc
import httpx
from a2a.client import (
    A2AClientError,
    A2AClientTimeoutError,
    Client,
    ClientCallContext,
    ClientConfig,
    ClientFactory,
)
from a2a.client.card_resolver import parse_agent_card
from a2a.types import AgentCard, AgentInterface
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH, TransportProtocol
from a2a.utils.errors import A2AError, TaskNotFoundError
from google.protobuf import json_format

from library_ioa.plugins.a2a.peer_bodies import LenientTimestamps
from mas.ctl.client.credentials import Credentials
from mas.ctl.client.errors import (
    AgentUnreachable,
    AuthRefused,
    CardError,
    ClientError,
    TransportMissing,
    UnknownTask,
)
from mas.ctl.client.targets import open_target
from mas.runtime.errors import PeerProtocolError

logger = logging.getLogger(__name__)

# --transport values and the card's protocol bindings, in the default order of preference
TRANSPORTS = {
    "jsonrpc": TransportProtocol.JSONRPC.value,
    "rest": TransportProtocol.HTTP_JSON.value,
    "grpc": TransportProtocol.GRPC.value,
}
CONNECT_SECONDS = 10.0  # to open a connection (HTTP) before the agent counts as unreachable
CARD_SECONDS = 30.0  # to fetch the card
_UNREACHABLE = (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError, OSError)
_MALFORMED = (json_format.Error, ValueError, TypeError, KeyError, AttributeError, IndexError)
_AUTH_CODES = (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED)


@dataclass
class Connection:
    """An open client of one agent (see the module docstring)."""

    url: str  # the base URL the card came from
    card: AgentCard
    card_json: dict[str, Any]
    interface: AgentInterface  # the card's interface in use
    client: Client
    credentials: Credentials
    refused: list[int] = field(default_factory=list)  # HTTP 401/403 statuses seen

    @property
    def binding(self) -> str:
        """The protocol binding in use: ``JSONRPC``, ``HTTP+JSON`` or ``GRPC``."""
        return str(self.interface.protocol_binding)

    @property
    def streaming(self) -> bool:
        """Whether the agent streams (sends stream, tasks can be subscribed to)."""
        return bool(self.card.capabilities.streaming)

    @property
    def name(self) -> str:
        """The agent's name from its card (else its URL), for messages."""
        return self.card.name or self.url

    def context(self) -> ClientCallContext | None:
        """Per-call parameters: the credentials as gRPC metadata (HTTP has them already)."""
        if self.binding != TransportProtocol.GRPC.value or not self.credentials.headers:
            return None
        return ClientCallContext(service_parameters=dict(self.credentials.headers))

    def failure(self, exc: BaseException, call: str, task_id: str | None = None) -> ClientError:
        """``exc``, raised by ``call``, as the one line the user reads."""
        if isinstance(exc, ClientError):
            return exc
        chain = _causes(exc)
        status = next((s for s in (_http_status(e) for e in chain) if s in (401, 403)), None)
        if status is None and self.refused:
            status = self.refused[-1]
        code = next((c for c in (_grpc_code(e) for e in chain) if c in _AUTH_CODES), None)
        if status is not None or code is not None:
            what = f"HTTP {status}" if status is not None else f"gRPC {getattr(code, 'name', code)}"
            return AuthRefused(
                f"{self.url} refused {call} ({what}); {_auth_hint(self.card, self.credentials)}"
            )
        if any(isinstance(e, TaskNotFoundError) for e in chain):
            return UnknownTask(
                f"{self.url} knows no task {task_id!r}; its tasks: mas-ctl tasks TARGET"
            )
        return failure(exc, self.url, call)


def failure(exc: BaseException, url: str, call: str) -> ClientError:
    """What the user reads for a failed ``call`` to the agent at ``url``."""
    if isinstance(exc, ClientError):
        return exc
    chain = _causes(exc)
    unreachable = next((e for e in chain if isinstance(e, _UNREACHABLE)), None)
    if unreachable is not None or any(_grpc_code(e) == grpc.StatusCode.UNAVAILABLE for e in chain):
        reason = _one_line(unreachable) if unreachable is not None else "gRPC UNAVAILABLE"
        return AgentUnreachable(
            f"cannot reach {url} ({call}): {reason}; check the TARGET URL and that the agent "
            "is running"
        )
    if any(isinstance(e, (httpx.TimeoutException, A2AClientTimeoutError)) for e in chain):
        return AgentUnreachable(f"{url} did not answer {call} in time; is the agent running?")
    if isinstance(exc, PeerProtocolError):
        return ClientError(str(exc))
    if isinstance(exc, A2AError) and not isinstance(exc, A2AClientError):
        return ClientError(f"{url} answered {call} with an error: {type(exc).__name__}: {exc}")
    return ClientError(f"{url} answered {call} with something that is not A2A: {_one_line(exc)}")


def _causes(exc: BaseException) -> list[BaseException]:
    chain = [exc]
    while len(chain) < 20:
        nxt = chain[-1].__cause__ or chain[-1].__context__
        if nxt is None or nxt in chain:
            break
        chain.append(nxt)
    return chain


def _http_status(exc: BaseException) -> int | None:
    return exc.response.status_code if isinstance(exc, httpx.HTTPStatusError) else None


def _grpc_code(exc: BaseException) -> grpc.StatusCode | None:
    return exc.code() if isinstance(exc, grpc.aio.AioRpcError) else None


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def _auth_hint(card: AgentCard, credentials: Credentials) -> str:
    """What to present: the schemes the card declares, and the options that present them."""
    schemes = []
    for name, scheme in sorted(card.security_schemes.items()):
        kind = scheme.WhichOneof("scheme")
        if kind == "http_auth_security_scheme":
            schemes.append(f"{scheme.http_auth_security_scheme.scheme or 'http'} ({name})")
        elif kind == "api_key_security_scheme":
            schemes.append(f"API key in header {scheme.api_key_security_scheme.name!r} ({name})")
        else:
            schemes.append(name)
    asks = f"its card asks for {', '.join(schemes)}; " if schemes else ""
    sent = "the credentials given were refused" if credentials.headers else "no credentials given"
    return (
        f"{asks}{sent}: use --token-file PATH (bearer), -H 'Name: value' (e.g. an API key "
        "header) or $MAS_CTL_TOKEN"
    )


def add_transport_option(parser: argparse.ArgumentParser) -> None:
    """``--transport``."""
    parser.add_argument(
        "--transport",
        choices=tuple(TRANSPORTS),
        default=None,
        help="force a transport (default: the first the agent's card offers)",
    )


async def fetch_card(
    http: httpx.AsyncClient, url: str, refused: list[int]
) -> tuple[AgentCard, dict[str, Any]]:
    """The agent's card (parsed, and as the JSON it served)."""
    card_url = url + AGENT_CARD_WELL_KNOWN_PATH
    try:
        response = await http.get(card_url, timeout=CARD_SECONDS)
    except Exception as exc:
        raise failure(exc, url, "the AgentCard request") from None
    if response.status_code in (401, 403):
        refused.append(response.status_code)
        raise AuthRefused(
            f"{card_url} answered HTTP {response.status_code}; the card is normally public: "
            "present a credential with --token-file PATH, -H 'Name: value' or $MAS_CTL_TOKEN"
        )
    if response.status_code != 200:
        raise CardError(
            f"{card_url} answered HTTP {response.status_code}; TARGET must be an A2A agent's "
            "base URL (its AgentCard is at /.well-known/agent-card.json)"
        )
    try:
        body = json.loads(response.content)
    except ValueError:
        kind = response.headers.get("content-type", "no content type")
        raise CardError(
            f"{card_url} is not JSON ({kind}); TARGET must be an A2A agent's base URL"
        ) from None
    if not isinstance(body, dict):
        raise CardError(f"{card_url} is JSON but not an object; an AgentCard is a JSON object")
    try:
        card = parse_agent_card(json.loads(response.content))
    except _MALFORMED as exc:
        raise CardError(f"{card_url} is not an AgentCard: {_one_line(exc)}") from None
    return card, body


def choose_interface(card: AgentCard, url: str, transport: str | None) -> AgentInterface:
    """The interface to use (see the module docstring)."""
    allowed = [TRANSPORTS[transport]] if transport else list(TRANSPORTS.values())
    for interface in card.supported_interfaces:
        if interface.protocol_binding in allowed and interface.url:
            # of that binding, a 1.0 interface first (as the SDK's client picks it)
            same: list[AgentInterface] = [
                i
                for i in card.supported_interfaces
                if i.protocol_binding == interface.protocol_binding and i.url
            ]
            current = [i for i in same if i.protocol_version in ("1.0", "1.0.0")]
            return (current or same)[0]
    offered = sorted({i.protocol_binding for i in card.supported_interfaces}) or ["nothing"]
    if transport:
        usable = [k for k, v in TRANSPORTS.items() if v in offered]
        instead = f"--transport {'|'.join(usable)} or no --transport" if usable else "another agent"
        raise TransportMissing(
            f"the AgentCard of {url} offers {', '.join(offered)}, not {TRANSPORTS[transport]} "
            f"(--transport {transport}); use {instead}"
        )
    raise TransportMissing(
        f"the AgentCard of {url} offers {', '.join(offered)}; mas-ctl speaks JSONRPC, "
        "HTTP+JSON and GRPC"
    )


def _channel_factory(url: str, credentials: Credentials) -> Callable[[str], grpc.aio.Channel]:
    def channel(target: str) -> grpc.aio.Channel:
        for scheme in ("grpc://", "grpcs://", "dns:///"):
            target = target.removeprefix(scheme)
        if url.startswith("https://"):
            roots = credentials.root_certificates()
            return grpc.aio.secure_channel(target, grpc.ssl_channel_credentials(roots))
        return grpc.aio.insecure_channel(target)

    return channel


@contextlib.asynccontextmanager
async def connect(args: argparse.Namespace, credentials: Credentials) -> AsyncIterator[Connection]:
    """A connection to ``args.target`` (the client options of :mod:`mas.ctl.client.options`)."""
    async with open_target(
        args.target, args.namespace, args.kube_context, args.kubeconfig
    ) as target:
        url = target.base_url.rstrip("/")
        refused: list[int] = []

        async def note_refusal(response: httpx.Response) -> None:
            if response.status_code in (401, 403):
                refused.append(response.status_code)

        transport = LenientTimestamps(
            httpx.AsyncHTTPTransport(verify=credentials.ssl_context()), _naive_times(url)
        )
        timeout = httpx.Timeout(connect=CONNECT_SECONDS, read=None, write=CARD_SECONDS, pool=None)
        async with httpx.AsyncClient(
            headers=dict(credentials.headers),
            timeout=timeout,
            transport=transport,
            event_hooks={"response": [note_refusal]},
        ) as http:
            card, body = await fetch_card(http, url, refused)
            for interface in card.supported_interfaces:
                interface.url = target.rewrite(interface.url)
            interface = choose_interface(card, url, args.transport)
            binding = interface.protocol_binding
            config = ClientConfig(
                streaming=True,
                httpx_client=http,
                supported_protocol_bindings=[binding],
                grpc_channel_factory=_channel_factory(url, credentials),
            )
            try:
                client = ClientFactory(config).create(card)
            except _MALFORMED as exc:
                raise CardError(f"the AgentCard of {url}: {_one_line(exc)}") from None
            logger.debug("%s: %s at %s", url, binding, interface.url)
            connection = Connection(url, card, body, interface, client, credentials, refused)
            try:
                yield connection
            finally:
                await client.close()


def _naive_times(url: str) -> Callable[[int], None]:
    warned: list[bool] = []

    def fixed(count: int) -> None:
        if not warned:
            warned.append(True)
            logger.warning(
                "%s sends timestamps without a UTC offset (%d in one answer); read as UTC",
                url,
                count,
            )

    return fixed
