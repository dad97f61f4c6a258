"""A slow start is not a failed one: the liveness probe waits for the runtime's first answer.

Seen on the node (benchmarks/node_start.py, ten agents starting at once on two busy cores):
with only a liveness probe (10 s period, 3 failures) the kubelet killed runtimes still
importing, and they restarted in a loop without ever becoming Ready.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from mas_operator.children import build_children
from mas_operator.plan import plan_application

pytestmark = pytest.mark.timeout(30)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agency.yaml"


def test_agent_pods_have_a_startup_probe_that_holds_off_liveness() -> None:
    children = build_children(plan_application(yaml.safe_load(EXAMPLE.read_text()), "demo"))
    deployments = [c for c in children if c["kind"] == "Deployment"]
    assert deployments
    for deployment in deployments:
        [container] = deployment["spec"]["template"]["spec"]["containers"]
        startup, liveness = container["startupProbe"], container["livenessProbe"]
        assert startup["httpGet"] == liveness["httpGet"]  # the same /healthz on the A2A port
        allowed = startup["periodSeconds"] * startup["failureThreshold"]
        killed_after = liveness["periodSeconds"] * liveness["failureThreshold"]
        assert allowed >= 10 * killed_after, (allowed, killed_after)
