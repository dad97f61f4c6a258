"""One connection to an A2A agent, following its AgentCard, on the official a2a-sdk client.

:func:`connect` resolves the TARGET (:mod:`mas.ctl.client.targets`), fetches its card from
``/.well-known/agent-card.json``, passes every interface URL of the card through the
target's ``rewrite``, and opens an SDK client on one transport:

- by default the first of the card's interfaces (the agent's order of preference) that is
  JSON-RPC, HTTP+JSON or gRPC;
- ``--transport jsonrpc|rest|grpc`` forces one; a card without it is a
  :class:`~mas.ctl.client.errors.TransportMissing` naming what the card offers.

The SDK's client is loaded only once the card is read, with what the transport chosen needs
(:func:`~library_ioa.plugins.a2a.sdk_extras.load_client`): gRPC and protobuf's gRPC
runtime only for a gRPC interface, never httpx's command line. :func:`grpc_wanted` decides
that from the card's JSON as served, before the SDK parses it; the parsed card then decides
the interface (:func:`choose_interface`), and the two agree (``tests/unit/test_ctl_client.py``).

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
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from a2a.types import AgentCard, AgentInterface
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH, TransportProtocol
from a2a.utils.errors import A2AError, TaskNotFoundError
from google.protobuf import json_format

from library_ioa.plugins.a2a import sdk_extras
from mas.ctl.client.credentials import Credentials
from mas.ctl.client.errors import (
    AgentUnreachable,
    AuthRefused,
    CardError,
    ClientError,
    TransportMissing,
    UnknownTask,
)
from mas.ctl.client.output import one_line
from mas.ctl.client.targets import open_target
from mas.runtime.errors import PeerProtocolError

if TYPE_CHECKING:  # loaded by connect(), with what the transport needs (module docstring)
    import httpx
    from a2a.client import Client, ClientCallContext

logger = logging.getLogger(__name__)

# --transport values and the card's protocol bindings, in the default order of preference
TRANSPORTS = {
    "jsonrpc": TransportProtocol.JSONRPC.value,
    "rest": TransportProtocol.HTTP_JSON.value,
    "grpc": TransportProtocol.GRPC.value,
}
CONNECT_SECONDS = 10.0  # to open a connection (HTTP) before the agent counts as unreachable
CARD_SECONDS = 30.0  # to fetch the card
_MALFORMED = (json_format.Error, ValueError, TypeError, KeyError, AttributeError, IndexError)
_AUTH_CODES = ("UNAUTHENTICATED", "PERMISSION_DENIED")  # gRPC status codes


def _no_grpc(exc: BaseException) -> str | None:
    """The gRPC status code of ``exc`` when gRPC is not in use: none."""
    return None


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
    grpc_status: Callable[[BaseException], str | None] = _no_grpc  # grpc_calls.status_name

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
        if self.binding != TransportProtocol.GRPC.value or not self.credentials.given:
            return None
        from a2a.client import ClientCallContext  # loaded with the client (connect)

        return ClientCallContext(service_parameters=self.credentials.call_headers())

    def failure(self, exc: BaseException, call: str, task_id: str | None = None) -> ClientError:
        """``exc``, raised by ``call``, as the one line the user reads."""
        if isinstance(exc, ClientError):
            return exc
        chain = _causes(exc)
        status = next((s for s in (_http_status(e) for e in chain) if s in (401, 403)), None)
        if status is None and self.refused:
            status = self.refused[-1]
        code = next((c for c in map(self.grpc_status, chain) if c in _AUTH_CODES), None)
        if status is not None or code is not None:
            what = f"HTTP {status}" if status is not None else f"gRPC {code}"
            return AuthRefused(
                f"{self.url} refused {call} ({what}); {_auth_hint(self.card, self.credentials)}"
            )
        if any(isinstance(e, TaskNotFoundError) for e in chain):
            return UnknownTask(
                f"{self.url} knows no task {task_id!r}; its tasks: mas-ctl tasks TARGET"
            )
        return failure(exc, self.url, call, self.grpc_status)


def failure(
    exc: BaseException,
    url: str,
    call: str,
    grpc_status: Callable[[BaseException], str | None] = _no_grpc,
) -> ClientError:
    """What the user reads for a failed ``call`` to the agent at ``url`` (``grpc_status``
    reads a gRPC call's status code, when the transport is gRPC)."""
    if isinstance(exc, ClientError):
        return exc
    chain = _causes(exc)
    unreachable_types = (
        *_loaded("httpx", "ConnectError", "RemoteProtocolError", "ReadError"),
        OSError,
    )
    unreachable = next((e for e in chain if isinstance(e, unreachable_types)), None)
    if unreachable is not None or any(grpc_status(e) == "UNAVAILABLE" for e in chain):
        reason = _one_line(unreachable) if unreachable is not None else "gRPC UNAVAILABLE"
        return AgentUnreachable(
            f"cannot reach {url} ({call}): {reason}; check the TARGET URL and that the agent "
            "is running"
        )
    timeouts = (
        *_loaded("httpx", "TimeoutException"),
        *_loaded("a2a.client.errors", "A2AClientTimeoutError"),
    )
    if timeouts and any(isinstance(e, timeouts) for e in chain):
        return AgentUnreachable(f"{url} did not answer {call} in time; is the agent running?")
    if isinstance(exc, PeerProtocolError):
        return ClientError(str(exc))
    if isinstance(exc, A2AError) and not isinstance(
        exc, _loaded("a2a.client.errors", "A2AClientError")
    ):
        return ClientError(f"{url} answered {call} with an error: {type(exc).__name__}: {exc}")
    return ClientError(f"{url} answered {call} with something that is not A2A: {_one_line(exc)}")


def _loaded(module: str, *names: str) -> tuple[type[BaseException], ...]:
    """The exception classes ``names`` of ``module`` if it is loaded, else none: an exception
    of a module that was never loaded cannot have been raised (and reading the chain must
    not load the SDK's client, or gRPC, on a path that does not use them)."""
    loaded = sys.modules.get(module)
    return tuple(getattr(loaded, name) for name in names) if loaded is not None else ()


def _causes(exc: BaseException) -> list[BaseException]:
    chain = [exc]
    while len(chain) < 20:
        nxt = chain[-1].__cause__ or chain[-1].__context__
        if nxt is None or nxt in chain:
            break
        chain.append(nxt)
    return chain


def _http_status(exc: BaseException) -> int | None:
    errors = _loaded("httpx", "HTTPStatusError")
    if errors and isinstance(exc, errors):
        return int(exc.response.status_code)  # type: ignore[attr-defined]
    return None


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
        elif kind == "open_id_connect_security_scheme":
            issuer = scheme.open_id_connect_security_scheme.open_id_connect_url
            schemes.append(f"an OpenID Connect token from {one_line(issuer, 120)} ({name})")
        else:
            schemes.append(name)
    asks = f"its card asks for {', '.join(schemes)}; " if schemes else ""
    sent = "the credentials given were refused" if credentials.given else "no credentials given"
    return (
        f"{asks}{sent}: use --token-file PATH (bearer), -H 'Name: value' (e.g. an API key "
        "header), --token-command CMD (a token a command prints, e.g. OpenID Connect) or "
        "$MAS_CTL_TOKEN"
    )


def add_transport_option(parser: argparse.ArgumentParser) -> None:
    """``--transport``."""
    parser.add_argument(
        "--transport",
        choices=tuple(TRANSPORTS),
        default=None,
        help="force a transport (default: the first the agent's card offers)",
    )


async def fetch_card(http: httpx.AsyncClient, url: str, refused: list[int]) -> dict[str, Any]:
    """The agent's card, as the JSON object it served (:func:`parse_card` reads it)."""
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
    return body


def parse_card(body: dict[str, Any], card_url: str) -> AgentCard:
    """The card's JSON as the SDK's client reads it (loaded: :func:`connect`)."""
    from a2a.client.card_resolver import parse_agent_card

    try:
        card = parse_agent_card(json.loads(json.dumps(body)))  # it edits what it is given
    except _MALFORMED as exc:
        raise CardError(f"{card_url} is not an AgentCard: {_one_line(exc)}") from None
    return card


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


def grpc_wanted(body: dict[str, Any], transport: str | None) -> bool:
    """Whether the interface :func:`choose_interface` will pick from the card ``body`` (its
    JSON as served: a 1.0 card's ``supportedInterfaces``, or a 0.3 card's ``url``,
    ``preferredTransport`` and ``additionalInterfaces``, as the SDK reads them) may be gRPC.
    ``True`` when the JSON is not the shape either names: gRPC loaded in vain costs time,
    gRPC missing would cost the call."""
    if transport is not None:
        return transport == "grpc"
    listed = _listed_interfaces(body)
    if listed is None:
        return True
    usable = [binding for binding, url in listed if binding in TRANSPORTS.values() and url]
    return bool(usable) and usable[0] == TransportProtocol.GRPC.value


def _listed_interfaces(body: dict[str, Any]) -> list[tuple[object, object]] | None:
    """(binding, url) of each interface of the card's JSON in its order; ``None`` when the
    JSON has another shape."""
    if "supportedInterfaces" in body:
        items = body["supportedInterfaces"]
        keys = ("protocolBinding", "url")
    elif body.get("url"):
        main = {"transport": body.get("preferredTransport", "JSONRPC"), "url": body["url"]}
        items = [main, *(body.get("additionalInterfaces") or [])]
        keys = ("transport", "url")
    else:
        return []
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        return None
    return [(item.get(keys[0]), item.get(keys[1])) for item in items]


@contextlib.asynccontextmanager
async def connect(args: argparse.Namespace, credentials: Credentials) -> AsyncIterator[Connection]:
    """A connection to ``args.target`` (the client options of :mod:`mas.ctl.client.options`)."""
    async with open_target(
        args.target, args.namespace, args.kube_context, args.kubeconfig
    ) as target:
        url = target.base_url.rstrip("/")
        refused: list[int] = []
        sdk_extras.load_http()
        import httpx

        from library_ioa.plugins.a2a.peer_bodies import LenientTimestamps

        async def note_refusal(response: httpx.Response) -> None:
            if response.status_code in (401, 403):
                refused.append(response.status_code)

        transport = LenientTimestamps(
            httpx.AsyncHTTPTransport(verify=credentials.ssl_context()), _naive_times(url)
        )
        timeout = httpx.Timeout(connect=CONNECT_SECONDS, read=None, write=CARD_SECONDS, pool=None)
        auth: httpx.Auth | None = None
        if credentials.token_command is not None:
            from mas.ctl.client.token_command import TokenAuth

            auth = TokenAuth(credentials.token_command)
        async with httpx.AsyncClient(
            headers=dict(credentials.headers),
            auth=auth,
            timeout=timeout,
            transport=transport,
            event_hooks={"response": [note_refusal]},
        ) as http:
            body = await fetch_card(http, url, refused)
            with_grpc = grpc_wanted(body, args.transport)
            has_grpc = sdk_extras.load_client(grpc=with_grpc)
            card = parse_card(body, url + AGENT_CARD_WELL_KNOWN_PATH)
            for interface in card.supported_interfaces:
                interface.url = target.rewrite(interface.url)
            interface = choose_interface(card, url, args.transport)
            binding = interface.protocol_binding
            if binding == TransportProtocol.GRPC.value and not (with_grpc and has_grpc):
                raise ClientError(
                    f"the AgentCard of {url} leads to gRPC, but the a2a-sdk client was loaded "
                    "without it in this process; use --transport grpc"
                )
            client, grpc_status = _open_client(card, binding, http, url, credentials)
            logger.debug("%s: %s at %s", url, binding, interface.url)
            connection = Connection(
                url, card, body, interface, client, credentials, refused, grpc_status
            )
            try:
                yield connection
            finally:
                await client.close()


def _open_client(
    card: AgentCard, binding: str, http: httpx.AsyncClient, url: str, credentials: Credentials
) -> tuple[Client, Callable[[BaseException], str | None]]:
    """The SDK's client on ``binding``, and the reader of its gRPC status codes."""
    from a2a.client import ClientConfig, ClientFactory

    config = ClientConfig(streaming=True, httpx_client=http, supported_protocol_bindings=[binding])
    grpc_status = _no_grpc
    if binding == TransportProtocol.GRPC.value:
        from mas.ctl.client import grpc_calls

        config.grpc_channel_factory = grpc_calls.channel_factory(url, credentials)
        grpc_status = grpc_calls.status_name
    try:
        return ClientFactory(config).create(card), grpc_status
    except _MALFORMED as exc:
        raise CardError(f"the AgentCard of {url}: {_one_line(exc)}") from None


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
