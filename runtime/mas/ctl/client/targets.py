"""Where a client command's TARGET is: a URL, or an agent of an Application in a cluster.

``open_target(target, namespace, kube_context, kubeconfig)`` is an async context manager
yielding a :class:`Target`: ``base_url``, whose ``/.well-known/agent-card.json`` is the
agent's card, and ``rewrite(url)``, which every interface URL taken from the card goes
through before the client connects to it.

- ``http(s)://host[:port][/path]``: the card is fetched from that URL; ``rewrite`` is the
  identity (the card's interfaces are used as the agent advertises them).
- ``APP/AGENT`` (no scheme): the agent ``AGENT`` of the Application ``APP``, reached through
  the API server (:mod:`mas.ctl.cluster`, loaded only for this form); ``rewrite`` maps the
  in-cluster URLs of its card to the local forwarded addresses. An error of that module
  (an exception class defined in it) is printed as one line, as a
  :class:`~mas.ctl.client.errors.ClientError` is.

Anything else is a :class:`~mas.ctl.client.errors.TargetError` naming both accepted forms.
"""

from __future__ import annotations

import contextlib
import importlib
import re
import urllib.parse
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

from mas.ctl.client.errors import ClientError, TargetError

_NAME = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"  # a Kubernetes object name (DNS label)
_CLUSTER_TARGET = re.compile(rf"^{_NAME}/{_NAME}$")
ACCEPTED = "accepted: a URL (http://host:port[/path] or https://...) or APP/AGENT"


class Target(Protocol):
    """A resolved TARGET (see the module docstring)."""

    @property
    def base_url(self) -> str: ...

    def rewrite(self, url: str) -> str: ...


@dataclass(frozen=True)
class UrlTarget:
    """A TARGET given as a URL."""

    base_url: str

    def rewrite(self, url: str) -> str:
        """The card's URL as it is."""
        return url


def shown(target: str) -> str:
    """``target`` for an error line: quoted, control characters escaped, at most 200 chars."""
    text = repr(target)
    return text if len(text) <= 200 else text[:197] + "..."


def parse_url_target(target: str) -> UrlTarget:
    """A URL TARGET, checked: http or https, a host, a port if any, no user:password@ (never
    echoed: it is a secret), no query or fragment."""
    try:
        parts = urllib.parse.urlsplit(target)
    except ValueError as exc:
        raise TargetError(
            f"TARGET {shown(target)} is not a valid URL ({exc}); {ACCEPTED}"
        ) from None
    if "@" in parts.netloc:
        raise TargetError(
            "TARGET: a user:password@ in the URL is not accepted (the URL shows in messages); "
            "give credentials with -H 'Name: value' or --token-file PATH"
        )
    try:
        port = parts.port
    except ValueError as exc:
        raise TargetError(
            f"TARGET {shown(target)} is not a valid URL ({exc}); {ACCEPTED}"
        ) from None
    if parts.scheme not in ("http", "https"):
        raise TargetError(
            f"TARGET {shown(target)}: scheme {parts.scheme!r} is not served; {ACCEPTED}"
        )
    if not parts.hostname or port == 0:
        raise TargetError(f"TARGET {shown(target)} has no host and port to connect to; {ACCEPTED}")
    if parts.query or parts.fragment:
        raise TargetError(
            f"TARGET {shown(target)}: a query or fragment is not accepted; {ACCEPTED}"
        )
    return UrlTarget(target.rstrip("/"))


def is_cluster_target(target: str) -> bool:
    """Whether ``target`` has the ``APP/AGENT`` form."""
    return bool(_CLUSTER_TARGET.match(target))


@contextlib.asynccontextmanager
async def open_target(
    target: str,
    namespace: str | None = None,
    kube_context: str | None = None,
    kubeconfig: str | None = None,
) -> AsyncIterator[Target]:
    """The TARGET resolved, for the life of the block (a cluster target keeps its port
    forward open that long)."""
    if "://" in target:
        yield parse_url_target(target)
        return
    if not is_cluster_target(target):
        raise TargetError(f"TARGET {shown(target)} is neither a URL nor APP/AGENT; {ACCEPTED}")
    try:
        cluster = importlib.import_module("mas.ctl.cluster")
    except ImportError as exc:
        missing = exc.name if exc.name and exc.name != "mas.ctl.cluster" else None
        why = f" (the module {missing} is missing)" if missing else ""
        raise TargetError(
            f"TARGET {target!r}: this mas-ctl cannot reach agents in a cluster{why}; give the "
            "agent's URL instead (e.g. through kubectl port-forward)"
        ) from None
    try:
        async with cluster.open_cluster_target(
            target, namespace, kube_context, kubeconfig
        ) as found:
            yield found
    except ClientError:
        raise
    except Exception as exc:
        # The cluster module's own errors are one line for the user, like ours.
        if type(exc).__module__.startswith("mas.ctl.cluster"):
            raise ClientError(str(exc)) from None
        raise
