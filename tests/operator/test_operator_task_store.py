"""A SQLite task store in a cluster: the pod gets a PersistentVolumeClaim mounted at the
file's directory, is recreated rather than rolled, and Secret-backed store settings reach it
only by ``secretKeyRef``. The builders against golden YAML, and the refusals."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from mas.infra.errors import ApplicationInvalid
from mas.infra.models import SecretKeyRef
from mas.infra.secrets import secret_env_name
from mas_operator.children import build_children
from mas_operator.manifests import dump_manifests
from mas_operator.plan import plan_application

pytestmark = pytest.mark.timeout(30)

GOLDEN = Path(__file__).resolve().parent / "golden"
UPDATE = os.environ.get("MAS_UPDATE_GOLDEN") == "1"
PUSH_KEY = {"name": "desk-push", "key": "fernet"}


def sqlite_app(url: str = "sqlite+aiosqlite:////var/lib/maslab/tasks.db") -> dict[str, Any]:
    return {
        "apiVersion": "infra.maslab.io/v1",
        "kind": "Application",
        "metadata": {"name": "desk", "namespace": "team-a"},
        "spec": {
            "agency": {"entry": "front", "agents": {"front": {}, "back": {}}},
            "endpoints": {
                "front": {
                    "usage": "deploy",
                    "a2a": {
                        "capabilities": {"pushNotifications": True},
                        "task_store": {
                            "type": "sql",
                            "url": url,
                            "push_config_key_secret_key_ref": PUSH_KEY,
                        },
                    },
                },
                "back": {
                    "usage": "deploy",
                    "a2a": {
                        "task_store": {
                            "type": "sql",
                            "url_secret_key_ref": {"name": "desk-db", "key": "url"},
                        }
                    },
                },
            },
            "runtime": {"network_policy": {"enabled": False}},
        },
    }


def _deployment(children: list[dict[str, Any]], name: str) -> dict[str, Any]:
    [found] = [c for c in children if c["kind"] == "Deployment" and c["metadata"]["name"] == name]
    return found


def _kinds(children: list[dict[str, Any]], name: str) -> list[str]:
    return [c["kind"] for c in children if c["metadata"]["name"].startswith(name)]


def test_sqlite_children_match_golden() -> None:
    text = dump_manifests(build_children(plan_application(sqlite_app())))
    path = GOLDEN / "desk-sqlite.yaml"
    if UPDATE:
        path.write_text(text)
    assert path.exists(), f"{path} is missing; run with MAS_UPDATE_GOLDEN=1 to write it"
    assert text == path.read_text(), "desk-sqlite.yaml drifted; review, then MAS_UPDATE_GOLDEN=1"


def test_the_sqlite_pod_mounts_its_claim_and_is_recreated() -> None:
    children = build_children(plan_application(sqlite_app()))
    assert _kinds(children, "desk-front") == [
        "ConfigMap",
        "Service",
        "ServiceAccount",
        "PersistentVolumeClaim",
        "Deployment",
    ]
    [claim] = [c for c in children if c["kind"] == "PersistentVolumeClaim"]
    assert claim["metadata"]["name"] == "desk-front-tasks"
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    [front] = [
        c for c in children if c["kind"] == "Deployment" and c["metadata"]["name"] == "desk-front"
    ]
    pod = front["spec"]["template"]["spec"]
    assert {"name": "tasks", "persistentVolumeClaim": {"claimName": "desk-front-tasks"}} in pod[
        "volumes"
    ]
    assert {"name": "tasks", "mountPath": "/var/lib/maslab"} in pod["containers"][0]["volumeMounts"]
    assert front["spec"]["strategy"] == {"type": "Recreate"}
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    key_env = secret_env_name(SecretKeyRef(**PUSH_KEY))
    assert env[key_env]["valueFrom"] == {"secretKeyRef": PUSH_KEY}


def test_a_url_from_a_secret_reaches_the_pod_and_gets_no_claim() -> None:
    children = build_children(plan_application(sqlite_app()))
    assert "PersistentVolumeClaim" not in _kinds(children, "desk-back")
    [back] = [
        c for c in children if c["kind"] == "Deployment" and c["metadata"]["name"] == "desk-back"
    ]
    env = {e["name"]: e for e in back["spec"]["template"]["spec"]["containers"][0]["env"]}
    url_env = secret_env_name(SecretKeyRef(name="desk-db", key="url"))
    assert env[url_env]["valueFrom"] == {"secretKeyRef": {"name": "desk-db", "key": "url"}}
    assert "strategy" not in back["spec"]


def test_a_relative_sqlite_path_is_refused_naming_the_field() -> None:
    with pytest.raises(ApplicationInvalid) as caught:
        plan_application(sqlite_app("sqlite+aiosqlite:///tasks.db"))
    text = str(caught.value)
    assert "spec.endpoints.front.a2a.task_store.url" in text
    assert "'sqlite+aiosqlite:///tasks.db' needs an absolute path" in text


@pytest.mark.parametrize("runtime", [{"replicas": 2}, {"autoscaling": True}])
def test_sqlite_with_several_replicas_is_refused(runtime: dict[str, Any]) -> None:
    app = sqlite_app()
    app["spec"]["runtime"].update(runtime)
    with pytest.raises(ApplicationInvalid) as caught:
        plan_application(app)
    assert "a SQLite task store has one writer" in str(caught.value)
