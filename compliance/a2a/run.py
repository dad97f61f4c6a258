"""Run the official A2A TCK against a system under test and write our reports.

    python -m compliance.a2a.run --tck PATH [--sut serve|baseline|baseline-taught|...]
                                 [--transport jsonrpc|rest|grpc|all] [--out compliance/out]

``--sut serve`` (the default) starts ``mas-ctl serve`` on ``compliance/a2a/application.yaml``
(agent ``tck``) with its url and gRPC port moved to free loopback ports; ``--sut baseline``
starts the bare a2a-sdk echo server of :mod:`compliance.a2a.baseline_server` (``baseline-taught``:
the same server taught the TCK's messageId behaviours; ``baseline-corrected``: taught, with
:mod:`library_ioa.plugins.a2a.server.transport.corrections` mounted). The TCK runs from
its own virtual environment (built on first use, see :mod:`compliance.a2a.tckenv`), with its
push-notification webhook kept on loopback. Reports land in ``<out>/<sut>/``: the TCK's own
(``tck/compatibility.json``, HTML, JUnit) and ours (``report.json``, ``report.md``).

Exit status: 0 when every MUST requirement that ran passed, 1 otherwise, 2 for bad arguments or
a system under test that did not come up.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from compliance.a2a.report import build_report, write_reports
from compliance.a2a.tckenv import TckCheckout, TckError, ensure_venv

logger = logging.getLogger(__name__)

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
HOST = "127.0.0.1"
TRANSPORTS = {"jsonrpc": "jsonrpc", "rest": "http_json", "grpc": "grpc"}
START_DEADLINE_S = 60.0
TCK_DEADLINE_S = 1800.0


def free_port() -> int:
    """A port the OS says is free on loopback."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def sut_command(sut: str, port: int, grpc_port: int, app: Path, agent: str) -> list[str]:
    """The command line that starts the system under test."""
    if sut.startswith("baseline"):
        return [
            sys.executable, "-m", "compliance.a2a.baseline_server",
            "--port", str(port), "--grpc-port", str(grpc_port),
            *(["--taught"] if sut in ("baseline-taught", "baseline-corrected") else []),
            *(["--corrected"] if sut == "baseline-corrected" else []),
        ]  # fmt: skip
    mas_ctl = Path(sys.executable).with_name("mas-ctl")
    return [
        str(mas_ctl), "serve", "-f", str(app), "--agent", agent, "--no-control",
        "--override", f"infra:spec.endpoints[{agent}].url=http://{HOST}:{port}",
        "--override", f"infra:spec.endpoints[{agent}].a2a.grpc_port={grpc_port}",
    ]  # fmt: skip


@contextlib.contextmanager
def running(cmd: list[str], card_url: str, log: Path) -> Iterator[None]:
    """Start ``cmd``, wait (with a deadline) until it serves its card, stop it afterwards."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as sink:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT, cwd=REPO, env=env)
        try:
            deadline = time.monotonic() + START_DEADLINE_S
            while True:
                if proc.poll() is not None:
                    raise TckError(f"the system under test exited ({proc.returncode}); see {log}")
                try:
                    if httpx.get(card_url, timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise TckError(f"no AgentCard at {card_url} after {START_DEADLINE_S:.0f}s")
                time.sleep(0.2)
            yield
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=15)


def run_tck(python: Path, checkout: TckCheckout, sut_url: str, transport: str, out: Path) -> int:
    """Run the TCK's compatibility suite; its reports go to ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    cmd = [
        str(python), "-m", "pytest", "tests/compatibility/", "-q", "--tb=short",
        "-p", "tck_loopback",
        f"--sut-host={sut_url}", f"--webhook-host={HOST}",
        f"--compatibility-report={out / 'compatibility'}",
        f"--html={out / 'tck_report.html'}", "--self-contained-html",
        f"--junitxml={out / 'junitreport.xml'}",
    ]  # fmt: skip
    if transport != "all":
        cmd.append(f"--transport={TRANSPORTS[transport]}")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(checkout.path)])}
    with (out / "pytest.log").open("wb") as sink:
        done = subprocess.run(
            cmd, cwd=checkout.path, env=env, stdout=sink, stderr=subprocess.STDOUT,
            timeout=TCK_DEADLINE_S, check=False,
        )  # fmt: skip
    return done.returncode


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(prog="python -m compliance.a2a.run", description=__doc__)
    parser.add_argument("--tck", required=True, type=Path, help="path of an A2A TCK checkout")
    parser.add_argument(
        "--sut",
        choices=("serve", "baseline", "baseline-taught", "baseline-corrected"),
        default="serve",
    )
    parser.add_argument("--transport", choices=(*TRANSPORTS, "all"), default="all")
    parser.add_argument("--out", type=Path, default=REPO / "compliance" / "out")
    parser.add_argument("--app", type=Path, default=HERE / "application.yaml")
    parser.add_argument("--agent", default="tck", help="the agent mas-ctl serve hosts")
    args = parser.parse_args(argv)
    args.out = args.out.resolve()  # the TCK runs from its own checkout
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    try:
        checkout = TckCheckout.open(args.tck)
        python = ensure_venv(checkout, args.out / "tck-venv")
        port, grpc_port = free_port(), free_port()
        sut_url = f"http://{HOST}:{port}"
        target = args.out / args.sut
        cmd = sut_command(args.sut, port, grpc_port, args.app.resolve(), args.agent)
        with running(cmd, f"{sut_url}/.well-known/agent-card.json", target / "sut.log"):
            code = run_tck(python, checkout, sut_url, args.transport, target / "tck")
    except TckError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    compat = target / "tck" / "compatibility.json"
    if not compat.exists():
        log = target / "tck" / "pytest.log"
        print(f"error: the TCK wrote no report (pytest exit {code}); see {log}", file=sys.stderr)
        return 2
    report = build_report(
        json.loads(compat.read_text()), sut=args.sut, tck_commit=checkout.commit,
        tck_branch=checkout.branch, junit=target / "tck" / "junitreport.xml",
    )  # fmt: skip
    js, md = write_reports(report, target)
    print(report.to_markdown())
    print(f"reports: {js} {md}")
    must_failed = sum(c.failed for c in report.levels.get("MUST", {}).values())
    return 0 if must_failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
