"""The console's cluster source on a real API server, with the operator running as the
operator tests run it: the example's page shows its edges as ``status.routes`` says, and an
edge turns Pending in the open page when its target's Deployment is scaled to 0.

No kubelet runs here: pods are marked Ready through pods/status, as tests/operator does."""

from __future__ import annotations

import asyncio
import re
import uuid
from typing import Any

import pytest
import yaml
from console_support import click_edge, console
from playwright.async_api import Page, expect
from tests.conftest import EXAMPLES
from tests.operator.operator_support import Api, RunningOperator, crd_document, eventually

from mas.console.cluster_source import ClusterError, ClusterSource
from mas_operator.runner import OperatorOptions

pytestmark = [pytest.mark.envtest, pytest.mark.integration, pytest.mark.timeout(240)]
APP = "research-desk"
WAIT = 60_000  # ms: a reconcile and a watch event on two busy cores


def start_operator(control_plane: Any, namespace: str) -> RunningOperator:
    options = OperatorOptions(
        namespaces=(namespace,),
        kubeconfig=str(control_plane.kubeconfig_path),
        resync=5.0,
        lease_namespace=namespace,
        identity=f"op-{uuid.uuid4().hex[:6]}",
        lease_duration=4.0,
        lease_renew=1.0,
    )
    return RunningOperator(options).start(True)


async def test_an_edge_turns_pending_when_its_target_is_scaled_to_zero(
    control_plane: Any, envtest_namespace: str, page: Page
) -> None:
    control_plane.apply_yaml(crd_document())
    api = Api(control_plane.api_client(), envtest_namespace)
    operator = await asyncio.to_thread(start_operator, control_plane, envtest_namespace)
    try:
        document = yaml.safe_load((EXAMPLES / "agency.yaml").read_text())
        document["spec"]["runtime"] = {"autoscaling": True}  # the scale below owns replicas
        await asyncio.to_thread(api.create, document)
        await asyncio.to_thread(
            eventually, lambda: api.mark_pods_ready() == 2, 60, what="two pods to stand in for"
        )
        source = ClusterSource.connect(
            [envtest_namespace], None, str(control_plane.kubeconfig_path)
        )
        async with console(source, page) as url:
            await page.goto(url + "/")
            row = page.locator(f'#apps tr[data-key="{envtest_namespace}/{APP}"]')
            await expect(row.locator('[data-col="edges"]')).to_have_text("3/5", timeout=WAIT)
            await expect(row.locator('[data-col="ready"]')).to_have_text("True")
            await row.get_by_role("link", name=APP).click()
            edge = page.locator('g.edge[data-key="concierge|researcher|a2a"]')
            await expect(edge).to_have_class(re.compile(r"\bstate-ready\b"), timeout=WAIT)
            agent = page.locator('tr[data-agent="researcher"]')
            await expect(agent).to_contain_text(f"{APP}-researcher.{envtest_namespace}.svc")

            await asyncio.to_thread(
                api.apps.patch_namespaced_deployment_scale,
                f"{APP}-researcher",
                envtest_namespace,
                {"spec": {"replicas": 0}},
            )
            # no reload: the watch pushes the new status into the open page
            await expect(edge).to_have_class(re.compile(r"\bstate-pending\b"), timeout=WAIT)
            await click_edge(page, edge)
            await expect(page.locator("#edge-detail")).to_contain_text("ScaledToZero")
            await expect(page.locator("#edge-detail")).to_contain_text("scaled to 0 replicas")
            await expect(agent.locator(".replicas")).to_have_text("0/0")
            await page.reload()
            await expect(page.locator("#events")).to_contain_text("EdgeNotReady", timeout=WAIT)
            warning = page.locator("#events tbody tr").first
            await expect(warning).to_contain_text("Warning")
    finally:
        await asyncio.to_thread(operator.stop)


def test_an_unreadable_kubeconfig_is_one_line(tmp_path: Any) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ClusterError, match=r"cannot load .*nope.yaml.*--kubeconfig PATH"):
        ClusterSource.connect([], None, str(missing))
