"""An issuer's signing keys: its OIDC discovery document, then the JWKS it names.

Contract of a :class:`KeySource`: :meth:`KeySource.key` returns the verification key of a
key id. A key id the cached set does not hold makes it fetch the set again, at most once per
``refresh_interval`` seconds (a stream of tokens naming made-up key ids cannot turn into a
stream of fetches); concurrent lookups share one fetch. A set older than ``max_age``
seconds is fetched again at the next lookup, so a key the issuer withdrew stops verifying.
A fetch that fails keeps the keys already held and raises :class:`KeysUnavailable`, which
is not the caller's fault; so does every lookup of a key not held until the next fetch is
due (never "unknown", which would blame the caller for the issuer being out of reach).

:class:`OidcKeys` reads ``<issuer>/.well-known/openid-configuration`` (or ``discovery_url``,
for an issuer reached through another address, such as the cluster's API server), checks that
the document names the expected issuer, and reads its ``jwks_uri`` (or ``jwks_url``). Keys
that are not for signatures, or of a type PyJWT cannot load, are skipped.
"""

from __future__ import annotations

import abc
import asyncio
import logging
import ssl
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import httpx
import jwt

from mas.runtime.errors import KeysUnavailable

logger = logging.getLogger(__name__)

DISCOVERY_PATH = "/.well-known/openid-configuration"
# Asymmetric algorithms only: never "none" nor an HMAC that a public key could be fed to.
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512")

Fetch = Callable[[str], Awaitable[Mapping[str, Any]]]


def https_fetch(
    ca_file: str | Path | None = None,
    token_file: str | Path | None = None,
    timeout: float = 5.0,
) -> Fetch:
    """A fetch of JSON documents over HTTPS, trusting ``ca_file`` (the system CAs when None)
    and sending the bearer token read from ``token_file`` on each request when given."""
    verify: ssl.SSLContext | bool = (
        ssl.create_default_context(cafile=str(ca_file)) if ca_file is not None else True
    )

    async def fetch(url: str) -> Mapping[str, Any]:
        headers = {"Accept": "application/json, application/jwk-set+json"}
        if token_file is not None:
            headers["Authorization"] = f"Bearer {Path(token_file).read_text().strip()}"
        async with httpx.AsyncClient(verify=verify, timeout=timeout) as client:
            response = await client.get(url, headers=headers)
        response.raise_for_status()
        document = response.json()
        if not isinstance(document, dict):
            raise ValueError(f"{url} answered JSON that is not an object")
        return document

    return fetch


class KeySource(abc.ABC):
    """The verification keys of one issuer, by key id (see the module docstring)."""

    def __init__(
        self,
        *,
        refresh_interval: float = 30.0,
        max_age: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.issuer: str | None = None  # the issuer whose keys these are, once known
        self._keys: dict[str, jwt.PyJWK] = {}
        self._fetched_at: float | None = None
        self._failed: str | None = None  # why the last fetch failed, if it did
        self._refresh_interval = refresh_interval
        self._max_age = max_age
        self._clock = clock
        self._lock = asyncio.Lock()

    @abc.abstractmethod
    async def load(self) -> Mapping[str, Any]:
        """The JWKS document (``{"keys": [...]}``), fetched afresh."""

    async def key(self, kid: str) -> jwt.PyJWK | None:
        """The key ``kid``, fetching the set again when it is unknown; None when still unknown."""
        found = self._keys.get(kid)
        if found is not None and not self._stale():
            return found
        async with self._lock:
            found = self._keys.get(kid)
            if found is not None and not self._stale():  # another lookup refreshed meanwhile
                return found
            now = self._clock()
            if (
                found is None
                and self._fetched_at is not None
                and now - self._fetched_at < self._refresh_interval
            ):
                if self._failed is not None:
                    raise KeysUnavailable(self._failed)
                return None
            self._fetched_at = now
            try:
                self._keys = _signing_keys(await self._load_or_raise())
            except KeysUnavailable as exc:
                self._failed = str(exc)
                raise
            self._failed = None
            return self._keys.get(kid)

    def _stale(self) -> bool:
        return self._fetched_at is None or self._clock() - self._fetched_at > self._max_age

    async def _load_or_raise(self) -> Mapping[str, Any]:
        try:
            return await self.load()
        except KeysUnavailable:
            raise
        except (httpx.HTTPError, ValueError, OSError) as exc:
            raise KeysUnavailable(f"the issuer's keys could not be fetched: {exc}") from exc


def _signing_keys(jwks: Mapping[str, Any]) -> dict[str, jwt.PyJWK]:
    keys: dict[str, jwt.PyJWK] = {}
    for data in jwks.get("keys") or []:
        if not isinstance(data, dict) or data.get("use", "sig") != "sig" or "kid" not in data:
            continue
        try:
            key = jwt.PyJWK(data)
        except jwt.PyJWKError as exc:
            logger.warning("skipping key %r of the JWKS: %s", data.get("kid"), exc)
            continue
        if key.algorithm_name in ALGORITHMS:
            keys[str(data["kid"])] = key
    return keys


class OidcKeys(KeySource):
    """The keys an OIDC issuer publishes (its discovery document names the JWKS).

    ``issuer`` None trusts the issuer the discovery document names: only for a document
    read from an authority the fetch already authenticates (the API server, over TLS with
    the cluster's CA).
    """

    def __init__(
        self,
        issuer: str | None,
        *,
        fetch: Fetch | None = None,
        discovery_url: str | None = None,
        jwks_url: str | None = None,
        refresh_interval: float = 30.0,
        max_age: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(refresh_interval=refresh_interval, max_age=max_age, clock=clock)
        self.issuer = issuer
        self._fetch = fetch or https_fetch()
        if discovery_url is None and issuer is None:
            raise ValueError("OidcKeys needs an issuer or a discovery_url")
        self._discovery_url = discovery_url or str(issuer).rstrip("/") + DISCOVERY_PATH
        self._jwks_url = jwks_url

    async def load(self) -> Mapping[str, Any]:
        discovery = await self._fetch(self._discovery_url)
        named = discovery.get("issuer")
        if self.issuer is None and isinstance(named, str) and named:
            self.issuer = named
        if named != self.issuer:
            raise KeysUnavailable(
                f"{self._discovery_url} names issuer {discovery.get('issuer')!r}, "
                f"not the expected {self.issuer!r}"
            )
        url = self._jwks_url or discovery.get("jwks_uri")
        if not isinstance(url, str) or not url:
            raise KeysUnavailable(f"{self._discovery_url} names no jwks_uri")
        return await self._fetch(url)
