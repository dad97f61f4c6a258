"""``mas-ctl conformance`` as a user runs it: a subprocess, its exit code, stdout and stderr."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from compliance_servers import HOST, free_port, sdk_agent
from tests.deadlines import COLD_START

from mas.infra.conformance import ConformanceCheck, ConformanceResult

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]  # cold mas-ctl processes
# the probe's deadline per call: a check that must pass gets a minute on a loaded machine;
# the checks these tests expect to fail are refused connections, which fail at once
PROBE_CALL = "60"

REPO = Path(__file__).resolve().parents[2]
MAS_CTL = [sys.executable, "-m", "mas.ctl.cli"]
TCK_APP = REPO / "compliance" / "a2a" / "application.yaml"


@dataclass
class Run:
    code: int
    out: str
    err: str


async def mas_ctl(*args: str, timeout: float = COLD_START) -> Run:
    proc = await asyncio.create_subprocess_exec(
        *MAS_CTL, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    assert proc.returncode is not None
    return Run(proc.returncode, out.decode(), err.decode())


async def test_a_conforming_agent_exits_0_with_a_table(conforming) -> None:
    run = await mas_ctl("conformance", "--url", conforming.url, "--timeout", PROBE_CALL)
    assert run.code == 0, run.out + run.err
    lines = run.out.splitlines()
    assert lines[0].split() == ["INTERFACE", "CHECK", "STATUS", "DETAIL"]
    assert lines[-1] == "conformant: 22 passed, 0 failed, 0 skipped"
    assert any(line.split()[:3] == ["GRPC", "version-header", "PASS"] for line in lines)


async def test_a_broken_agent_exits_1_naming_each_failed_check() -> None:
    async with sdk_agent("no-grpc-listener") as agent:
        run = await mas_ctl("conformance", "--url", agent.url, "--timeout", PROBE_CALL)
    assert run.code == 1
    failed = [line.split()[:2] for line in run.out.splitlines() if " FAIL " in line]
    assert ["GRPC", "send-message"] in failed
    assert all(interface == "GRPC" for interface, _ in failed)
    assert run.out.splitlines()[-1] == f"NOT conformant: {len(failed)} of 22 checks failed"


async def test_json_output_is_exactly_the_result_model(conforming) -> None:
    run = await mas_ctl("conformance", "--url", conforming.url, "-o", "json")
    assert run.code == 0, run.err
    result = ConformanceResult.model_validate_json(run.out)
    assert result.passed
    assert result.url == conforming.url
    assert len(result.checks) == 22


async def test_an_unreachable_card_exits_1_with_one_clear_line() -> None:
    url = f"http://{HOST}:{free_port()}"
    run = await mas_ctl("conformance", "--url", url, "--timeout", PROBE_CALL)
    assert run.code == 1
    err = run.err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("error: ")
    assert f"{url}/.well-known/agent-card.json" in err[0]
    assert "Traceback" not in run.out + run.err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--url", "ftp://agent"], "--url 'ftp://agent': expected an http:// or https:// URL"),
        (["--url", "http://a:1", "--timeout", "0"], "'0' is not a number of seconds"),
        (["--url", "http://a:1", "-o", "yaml"], "invalid choice: 'yaml'"),
        ([], "the following arguments are required: --url"),
    ],
)
async def test_usage_errors_exit_2_naming_the_value(args: list[str], message: str) -> None:
    run = await mas_ctl("conformance", *args)
    assert run.code == 2
    assert message in run.err
    assert "Traceback" not in run.err


@contextlib.asynccontextmanager
async def mas_ctl_serve(tmp_path: Path, *overrides: str) -> AsyncIterator[str]:
    """``mas-ctl serve`` on the TCK's Application, on free ports; yields its base URL.

    ``overrides``: further ``--override`` edits (``infra:PATH=VALUE``)."""
    port, grpc_port = free_port(), free_port()
    url = f"http://{HOST}:{port}"
    env = {**os.environ, "HOME": str(tmp_path)}
    proc = await asyncio.create_subprocess_exec(
        *MAS_CTL, "serve", "-f", str(TCK_APP), "--agent", "tck", "--no-control",
        "--override", f"infra:spec.endpoints[tck].url={url}",
        "--override", f"infra:spec.endpoints[tck].a2a.grpc_port={grpc_port}",
        *(arg for edit in overrides for arg in ("--override", edit)),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE, env=env,
    )  # fmt: skip
    try:
        async with httpx.AsyncClient() as http, asyncio.timeout(COLD_START):
            while True:
                if proc.returncode is not None:
                    assert proc.stderr is not None
                    raise AssertionError((await proc.stderr.read()).decode())
                with contextlib.suppress(httpx.HTTPError):
                    if (await http.get(f"{url}/readyz")).status_code == 200:
                        break
                await asyncio.sleep(0.1)
        yield url
    finally:
        if proc.returncode is None:
            proc.terminate()
        await asyncio.wait_for(proc.wait(), 30)


async def test_mas_ctl_serve_passes_the_probe(tmp_path: Path) -> None:
    async with mas_ctl_serve(tmp_path) as url:
        run = await mas_ctl("conformance", "--url", url, "-o", "json", "--timeout", PROBE_CALL)
    result = ConformanceResult.model_validate_json(run.out)
    by_check = {(c.interface, c.check): c for c in result.checks}
    for binding in ("JSONRPC", "HTTP+JSON", "GRPC"):
        for check in ("send-message", "streaming", "get-task", "cancel-task", "push-config"):
            assert by_check[(binding, check)].status == "pass", by_check[(binding, check)]
        assert by_check[(binding, "unknown-task-error")].status == "pass"
    # The exposure mounts grpc_corrections.GrpcVersionCheck, so every transport checks A2A-Version.
    assert result.failures() == []
    for binding in ("JSONRPC", "HTTP+JSON", "GRPC"):
        assert by_check[(binding, "version-header")].status == "pass"
    assert run.code == 0


async def push_checks(tmp_path: Path, override: str) -> list[ConformanceCheck]:
    """The probe's push-config checks against ``mas-ctl serve`` with one ``--override``; each
    must pass, on every transport."""
    async with mas_ctl_serve(tmp_path, override) as url:
        run = await mas_ctl("conformance", "--url", url, "-o", "json", "--timeout", PROBE_CALL)
    result = ConformanceResult.model_validate_json(run.out)
    push = [c for c in result.checks if c.check == "push-config"]
    assert [(c.interface, c.status) for c in push] == [
        ("JSONRPC", "pass"), ("HTTP+JSON", "pass"), ("GRPC", "pass")
    ], push  # fmt: skip
    assert run.code == 0, result.failures()
    return push


async def test_default_push_policy_passes_push_config_without_dns(tmp_path: Path) -> None:
    """The strict default push policy (no allow_private, no allowed_hosts) and no DNS, as in an
    air-gapped cluster: the probe's own push URL is still accepted, on every transport."""
    await push_checks(tmp_path, "infra:spec.endpoints[tck].a2a.push.allow_private=false")


async def test_without_auth_the_push_check_sets_its_config_inline(tmp_path: Path) -> None:
    """An endpoint without auth refuses a standalone create by default (security.md): the
    probe then gives the config inline with a SendMessage, reads it back and deletes it."""
    default = "infra:spec.endpoints[tck].a2a.push.allow_anonymous_create=false"
    push = await push_checks(tmp_path, default)
    assert all("UnsupportedOperationError" in c.detail and "inline" in c.detail for c in push)


async def test_result_file_holds_a_compact_result_that_fits_a_termination_message(
    tmp_path: Path,
) -> None:
    result_file = tmp_path / "termination-log"
    async with sdk_agent("no-grpc-listener") as agent:
        run = await mas_ctl(
            "conformance", "--url", agent.url, "-o", "json", "--timeout", PROBE_CALL,
            "--result-file", str(result_file),
        )  # fmt: skip
    assert run.code == 1
    text = result_file.read_text()
    assert len(text.encode()) <= 4096 and "\n" not in text
    written = ConformanceResult.model_validate_json(text)
    printed = ConformanceResult.model_validate_json(run.out)
    assert not written.passed
    assert [(c.interface, c.check) for c in written.failures()] == [
        (c.interface, c.check) for c in printed.failures()
    ]


async def test_an_unwritable_result_file_exits_2_naming_it(tmp_path: Path) -> None:
    url = f"http://{HOST}:{free_port()}"
    run = await mas_ctl("conformance", "--url", url, "--result-file", str(tmp_path))
    assert run.code == 2
    assert f"error: cannot write --result-file {tmp_path}: " in run.err
    assert "Traceback" not in run.err


async def test_a_url_too_long_for_a_termination_message_exits_2(tmp_path: Path) -> None:
    url = f"http://{HOST}:{free_port()}/{'a' * 4100}"
    run = await mas_ctl("conformance", "--url", url, "--result-file", str(tmp_path / "log"))
    assert run.code == 2
    assert "error: --result-file: a conformance result of " in run.err
    assert "cannot fit in 4096 bytes" in run.err and "Traceback" not in run.err
