"""The install's console among the callers every agent admits: from ``mas-operator
--console-principal`` to each agent pod's environment, and from there (as ``mas-ctl serve``
reads it) to the agent's admission, its source named."""

from __future__ import annotations

from typing import Any, cast

import pytest
from operator_support import cluster_app

from mas.infra import identity
from mas.runtime.errors import HostError
from mas.runtime.identity.cluster import console_principal
from mas_operator.children import build_children
from mas_operator.cli import main
from mas_operator.handlers import OperatorContext
from mas_operator.metrics import OperatorMetrics
from mas_operator.plan import plan_application

pytestmark = pytest.mark.timeout(30)

CONSOLE = "system:serviceaccount:mas-system:mas-operator-console"


def _envs(console: str | None) -> dict[str, dict[str, str]]:
    plan = plan_application(cluster_app(), "team-a", console)
    return {
        d["metadata"]["labels"]["app.kubernetes.io/component"]: {
            e["name"]: e.get("value", "")
            for e in d["spec"]["template"]["spec"]["containers"][0]["env"]
        }
        for d in build_children(plan)
        if d["kind"] == "Deployment"
    }


def test_every_agent_admits_the_console_and_a_refusal_names_its_source() -> None:
    envs = _envs(CONSOLE)
    assert set(envs) == {"front", "back"}
    plan = plan_application(cluster_app(), "team-a")
    for agent, env in envs.items():
        assert env[identity.CONSOLE_ENV] == CONSOLE
        admission = identity.admission(
            plan.app, plan.wired.routes, agent, "team-a", console_principal(env)
        )
        rule = admission.admitted(CONSOLE)
        assert rule is not None and rule.source == identity.CONSOLE_SOURCE
        assert f"{CONSOLE} (the console of this install" in admission.describe()
        assert admission.admitted("system:serviceaccount:mas-system:stranger") is None


def test_without_the_option_no_agent_admits_a_console() -> None:
    plan = plan_application(cluster_app(), "team-a")
    for agent, env in _envs(None).items():
        assert identity.CONSOLE_ENV not in env
        admission = identity.admission(
            plan.app, plan.wired.routes, agent, "team-a", console_principal(env)
        )
        assert admission.admitted(CONSOLE) is None


def test_a_console_principal_that_is_not_a_service_account_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["render", "-f", str(tmp_path / "app.yaml"), "--console-principal", "alice"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "--console-principal: 'alice' is not a ServiceAccount subject" in err
    assert "system:serviceaccount:NAMESPACE:NAME" in err
    with pytest.raises(HostError, match="MAS_A2A_CONSOLE='alice' is not a ServiceAccount"):
        console_principal({identity.CONSOLE_ENV: "alice"})


def test_only_the_console_namespaces_agents_admit_it() -> None:
    everywhere = OperatorContext(cast(Any, None), OperatorMetrics(), console=CONSOLE)
    some = OperatorContext(
        cast(Any, None), OperatorMetrics(), console=CONSOLE, console_namespaces=("team-a",)
    )
    try:
        assert everywhere.console_for("team-b") == CONSOLE
        assert some.console_for("team-a") == CONSOLE
        assert some.console_for("team-b") is None
    finally:
        everywhere.close()
        some.close()


def test_console_namespaces_without_a_console_are_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["run", "-A", "--console-namespace", "team-a"]) == 2
    assert "--console-namespace needs --console-principal" in capsys.readouterr().err
