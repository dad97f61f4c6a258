"""RuntimeHost: what a runtime process hosts, its routes and Secret-backed headers."""

from __future__ import annotations

from pathlib import Path

import pytest
from runtime_support import RecordingComm, collect, ended, registry_with, wired

from mas.ctl.session.host import RuntimeHost
from mas.infra.documents import read_yaml_file
from mas.infra.models import SecretKeyRef
from mas.infra.secrets import secret_env_name
from mas.infra.wiring import Wired, wire
from mas.runtime.comm.local import LocalAgentComm
from mas.runtime.errors import HostError, PluginConfigError
from mas.runtime.turns import TurnInput

pytestmark = pytest.mark.timeout(30)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agency.yaml"


async def test_the_example_agency_hosts_each_runtime_with_its_private_workers() -> None:
    app = wire(read_yaml_file(EXAMPLE))
    RecordingComm.instances.clear()
    registry = registry_with(a2a=RecordingComm)
    concierge = RuntimeHost.build(app, ["concierge"], registry=registry, env={})
    researcher = RuntimeHost.build(app, ["researcher"], registry=registry, env={})
    try:
        assert concierge.agents == ("concierge", "summarizer")
        assert researcher.agents == ("researcher", "summarizer")
        assert concierge.manifest("concierge").metadata.name == "Concierge"
        built = {(c.params.get("url"), c.params.get("timeout")) for c in RecordingComm.instances}
        # concierge -> researcher and researcher -> web-search go over the endpoint protocol
        assert built == {("http://127.0.0.1:8402", 60.0), ("http://127.0.0.1:8403", 10.0)}
        [web] = [c for c in RecordingComm.instances if c.params["url"].endswith(":8403")]
        assert web.params["headers"] == {"X-Tenant": "research-desk"}
        final = ended(
            await collect(
                concierge.mailbox("concierge").submit(TurnInput("s", "t", "hello there")).events()
            )
        )
        assert (final.status, final.text) == ("completed", "hello there")  # echo model
        with pytest.raises(HostError, match="agent 'researcher' is not hosted here"):
            concierge.mailbox("researcher")
    finally:
        await concierge.aclose()
        await researcher.aclose()
    assert all(c.closed for c in RecordingComm.instances)


async def test_only_routes_to_agents_this_application_deploys_carry_the_token(
    tmp_path: Path,
) -> None:
    token = tmp_path / "token"
    token.write_text("agent-token\n")
    app = wire(read_yaml_file(EXAMPLE))
    RecordingComm.instances.clear()
    registry = registry_with(a2a=RecordingComm)
    env = {"MAS_A2A_TOKEN_FILE": str(token)}
    concierge = RuntimeHost.build(app, ["concierge"], registry=registry, env=env)
    researcher = RuntimeHost.build(app, ["researcher"], registry=registry, env=env)
    try:
        by_url = {c.params["url"]: c.params for c in RecordingComm.instances}
        # concierge -> researcher: a deployed agent of this Application
        assert by_url["http://127.0.0.1:8402"]["identity"]() == "agent-token"
        # researcher -> web-search: usage use, an agent elsewhere; its headers only
        assert "identity" not in by_url["http://127.0.0.1:8403"]
        assert by_url["http://127.0.0.1:8403"]["headers"] == {"X-Tenant": "research-desk"}
    finally:
        await concierge.aclose()
        await researcher.aclose()


async def test_local_routes_use_the_mas_wide_comm_variant_with_its_params() -> None:
    registry = registry_with()
    built: list[dict[str, object]] = []

    def local(**params: object) -> LocalAgentComm:
        built.append(params)
        return LocalAgentComm(**params)  # type: ignore[arg-type]

    registry.register("agent_comm", "local", local)
    app = wired(
        {"a": {"delegates_to": ["b"]}, "b": {}},
        agent_comm={"type": "local", "params": {"timeout": 5}},
    )
    host = RuntimeHost.build(app, ["a"], registry=registry)
    try:
        assert len(built) == 1 and built[0]["timeout"] == 5 and "bus" in built[0]
    finally:
        await host.aclose()


def secret_app() -> Wired:
    return wired(
        {"boss": {"delegates_to": ["ext"]}},
        endpoints={
            "ext": {
                "url": "http://127.0.0.1:9",
                "usage": "use",
                "headers": {
                    "Authorization": {"secret_key_ref": {"name": "ext-token", "key": "bearer"}},
                    "X-Plain": {"value": "plain"},
                },
            }
        },
    )


async def test_secret_headers_resolve_from_the_pod_environment() -> None:
    variable = secret_env_name(SecretKeyRef(name="ext-token", key="bearer"))
    RecordingComm.instances.clear()
    host = RuntimeHost.build(
        secret_app(),
        ["boss"],
        registry=registry_with(a2a=RecordingComm),
        env={variable: "Bearer s3cr3t"},
    )
    try:
        [comm] = RecordingComm.instances
        assert comm.params["headers"] == {"Authorization": "Bearer s3cr3t", "X-Plain": "plain"}
    finally:
        await host.aclose()


def test_a_missing_secret_variable_names_header_secret_and_variable() -> None:
    variable = secret_env_name(SecretKeyRef(name="ext-token", key="bearer"))
    with pytest.raises(HostError) as caught:
        RuntimeHost.build(
            secret_app(),
            ["boss"],
            registry=registry_with(a2a=RecordingComm),
            env={"UNRELATED": "Bearer s3cr3t"},
        )
    message = str(caught.value)
    assert "spec.endpoints.ext.headers.Authorization" in message
    assert "Secret 'ext-token' key 'bearer'" in message
    assert variable in message and "s3cr3t" not in message


def test_unknown_roots_and_bad_model_params_are_clear_errors() -> None:
    with pytest.raises(
        HostError, match=r"cannot host \['nobody'\]: not agents of the agency; agents: a"
    ):
        RuntimeHost.build(wired({"a": {}}), ["nobody"])
    app = wired({"a": {"model": {"type": "echo", "params": {"chunk_delay_ms": -1}}}})
    with pytest.raises(PluginConfigError, match=r"model 'echo': params.chunk_delay_ms: -1: "):
        RuntimeHost.build(app, ["a"])
