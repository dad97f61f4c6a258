"""Conformance Jobs on the real API server, their verdicts from real probe runs.

There is no kubelet: the Job controller creates each probe pod, but nothing runs it. The test
runs the pod's command itself, exactly as the Job's manifest has it, with two substitutions:
``mas-ctl`` is this interpreter's, and the in-cluster Service URL is a ``mas-ctl serve`` of the
agent's own ConfigMap on 127.0.0.1. What the command writes to its ``--result-file`` is then
written, as the kubelet would, into the pod's terminated container state (the pods/status
subresource), and the operator reads it from there.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from operator_support import (
    GROUP,
    PLURAL,
    VERSION,
    Api,
    eventually,
    printer_columns,
    serve_agent,
    wait_condition,
)

from mas.infra.conformance import ConformanceResult

pytestmark = [pytest.mark.envtest, pytest.mark.timeout(300)]  # six cold mas-ctl processes

APP = "desk"
AGENTS = ("back", "front")
MAS_CTL = [sys.executable, "-m", "mas.ctl.cli"]


@pytest.fixture
def api(control_plane: Any, envtest_namespace: str) -> Api:
    return Api(control_plane.api_client(), envtest_namespace)


def conformance_app() -> dict[str, Any]:
    """Two deployed agents, one of them with gRPC; conformance Jobs asked for."""
    return {
        "apiVersion": "infra.maslab.io/v1",
        "kind": "Application",
        "metadata": {"name": APP},
        "spec": {
            "agency": {
                "entry": "front",
                "agents": {"front": {"spec": {"delegates_to": ["back"]}}, "back": {}},
            },
            "endpoints": {
                "front": {"usage": "deploy"},
                "back": {"usage": "use-and-deploy", "a2a": {"grpc_port": 9090}},
            },
            # each probe call's deadline: generous, a busy machine answers slowly; the
            # failing check of run 2 is a refused connection, which fails at once
            "conformance": {"enabled": True, "timeout_seconds": 60},
        },
    }


@contextlib.contextmanager
def serve_configmap(api: Api, agent: str, tmp: Path, *, dead_grpc: bool = False) -> Iterator[str]:
    """``mas-ctl serve`` of the ConfigMap the operator wrote for ``agent``, on 127.0.0.1."""
    data = api.core.read_namespaced_config_map(f"{APP}-{agent}", api.ns).data
    document = tmp / f"{agent}.yaml"
    document.write_text(data["application.yaml"])
    with serve_agent(document, agent, tmp, grpc=agent == "back", dead_grpc=dead_grpc) as url:
        yield url


def conformance_jobs(api: Api) -> dict[str, Any]:
    """The conformance Jobs of the namespace, keyed by the agent they probe."""
    jobs = (
        k8s.BatchV1Api(api.client)
        .list_namespaced_job(api.ns, label_selector="maslab.io/conformance-agent")
        .items
    )
    return {j.metadata.labels["maslab.io/conformance-agent"]: j for j in jobs}


def mark_agent_pods_ready(api: Api) -> int:
    """Stand in for the kubelet for the agents' pods only (never a probe pod)."""
    stamp = "2026-01-01T00:00:00Z"
    ready = [
        {"type": t, "status": "True", "lastTransitionTime": stamp}
        for t in ("Ready", "ContainersReady")
    ]
    pods = api.core.list_namespaced_pod(
        api.ns, label_selector="app.kubernetes.io/name=mas-agent"
    ).items
    for pod in pods:
        body = {"status": {"phase": "Running", "conditions": ready}}
        api.core.patch_namespaced_pod_status(pod.metadata.name, api.ns, body)
    return len(pods)


def start_job_command(job: Any, card_url: str, tmp: Path) -> tuple[subprocess.Popen[str], Path]:
    """The Job's container command, started here; its process and its result file."""
    [container] = job.spec.template.spec.containers
    argv = list(container.command)
    assert argv[0] == "mas-ctl"
    url_at = argv.index("--url") + 1
    assert argv[url_at].endswith(".svc:8080/.well-known/agent-card.json")
    result_at = argv.index("--result-file") + 1
    assert argv[result_at] == container.termination_message_path == "/dev/termination-log"
    result_file = tmp / f"{container.name}-termination-log"
    argv[url_at], argv[result_at] = card_url, str(result_file)
    process = subprocess.Popen(
        [*MAS_CTL, *argv[1:]], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    return process, result_file


def finish_job_command(process: subprocess.Popen[str], result_file: Path) -> tuple[int, str]:
    """Wait for a started command: its exit code and the result file's content."""
    try:
        stdout, stderr = process.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise
    assert process.returncode in (0, 1), stderr
    ConformanceResult.model_validate_json(stdout)  # -o json: the whole result on stdout
    return process.returncode, result_file.read_text()


def terminate_probe_pod(api: Api, job: Any, code: int, message: str) -> None:
    """What the kubelet reports when the probe container exits: its termination message."""
    pods = eventually(
        lambda: (
            api.core.list_namespaced_pod(
                api.ns, label_selector=f"batch.kubernetes.io/job-name={job.metadata.name}"
            ).items
        ),
        what=f"the pod of Job {job.metadata.name}",
    )
    [container] = job.spec.template.spec.containers
    stamp = "2026-01-01T00:00:00Z"
    terminated = {
        "exitCode": code,
        "reason": "Completed" if code == 0 else "Error",
        "message": message,
        "startedAt": stamp,
        "finishedAt": stamp,
    }
    status = {
        "phase": "Succeeded" if code == 0 else "Failed",
        "containerStatuses": [
            {
                "name": container.name,
                "image": container.image,
                "imageID": "",
                "ready": False,
                "restartCount": 0,
                "state": {"terminated": terminated},
            }
        ],
    }
    api.core.patch_namespaced_pod_status(pods[0].metadata.name, api.ns, {"status": status})


def probe(api: Api, jobs: dict[str, Any], urls: dict[str, str], tmp: Path) -> dict[str, int]:
    """Run every Job's command against ``urls`` (all at once, as the Jobs' pods would run)
    and report each result through its pod."""
    started = {
        agent: start_job_command(job, urls[agent] + "/.well-known/agent-card.json", tmp)
        for agent, job in jobs.items()
    }
    codes = {}
    for agent, job in jobs.items():
        code, message = finish_job_command(*started[agent])
        terminate_probe_pod(api, job, code, message)
        codes[agent] = code
    return codes


def agent_verdicts(api: Api) -> dict[str, Any]:
    agents = api.get(APP)["status"]["agents"]
    return {name: agents[name].get("conformant") for name in AGENTS}


def test_conformant_is_set_from_the_probe_results_of_the_jobs_commands(
    start_operator: Any, api: Api, tmp_path: Path
) -> None:
    restricted = {
        "pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/enforce-version": "latest",
    }
    api.core.patch_namespace(api.ns, {"metadata": {"labels": restricted}})  # probe pods too
    start_operator(resync=120.0)  # watches drive it all, the re-run annotation included
    uid = api.create(conformance_app())["metadata"]["uid"]
    pending = wait_condition(api, APP, "Conformant", "Unknown")
    assert pending["reason"] == "ProbePending"
    assert conformance_jobs(api) == {}  # nothing is probed before the rollout is complete
    assert printer_columns(api, APP)["Conformant"] == "Unknown"

    eventually(lambda: mark_agent_pods_ready(api) == 2, what="two agent pods to stand in for")
    wait_condition(api, APP, "Ready", "True")
    first = eventually(lambda: len(jobs := conformance_jobs(api)) == 2 and jobs, what="two Jobs")
    for agent, job in first.items():
        ref = job.metadata.owner_references[0]
        assert (ref.kind, ref.uid, ref.controller) == ("Application", uid, True)
        assert job.spec.template.spec.containers[0].name == agent
    running = wait_condition(api, APP, "Conformant", "Unknown")
    assert running["reason"] in ("ProbePending", "ProbeRunning")

    # Run 1: both agents served as configured: conformant.
    with (
        serve_configmap(api, "front", tmp_path) as front,
        serve_configmap(api, "back", tmp_path) as back,
    ):
        codes = probe(api, first, {"front": front, "back": back}, tmp_path)
    assert codes == {"front": 0, "back": 0}
    passed = wait_condition(api, APP, "Conformant", "True")
    assert (passed["reason"], passed["message"]) == (
        "ChecksPassed",
        "2/2 deployed agents conformant",
    )
    verdicts = agent_verdicts(api)
    assert {a: (v["status"], v["reason"]) for a, v in verdicts.items()} == {
        "front": ("True", "ChecksPassed"),
        "back": ("True", "ChecksPassed"),
    }
    assert re.fullmatch(r"\d+ passed, 0 failed, \d+ skipped", verdicts["back"]["message"])
    assert verdicts["back"]["checked_at"].endswith("Z")
    assert printer_columns(api, APP)["Conformant"] == "True"
    assert api.condition(APP, "Ready")["status"] == "True"

    # Run 2, on demand: back's card advertises gRPC where nothing listens.
    api.custom.patch_namespaced_custom_object(
        GROUP, VERSION, api.ns, PLURAL, APP,
        {"metadata": {"annotations": {"maslab.io/conformance-run": "2"}}},
    )  # fmt: skip
    old = {j.metadata.name for j in first.values()}
    second = eventually(
        lambda: (
            len(jobs := conformance_jobs(api)) == 2
            and not {j.metadata.name for j in jobs.values()} & old
            and jobs
        ),
        what="two new Jobs replacing the first run's",
    )  # fmt: skip
    with (
        serve_configmap(api, "front", tmp_path) as front,
        serve_configmap(api, "back", tmp_path, dead_grpc=True) as back,
    ):
        codes = probe(api, second, {"front": front, "back": back}, tmp_path)
    assert codes == {"front": 0, "back": 1}
    eventually(
        lambda: all(v and v["status"] != "Unknown" for v in agent_verdicts(api).values()),
        what="both verdicts of the second run",
    )
    failed = wait_condition(api, APP, "Conformant", "False")
    assert failed["reason"] == "ChecksFailed"
    assert failed["message"].startswith("1/2 deployed agents not conformant: back: ")
    assert "GRPC send-message: " in failed["message"]
    verdicts = agent_verdicts(api)
    assert (verdicts["front"]["status"], verdicts["back"]["status"]) == ("True", "False")
    assert "GRPC send-message" in verdicts["back"]["message"]
    assert printer_columns(api, APP)["Conformant"] == "False"
    events = eventually(
        lambda: [
            e
            for e in api.core.list_namespaced_event(api.ns).items
            if e.involved_object.uid == uid and e.reason == "ChecksFailed"
        ],
        what="the Warning Event",
    )
    assert events[0].type == "Warning"
    assert "back: " in events[0].message and "GRPC send-message" in events[0].message
    ready = api.condition(APP, "Ready")
    assert (ready["status"], ready["reason"]) == ("True", "AllAgentsReady")  # never driven

    # Switched off: the Jobs go, and so do the verdicts.
    spec = conformance_app()["spec"]
    spec["conformance"] = {"enabled": False}
    api.patch_spec(APP, spec)
    eventually(lambda: conformance_jobs(api) == {}, what="the Jobs to be deleted")
    eventually(lambda: api.condition(APP, "Conformant") is None, what="Conformant to go")
    assert agent_verdicts(api) == {"front": None, "back": None}
