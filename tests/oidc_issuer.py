"""A real OpenID Connect provider for the OIDC tests, and a person signing in to it.

The provider is ``tests/oidc/main.go`` (github.com/oauth2-proxy/mockoidc: discovery document,
JWKS, authorization code flow), built by ``scripts/build-oidc`` into ``$MAS_OIDC_DIR``
(default ``~/.cache/maslab/oidc/<mockoidc version from go.mod>``). Tests that need it skip
with the build command when it is absent, and fail instead when ``MAS_REQUIRE_OIDC=1`` (CI).

:func:`login` is what a person's login tool does: the authorization code flow, the person
chosen with ``login_hint``; it returns the ID token. Run as a program it prints that token,
which is how ``mas-ctl --token-command`` uses it::

    python tests/oidc_issuer.py ISSUER CLIENT_ID CLIENT_SECRET USER
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import httpx

HERE = Path(__file__).resolve().parent
REQUIRE_ENV = "MAS_REQUIRE_OIDC"
START_DEADLINE = 30.0  # a cold Go binary on a busy, shared 2-core machine
REDIRECT = "http://127.0.0.1/callback"  # never visited: the code is read from the redirect


def mockoidc_version() -> str:
    """The mockoidc version pinned in tests/oidc/go.mod."""
    for line in (HERE / "oidc" / "go.mod").read_text().splitlines():
        words = line.split()
        if len(words) == 3 and words[:2] == ["require", "github.com/oauth2-proxy/mockoidc"]:
            return words[2]
    raise AssertionError("tests/oidc/go.mod does not require github.com/oauth2-proxy/mockoidc")


def issuer_binary() -> Path:
    """Where scripts/build-oidc puts the binary."""
    default = Path.home() / ".cache" / "maslab" / "oidc" / mockoidc_version()
    return Path(os.environ.get("MAS_OIDC_DIR") or default) / "oidc-issuer"


def require_issuer() -> Path:
    """The binary; skip (or, with ``MAS_REQUIRE_OIDC=1``, fail) when it is missing."""
    import pytest

    binary = issuer_binary()
    if binary.is_file() and os.access(binary, os.X_OK):
        return binary
    why = f"no OIDC issuer binary at {binary}: build it with scripts/build-oidc"
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{REQUIRE_ENV}=1 but {why}", pytrace=False)
    pytest.skip(why)


@dataclass
class Provider:
    """A running provider: its issuer URL and the client the tests sign in through."""

    issuer: str
    client_id: str
    client_secret: str

    def login(self, user: str) -> str:
        return login(self.issuer, self.client_id, self.client_secret, user)

    def set_clock(self, offset: str) -> None:
        """Move the issuer's clock (a Go duration, e.g. ``-1h``; ``0s`` puts it back)."""
        base = self.issuer.rsplit("/", 1)[0]
        answer = httpx.post(f"{base}/mock/clock", params={"offset": offset}, timeout=10)
        answer.raise_for_status()

    def command(self, user: str) -> str:
        """A ``--token-command`` printing ``user``'s ID token."""
        words = [sys.executable, __file__, self.issuer, self.client_id, self.client_secret, user]
        return " ".join(words)


@contextmanager
def provider(users: Mapping[str, list[str]], workdir: Path) -> Iterator[Provider]:
    """The provider on a loopback port, ``users`` (subject -> groups) able to sign in."""
    # Imported here: this file also runs as a script (the --token-command), without `tests`.
    from tests.process_lines import wait_for_line

    binary = require_issuer()
    users_file = workdir / "users.json"
    users_file.write_text(json.dumps(dict(users)))
    process = subprocess.Popen(
        [str(binary), "-listen", "127.0.0.1:0", "-users", str(users_file)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield Provider(**json.loads(wait_for_line(process, "{", START_DEADLINE, "oidc-issuer")))
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()


def login(issuer: str, client_id: str, client_secret: str, user: str) -> str:
    """``user``'s ID token, through the provider's authorization code flow."""
    with httpx.Client(timeout=10) as http:
        discovery = http.get(f"{issuer}/.well-known/openid-configuration").json()
        authorized = http.get(
            discovery["authorization_endpoint"],
            params={
                "client_id": client_id,
                "response_type": "code",
                "scope": "openid email groups",
                "redirect_uri": REDIRECT,
                "state": "tests",
                "login_hint": user,
            },
        )
        if authorized.status_code != 302:
            raise RuntimeError(f"sign-in of {user!r} refused: {authorized.status_code}")
        code = parse_qs(urlparse(authorized.headers["location"]).query)["code"][0]
        tokens = http.post(
            discovery["token_endpoint"],
            data={
                "grant_type": "authorization_code",
                "code": code,
                "client_id": client_id,
                "client_secret": client_secret,
                "redirect_uri": REDIRECT,
            },
        )
        tokens.raise_for_status()
        return str(tokens.json()["id_token"])


if __name__ == "__main__":
    print(login(*sys.argv[1:5]))
