"""The README's path on a real node: helm install the chart, apply the example, talk A2A.

Everything here runs for real: pods from the project image on a kubelet, readiness probes,
Services through kube-proxy, cluster DNS, conformance Jobs and the chart's `helm test` Job.
The tests share one deployment and run in file order (each leaves it Ready).
"""

from __future__ import annotations

import asyncio
import copy

import pytest

from .agency import NS, OPERATOR_NS, RELEASE, Desk, a2a_client, ask, pod_ready
from .support import eventually, helm, scripted_concierge

pytestmark = [pytest.mark.node, pytest.mark.timeout(900)]


def test_the_application_is_ready_through_the_pods_readiness_probes(desk: Desk) -> None:
    assert desk.condition("Ready")["status"] == "True"  # type: ignore[index]
    for agent in ("concierge", "researcher"):
        [pod] = desk.pods(agent)
        assert pod.spec.node_name == "masnode"
        ready = next(c for c in pod.status.conditions if c.type == "Ready")
        assert ready.status == "True", pod.status
        [container] = pod.status.container_statuses
        assert container.ready and container.started
        assert pod.status.pod_ip.startswith("10.244.0.")
    assert desk.pods("summarizer") == []  # a private worker runs in-process, no pod


async def test_a_client_outside_the_pods_talks_to_the_entry_agent(desk: Desk) -> None:
    async with a2a_client(desk.card_url("concierge")) as client:
        assert await ask(client, "hello from the host") == "hello from the host"


async def test_the_example_as_shipped_answers_across_two_pods(desk: Desk) -> None:
    # "research <topic>" is the shipped concierge's rule for the researcher, a pod of its own;
    # "sources on ..." is the researcher's echo of the delegated message.
    async with a2a_client(desk.card_url("concierge")) as client:
        assert await ask(client, "research the shipped example") == (
            "found: sources on the shipped example"
        )


def test_conformance_jobs_run_and_set_conformant(desk: Desk) -> None:
    desk.wait_condition("Conformant", timeout=600)
    agents = desk.app()["status"]["agents"]
    assert {a: s["conformant"]["status"] for a, s in agents.items()} == {
        "concierge": "True",
        "researcher": "True",
    }
    # The verdicts come from probe Jobs that ran in pods on this node.
    assert all(s["conformant"]["checked_at"] for s in agents.values()), agents
    pods = desk.core.list_namespaced_pod(NS, label_selector="batch.kubernetes.io/job-name").items
    assert pods and {p.spec.node_name for p in pods} == {"masnode"}


def test_helm_test_passes(desk: Desk) -> None:
    done = helm(desk.node.kubeconfig, "test", RELEASE, "-n", OPERATOR_NS, "--timeout", "10m")
    assert done.returncode == 0, f"helm test failed:\n{done.stdout}\n{done.stderr}"
    assert "Phase:          Succeeded" in done.stdout


async def test_a_spec_change_rolls_the_pods_with_no_failed_request(desk: Desk) -> None:
    before = {p.metadata.uid for p in desk.pods("concierge")}
    failures: list[str] = []
    answered = 0
    stop = asyncio.Event()

    async def traffic() -> None:
        nonlocal answered
        async with a2a_client(desk.card_url("concierge")) as client:
            while not stop.is_set():
                try:
                    await ask(client, f"ping {answered}")
                    answered += 1
                except Exception as e:  # every failure is reported, none retried
                    failures.append(repr(e))

    sender = asyncio.create_task(traffic())
    try:
        generation = desk.apply(scripted_concierge(copy.deepcopy(desk.doc)))

        def rolled() -> bool:
            uids = {p.metadata.uid for p in desk.pods("concierge")}
            return bool(uids and not uids & before and desk.ready_at(generation))

        await asyncio.to_thread(eventually, rolled, "the concierge's pods replaced and Ready")
        served = answered
        await asyncio.to_thread(eventually, lambda: answered > served + 3, "traffic after it")
    finally:
        stop.set()
        await sender
    assert failures == []
    assert answered > 0


async def test_a_request_crosses_two_pods_through_the_researchers_service(desk: Desk) -> None:
    await asyncio.to_thread(desk.scripted)
    async with a2a_client(desk.card_url("concierge")) as client:
        answer = await ask(client, "research node tiers")
    # "sources on ..." is the researcher's echo of the delegated message: only its pod says it.
    assert answer == "found: sources on node tiers"


async def test_a_killed_agent_pod_is_replaced_and_the_application_is_ready_again(
    desk: Desk,
) -> None:
    await asyncio.to_thread(desk.scripted)
    [victim] = desk.pods("researcher")
    desk.core.delete_namespaced_pod(victim.metadata.name, NS, grace_period_seconds=0)

    def replaced() -> bool:
        pods = desk.pods("researcher")
        ready = desk.condition("Ready") or {}
        if (
            pods
            and all(p.metadata.uid != victim.metadata.uid and pod_ready(p) for p in pods)
            and ready.get("status") == "True"
        ):
            return True
        # not yet: what was seen, so a timeout names it (eventually() keeps the last one)
        seen = [
            desk.describe(p) + (" (killed)" if p.metadata.uid == victim.metadata.uid else "")
            for p in pods
        ]
        raise AssertionError(
            f"researcher pods: {seen}; Ready: {ready.get('status')} {ready.get('reason')}"
        )

    await asyncio.to_thread(eventually, replaced, "a new researcher pod and Ready=True")
    # The Service follows the new pod once kube-proxy has synced: delegation recovers.
    deadline = asyncio.get_running_loop().time() + 60
    async with a2a_client(desk.card_url("concierge")) as client:
        while (answer := await ask(client, "research recovery")) != "found: sources on recovery":
            assert asyncio.get_running_loop().time() < deadline, answer
            await asyncio.sleep(0.5)
