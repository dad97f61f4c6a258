"""Named models on a real kube-apiserver: the model's key Secret reaches the pods of the
agents that use the model (and no others), and editing it rolls exactly those pods."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client as k8s
from operator_support import Api, cluster_app, eventually

from mas.infra.models import SecretKeyRef
from mas.infra.secrets import secret_env_name

pytestmark = [pytest.mark.envtest, pytest.mark.timeout(120)]

HASH = "maslab.io/secrets-hash"
KEY = SecretKeyRef(name="llm-keys", key="openai")


@pytest.fixture
def api(control_plane: Any, envtest_namespace: str) -> Api:
    return Api(control_plane.api_client(), envtest_namespace)


def models_app() -> dict[str, Any]:
    """front uses the named model gpt (its key from a Secret); back the keyless default."""
    doc = cluster_app()
    spec = doc["spec"]
    spec["models"] = {
        "gpt": {
            "provider": "openai",
            "model": "gpt-4o-mini",
            "key": {"secret_key_ref": {"name": KEY.name, "key": KEY.key}},
            "budget": {"session": 20000},
        },
        "local": {"provider": "openai", "model": "llama3", "endpoint": "http://vllm:8000/v1"},
    }
    spec["defaults"] = {"model": {"ref": "local"}}
    spec["agency"]["agents"]["front"]["spec"]["model"] = {"ref": "gpt"}
    del spec["endpoints"]["back"]["headers"]
    return doc


def _env(api: Api, name: str) -> dict[str, Any]:
    deployment = api.apps.read_namespaced_deployment(name, api.ns)
    return {e.name: e for e in deployment.spec.template.spec.containers[0].env}


def test_the_model_key_reaches_the_pods_that_use_it_and_rolls_them(
    start_operator: Any, api: Api
) -> None:
    start_operator()
    secret = k8s.V1Secret(metadata=k8s.V1ObjectMeta(name=KEY.name), string_data={KEY.key: "one"})
    api.core.create_namespaced_secret(api.ns, secret)
    api.create(models_app())

    def hashes() -> dict[str, str]:
        return {
            d.metadata.name: d.spec.template.metadata.annotations[HASH] for d in api.deployments()
        }

    first = eventually(lambda: len(hashes()) == 2 and hashes(), what="two Deployments")
    front = _env(api, "desk-front")
    variable = front[secret_env_name(KEY)]
    ref = variable.value_from.secret_key_ref
    assert (ref.name, ref.key) == (KEY.name, KEY.key)
    back = _env(api, "desk-back")
    assert not [e for e in back.values() if e.value_from and e.value_from.secret_key_ref]

    api.core.patch_namespaced_secret(KEY.name, api.ns, {"stringData": {KEY.key: "two"}})
    eventually(lambda: hashes()["desk-front"] != first["desk-front"], what="the front pods to roll")
    assert hashes()["desk-back"] == first["desk-back"]
    config = api.core.read_namespaced_config_map("desk-front", api.ns).data
    assert "one" not in str(config) and "two" not in str(config)


def test_an_unknown_model_ref_is_refused_naming_the_known_ones(
    start_operator: Any, api: Api
) -> None:
    start_operator()
    doc = models_app()
    doc["spec"]["agency"]["agents"]["back"] = {"spec": {"model": {"ref": "claude"}}}
    api.create(doc)

    def message() -> str:
        for condition in (api.get("desk").get("status") or {}).get("conditions", []):
            if "claude" in condition.get("message", ""):
                return str(condition["message"])
        return ""

    text = eventually(message, what="a condition naming the unknown ref")
    assert (
        "spec.agency.agents.back.spec.model.ref: 'claude' is not a model of spec.models; "
        "known: gpt, local"
    ) in text
    assert api.deployments() == []
