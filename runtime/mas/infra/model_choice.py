"""Which model an agent runs, and the rules of ``spec.models`` and the agents' model refs.

An agent's model is its ``spec.model`` when set, else ``spec.defaults.model``, else the
``echo`` plugin. A selector names a plugin inline (``type`` and ``params``) or a named model
of ``spec.models`` (``ref``). A named model becomes the plugin ``provider`` with the params
every model plugin that serves named models accepts:

- ``model``: the named model's ``model``;
- ``base_url``: its ``endpoint`` (absent: the plugin's own default);
- ``api_key_env``: the environment variable that holds its ``key`` (the operator fills it
  from the Secret through ``valueFrom.secretKeyRef``; :func:`mas.infra.secrets.secret_env_name`);

then the named model's ``params``, then the agent's own ``params`` over them. The budget is
the agent's ``model.budget`` when set, else the named model's.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from mas.infra.errors import Problem
from mas.infra.models import (
    AgentManifest,
    ApplicationSpec,
    ModelSelector,
    NamedModel,
    SecretKeyRef,
    TokenBudget,
)
from mas.infra.secrets import secret_env_name

DEFAULT_MODEL = ModelSelector(type="echo")
NAMED_MODEL_PARAMS = ("model", "base_url", "api_key_env")
KEYED_PROVIDERS = frozenset({"anthropic"})  # no keyless server speaks these APIs


@dataclass(frozen=True)
class ModelChoice:
    """The model plugin one agent runs, with what the operator and telemetry need of it."""

    plugin: str
    params: Mapping[str, Any] = field(default_factory=dict)
    ref: str | None = None  # the name in spec.models, for a named model
    key: SecretKeyRef | None = None
    budget: TokenBudget | None = None

    @property
    def model(self) -> str | None:
        """The provider's model name, when the params say one."""
        name = self.params.get("model")
        return name if isinstance(name, str) else None


def selector_of(spec: ApplicationSpec, manifest: AgentManifest) -> ModelSelector:
    """The agent's model selector: its own, else ``defaults.model``, else echo."""
    return manifest.spec.model or spec.defaults.model or DEFAULT_MODEL


def model_choice(spec: ApplicationSpec, agent_id: str) -> ModelChoice:
    """The model of ``agent_id`` (a validated document: a ref names a model of spec.models)."""
    selector = selector_of(spec, spec.agency.agents[agent_id])
    if selector.ref is None:
        assert selector.type is not None  # the selector's own validator
        return ModelChoice(selector.type, dict(selector.params), budget=selector.budget)
    named = spec.models.get(selector.ref)
    if named is None:
        raise LookupError(
            f"agent {agent_id!r}: model ref {selector.ref!r} is not a model of spec.models"
        )
    return ModelChoice(
        named.provider,
        {**named_params(named), **selector.params},
        ref=selector.ref,
        key=named.key.secret_key_ref if named.key is not None else None,
        budget=selector.budget or named.budget,
    )


def named_params(named: NamedModel) -> dict[str, Any]:
    """The plugin params of a named model (module docstring)."""
    params: dict[str, Any] = {"model": named.model}
    if named.endpoint is not None:
        params["base_url"] = named.endpoint
    if named.key is not None:
        params["api_key_env"] = secret_env_name(named.key.secret_key_ref)
    return {**named.params, **params}


def model_problems(spec: ApplicationSpec, known: Collection[str]) -> list[Problem]:
    """Every broken rule of ``spec.models`` and of the agents' (and defaults') model selectors."""
    problems: list[Problem] = []
    plugins = ", ".join(sorted(known))
    for name, named in spec.models.items():
        where = f"spec.models.{name}"
        if named.provider not in known:
            problems.append(
                Problem(
                    f"{where}.provider",
                    f"{named.provider!r} is not a known model plugin; known: {plugins}",
                )
            )
        for param in NAMED_MODEL_PARAMS:
            if param in named.params:
                problems.append(
                    Problem(
                        f"{where}.params.{param}",
                        "is set by the named model's model, endpoint and key fields; set it there",
                    )
                )
        if named.key is None and _needs_key(named):
            problems.append(
                Problem(
                    f"{where}.key",
                    f"is required for provider {named.provider!r}"
                    + (" on Azure" if "azure" in named.params else "")
                    + (" at its default endpoint" if named.endpoint is None else "")
                    + " (key: {secret_key_ref: {name: SECRET, key: KEY}})",
                )
            )
    selectors: list[tuple[str, ModelSelector | None]] = [
        ("spec.defaults.model", spec.defaults.model)
    ]
    selectors += [
        (f"spec.agency.agents.{agent_id}.spec.model", manifest.spec.model)
        for agent_id, manifest in spec.agency.agents.items()
    ]
    for where, selector in selectors:
        if selector is not None:
            problems += _selector_problems(where, selector, spec.models, plugins, known)
    return problems


def _needs_key(named: NamedModel) -> bool:
    if named.provider in KEYED_PROVIDERS:
        return True
    return named.provider == "openai" and (named.endpoint is None or "azure" in named.params)


def _selector_problems(
    where: str,
    selector: ModelSelector,
    models: Mapping[str, NamedModel],
    plugins: str,
    known: Collection[str],
) -> list[Problem]:
    if selector.ref is not None and selector.ref not in models:
        names = ", ".join(sorted(models)) or "(none: spec.models is empty)"
        return [
            Problem(
                f"{where}.ref",
                f"{selector.ref!r} is not a model of spec.models; known: {names}",
            )
        ]
    if selector.ref is not None:
        return [
            Problem(
                f"{where}.params.{param}",
                f"is set by spec.models.{selector.ref}; a ref cannot change it",
            )
            for param in NAMED_MODEL_PARAMS
            if param in selector.params
        ]
    if selector.type is not None and selector.type not in known:
        return [
            Problem(
                f"{where}.type", f"{selector.type!r} is not a known model plugin; known: {plugins}"
            )
        ]
    return []
