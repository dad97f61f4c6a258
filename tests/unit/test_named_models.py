"""Named models (spec.models), the agents' model refs, defaults.model and their rules."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from mas.infra.documents import load_document
from mas.infra.errors import ApplicationInvalid
from mas.infra.model_choice import model_choice
from mas.infra.models import SecretKeyRef
from mas.infra.secrets import secret_env_name
from mas.infra.validation import check_application, parse_application
from tests.unit.documents import document

GPT: dict[str, Any] = {
    "provider": "openai",
    "model": "gpt-4o-mini",
    "endpoint": "https://api.openai.com/v1",
    "key": {"secret_key_ref": {"name": "llm-keys", "key": "openai"}},
    "params": {"temperature": 0.2},
    "budget": {"session": 20000},
}
LOCAL: dict[str, Any] = {
    "provider": "openai",
    "model": "llama3",
    "endpoint": "http://vllm.models:8000/v1",
}


def _doc(models: dict[str, Any], lead: Any = None, worker: Any = None) -> dict[str, Any]:
    doc = document(models=models)
    agents = doc["spec"]["agency"]["agents"]
    if lead is not None:
        agents["lead"]["spec"]["model"] = lead
    if worker is not None:
        agents["worker"] = {"spec": {"model": worker}}
    return doc


def _problems(doc: dict[str, Any]) -> list[str]:
    try:
        return [str(p) for p in check_application(parse_application(doc))]
    except ApplicationInvalid as exc:
        return [str(p) for p in exc.problems]


def test_a_ref_becomes_the_provider_plugin_with_the_named_params() -> None:
    doc = _doc({"gpt": GPT, "local": LOCAL}, lead={"ref": "gpt", "params": {"max_tokens": 50}})
    doc["spec"]["defaults"] = {"model": {"ref": "local"}}
    app = parse_application(doc)
    assert check_application(app) == []
    lead = model_choice(app.spec, "lead")
    assert (lead.plugin, lead.ref, lead.model) == ("openai", "gpt", "gpt-4o-mini")
    assert dict(lead.params) == {
        "model": "gpt-4o-mini",
        "base_url": "https://api.openai.com/v1",
        "api_key_env": secret_env_name(SecretKeyRef(name="llm-keys", key="openai")),
        "temperature": 0.2,
        "max_tokens": 50,
    }
    assert lead.key == SecretKeyRef(name="llm-keys", key="openai")
    assert lead.budget is not None and lead.budget.session == 20000
    worker = model_choice(app.spec, "worker")  # no model of its own: defaults.model
    assert (worker.plugin, worker.ref, worker.key, worker.budget) == ("openai", "local", None, None)
    assert dict(worker.params) == {"model": "llama3", "base_url": "http://vllm.models:8000/v1"}


def test_inline_models_keep_working_and_echo_stays_the_default() -> None:
    app = parse_application(_doc({}, lead={"type": "scripted", "params": {"rules": []}}))
    assert check_application(app) == []
    assert model_choice(app.spec, "lead").plugin == "scripted"
    assert dict(model_choice(app.spec, "lead").params) == {"rules": []}
    assert model_choice(app.spec, "worker").plugin == "echo"


def test_an_unknown_ref_is_named_with_the_known_ones() -> None:
    doc = _doc({"gpt": GPT, "local": LOCAL}, lead={"ref": "claude"})
    doc["spec"]["defaults"] = {"model": {"ref": "nothing"}}
    assert _problems(doc) == [
        "spec.agency.agents.lead.spec.model.ref: 'claude' is not a model of spec.models; "
        "known: gpt, local",
        "spec.defaults.model.ref: 'nothing' is not a model of spec.models; known: gpt, local",
    ]
    assert _problems(_doc({}, worker={"ref": "gpt"})) == [
        "spec.agency.agents.worker.spec.model.ref: 'gpt' is not a model of spec.models; "
        "known: (none: spec.models is empty)"
    ]


def test_unknown_provider_missing_key_and_overridden_fields_are_refused() -> None:
    doc = _doc(
        {
            "x": {**LOCAL, "provider": "gpt-banana"},
            "public": {"provider": "openai", "model": "gpt-4o"},
            "azure": {**LOCAL, "params": {"azure": {"api_version": "2024-10-21"}}},
            "dup": {**LOCAL, "params": {"base_url": "http://other:1/v1"}},
        },
        lead={"ref": "public", "params": {"model": "other"}},
    )
    assert _problems(doc) == [
        "spec.agency.agents.lead.spec.model.params.model: is set by spec.models.public; "
        "a ref cannot change it",
        "spec.models.azure.key: is required for provider 'openai' on Azure "
        "(key: {secret_key_ref: {name: SECRET, key: KEY}})",
        "spec.models.dup.params.base_url: is set by the named model's model, endpoint and key "
        "fields; set it there",
        "spec.models.public.key: is required for provider 'openai' at its default endpoint "
        "(key: {secret_key_ref: {name: SECRET, key: KEY}})",
        "spec.models.x.provider: 'gpt-banana' is not a known model plugin; known: anthropic, "
        "echo, openai, scripted",
    ]
    claude = {"provider": "anthropic", "model": "claude-x", "endpoint": "http://proxy:8080"}
    assert _problems(_doc({"claude": claude})) == [
        "spec.models.claude.key: is required for provider 'anthropic' "
        "(key: {secret_key_ref: {name: SECRET, key: KEY}})"
    ]


@pytest.mark.parametrize(
    ("budget", "path"),
    [
        ({"turn": 0}, "spec.models.gpt.budget.turn"),
        ({"session": -5}, "spec.models.gpt.budget.session"),
        ({"period": {"tokens": 0}}, "spec.models.gpt.budget.period.tokens"),
        ({"period": {"tokens": 10, "seconds": 0}}, "spec.models.gpt.budget.period.seconds"),
    ],
)
def test_a_budget_of_zero_or_less_is_refused_with_its_path(
    budget: dict[str, Any], path: str
) -> None:
    problems = _problems(_doc({"gpt": {**GPT, "budget": budget}}))
    assert len(problems) == 1
    assert problems[0].startswith(f"{path}: ")
    assert "greater than 0" in problems[0]


def test_a_selector_needs_exactly_one_of_type_or_ref() -> None:
    for selector in ({"type": "echo", "ref": "gpt"}, {"params": {}}):
        problems = _problems(_doc({"gpt": GPT}, lead=selector))
        assert len(problems) == 1
        assert problems[0].startswith("spec.agency.agents.lead.spec.model: ")
        assert problems[0].endswith("set exactly one of type or ref")


def test_an_infra_ref_brings_the_named_models(tmp_path: Path) -> None:
    base = _doc({}, lead={"ref": "gpt"})
    infra = {"spec": {"models": {"gpt": GPT}, "defaults": {"model": {"ref": "gpt"}}}}
    (tmp_path / "app.yaml").write_text(yaml.safe_dump(base))
    (tmp_path / "infra.yaml").write_text(yaml.safe_dump(infra))
    merged = load_document(tmp_path / "app.yaml", infra_refs=[tmp_path / "infra.yaml"])
    app = parse_application(merged)
    assert check_application(app) == []
    assert model_choice(app.spec, "lead").ref == "gpt"
    assert model_choice(app.spec, "worker").ref == "gpt"
