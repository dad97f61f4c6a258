"""The operator's readiness on the real API server: the leader and a standby that reaches
the API server are ready; a standby cut off from it for a lease term is not, and is ready
again once it is answered."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fault_proxy import FaultProxy
from operator_support import RunningOperator, eventually

pytestmark = [pytest.mark.envtest, pytest.mark.timeout(120)]

HEALTH = "http://127.0.0.1:0/healthz"


def readyz(op: RunningOperator) -> httpx.Response:
    return httpx.get(f"http://127.0.0.1:{op.handle.liveness_port}/readyz", timeout=5)


def test_leader_and_standby_are_ready_and_a_cut_off_standby_is_not(
    start_operator: Any, start_proxied: Any, proxy: FaultProxy
) -> None:
    leader = start_operator(liveness=HEALTH)
    standby = start_proxied(wait_leading=False, liveness=HEALTH)
    eventually(
        lambda: leader.handle.liveness_port and standby.handle.liveness_port,
        what="both health listeners",
    )
    assert eventually(lambda: readyz(leader).status_code == 200 and readyz(leader)).json() == {
        "status": "ready",
        "leader": True,
    }
    answered = eventually(lambda: readyz(standby).status_code == 200 and readyz(standby))
    assert answered.json() == {"status": "ready", "leader": False}

    # The standby's Lease reads now fail: once a lease term (4 s here) passes without an
    # answer it is not ready, and says why; its liveness is unaffected.
    proxy.fail(["GET", "PUT", "POST"], r"/leases", 503, forever=True)
    cut_off = eventually(
        lambda: readyz(standby).status_code == 503 and readyz(standby),
        what="the cut-off standby to report not ready",
    )
    assert cut_off.json()["status"] == "not ready"
    assert "the API server has not answered for" in cut_off.json()["reason"]
    live = httpx.get(f"http://127.0.0.1:{standby.handle.liveness_port}/healthz", timeout=5)
    assert live.status_code == 200
    assert readyz(leader).status_code == 200

    proxy.clear()
    eventually(lambda: readyz(standby).status_code == 200, what="the standby ready again")
    assert not standby.handle.leading
