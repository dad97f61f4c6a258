"""``mas-ctl ask --token-command``, end to end: a person signs in to a real OpenID Connect
provider (tests/oidc_issuer.py) through the command, and ``mas-ctl serve`` of an agent whose
``a2a.auth`` is that provider admits them on every transport; without a token, or with a
person outside the required group, the refusal is one line naming what to do. The command
runs again only when the token it printed is about to expire."""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from ctl_client_support import TRANSPORTS, OurAgent, run, serve_desk
from tests.oidc_issuer import Provider, provider

from mas.ctl.client.credentials import resolve_credentials
from mas.ctl.client.errors import OptionError
from mas.ctl.client.token_command import TokenCommand

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def idp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Provider]:
    users = {"alice": ["mas-users"], "bob": ["visitors"]}
    with provider(users, tmp_path_factory.mktemp("oidc")) as running:
        yield running


@pytest.fixture(scope="module")
def oidc_desk(tmp_path_factory: pytest.TempPathFactory, idp: Provider) -> Iterator[OurAgent]:
    scheme = {"issuer": idp.issuer, "audiences": [idp.client_id], "required_groups": ["mas-users"]}
    auth = {"schemes": [{"type": "oidc", "oidc": scheme}]}
    with serve_desk(tmp_path_factory.mktemp("oidc-desk"), a2a_auth=auth) as agent:
        yield agent


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_ask_with_a_token_command_reaches_the_agent(
    tmp_path: Path, idp: Provider, oidc_desk: OurAgent, transport: str
) -> None:
    command = idp.command("alice")
    code, out, err = await run(
        tmp_path,
        "ask",
        oidc_desk.url,
        "-m",
        "ask helper tea",
        "--token-command",
        command,
        "--transport",
        transport,
    )
    assert code == 0, err
    assert out == "helper said: helper did: tea\n"


async def test_without_a_token_or_the_group_the_refusal_says_what_to_do(
    tmp_path: Path, idp: Provider, oidc_desk: OurAgent
) -> None:
    url = oidc_desk.url
    code, out, err = await run(tmp_path, "ask", url, "-m", "hi")
    assert code == 1 and out == "" and "Traceback" not in err
    assert f"{url} refused SendMessage (HTTP 401)" in err
    assert f"an OpenID Connect token from {idp.issuer}/.well-known/openid-configuration" in err
    assert "--token-command CMD" in err
    code, out, err = await run(
        tmp_path, "ask", url, "-m", "hi", "--token-command", idp.command("bob")
    )
    assert code == 1 and out == ""
    assert f"{url} refused SendMessage (HTTP 403)" in err
    code, _, err = await run(tmp_path, "ask", url, "-m", "hi", "--token-command", "false")
    assert code != 0 and "Traceback" not in err
    assert "--token-command: 'false' exited with status 1" in err


def jwt_with_exp(exp: int) -> str:
    payload = base64.urlsafe_b64encode(json.dumps({"exp": exp}).encode()).decode().rstrip("=")
    return f"eyJhbGciOiJub25lIn0.{payload}.c2ln"


def test_a_token_command_runs_again_only_near_expiry(tmp_path: Path) -> None:
    script = tmp_path / "token.py"
    script.write_text(f"import sys\nprint({jwt_with_exp(1000)!r})\n")
    now = [0.0]
    command = TokenCommand(f"{sys.executable} {script}", margin=30, clock=lambda: now[0])
    assert command.current() == jwt_with_exp(1000)
    now[0] = 969.0
    command.current()
    assert command.runs == 1  # still 31 s left
    now[0] = 971.0
    command.current()
    assert command.runs == 2


def test_a_failing_token_command_is_one_line_without_its_output(tmp_path: Path) -> None:
    script = tmp_path / "fails.py"
    script.write_text("import sys\nprint('s3cret')\nsys.exit(3)\n")
    with pytest.raises(OptionError) as failed:
        TokenCommand(f"{sys.executable} {script}").current()
    assert "exited with status 3" in str(failed.value) and "s3cret" not in str(failed.value)
    with pytest.raises(OptionError, match="is not found"):
        TokenCommand("/nonexistent/login").current()
    with pytest.raises(OptionError, match="cannot split"):
        TokenCommand("login 'unterminated")
    with pytest.raises(OptionError, match="--token-command and --token-file both"):
        resolve_credentials([], str(script), None, {}, token_command="login")
