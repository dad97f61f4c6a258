"""The egress to the API server: an agent's caller check reads the cluster issuer's keys there.

Without it an agent whose pod starts under a NetworkPolicy enforcer cannot read the keys, and
every call from another agent is refused (operator/mas_operator/networkpolicies.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.operator.test_operator_network_policy_store import app

from mas_operator.children import build_children
from mas_operator.cli import main
from mas_operator.plan import ApiServer, plan_application

pytestmark = pytest.mark.timeout(30)

MEMORY = {"type": "memory"}


def last_egress(children: list[dict[str, Any]]) -> dict[str, Any]:
    [policy] = [c for c in children if c["kind"] == "NetworkPolicy"]
    rule: dict[str, Any] = policy["spec"]["egress"][-1]
    return rule


def test_without_addresses_the_api_server_ports_are_allowed_to_any_address() -> None:
    assert last_egress(build_children(plan_application(app(MEMORY)))) == {
        "ports": [{"protocol": "TCP", "port": 443}, {"protocol": "TCP", "port": 6443}]
    }


def test_the_endpoints_the_chart_found_are_the_only_destination() -> None:
    api = ApiServer(cidrs=("172.18.0.2/32", "fd00::2/128"), ports=(6443,))
    plan = plan_application(app(MEMORY), api_server=api)
    assert last_egress(build_children(plan)) == {
        "ports": [{"protocol": "TCP", "port": 6443}],
        "to": [{"ipBlock": {"cidr": "172.18.0.2/32"}}, {"ipBlock": {"cidr": "fd00::2/128"}}],
    }


def test_render_takes_the_api_server_flags(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "app.yaml").write_text(yaml.safe_dump(app(MEMORY)))
    argv = ["render", "-f", str(tmp_path / "app.yaml"), "--api-server-cidr", "10.96.7.1"]
    assert main([*argv, "--api-server-port", "6443", "--api-server-port", "6443"]) == 0
    children = list(yaml.safe_load_all(capsys.readouterr().out))
    assert last_egress(children) == {
        "ports": [{"protocol": "TCP", "port": 6443}],
        "to": [{"ipBlock": {"cidr": "10.96.7.1/32"}}],
    }


@pytest.mark.parametrize(
    ("flag", "value", "accepted"),
    [
        ("--api-server-cidr", "kubernetes.default", "accepted: a CIDR such as 10.0.0.1/32"),
        ("--api-server-port", "0", "accepted: 1 to 65535"),
    ],
)
def test_a_bad_api_server_flag_is_refused_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str, accepted: str
) -> None:
    (tmp_path / "app.yaml").write_text(yaml.safe_dump(app(MEMORY)))
    with pytest.raises(SystemExit) as exit_:
        main(["render", "-f", str(tmp_path / "app.yaml"), flag, value])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert flag in err and repr(value) in err and accepted in err
    assert "Traceback" not in err
