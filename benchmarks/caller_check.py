"""The cost of the caller check: ``mas-ctl serve`` (echo) with identities checked, against off.

Two ``mas-ctl serve`` processes of the same echo agent run on 127.0.0.1 in the same run,
alternating round after round (``hot_path.py``'s method and helpers):

- ``off``: no identity check (a local run: ``MAS_A2A_IDENTITY`` unset);
- ``on``: ``MAS_A2A_IDENTITY=kubernetes``, its token volume (``$MAS_A2A_TOKEN_FILE``'s folder)
  holding a CA and an API token, ``KUBERNETES_SERVICE_HOST``/``_PORT`` naming a small HTTPS
  issuer this script serves (discovery document and JWKS of a key it generates). The
  agent admits the caller through ``a2a.allow``.

``wrk`` sends JSON-RPC ``SendMessage`` (blocking) over 32 keep-alive connections to both,
the ``maslab-identity`` header holding one token the issuer signed (as an agent's delegator
sends its current token: one token until the kubelet rotates it), so ``on`` verifies it
once and then finds it in its cache. Reported: requests/s, p50/p99 and the server's CPU
per request, and the ratio on/off. A refused request counts as an error.

``--base DIR`` adds a third server, ``base``: ``on`` with the runtime of another source tree
(``DIR/runtime`` first on ``PYTHONPATH``, e.g. ``git archive REV runtime | tar -x -C DIR``),
so a change to the check is measured against the code before it in the same run.

Usage::

    python benchmarks/caller_check.py [--duration 8] [--rounds 3] [--base DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import ipaddress
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import jwt
import uvicorn
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from hot_path import (
    CONNECTIONS,
    LUA,
    Run,
    Series,
    ensure_wrk,
    free_port,
    parse_wrk,
    start_echo,
    stop,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

ISSUER = "https://issuer.bench.invalid"
CALLER = "system:serviceaccount:bench:caller"
AUDIENCE = "maslab.io/a2a"


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key (the CA the agent trusts is the cert)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "bench issuer")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "issuer.crt", folder / "issuer.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def issuer_app(signing: rsa.RSAPrivateKey) -> Starlette:
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(signing.public_key()))
    keys = {"keys": [{**jwk, "kid": "bench-1", "alg": "RS256", "use": "sig"}]}

    async def discovery(_: Request) -> JSONResponse:
        return JSONResponse({"issuer": ISSUER, "jwks_uri": f"{ISSUER}/openid/v1/jwks"})

    async def jwks(_: Request) -> JSONResponse:
        return JSONResponse(keys)

    return Starlette(
        routes=[
            Route("/.well-known/openid-configuration", discovery),
            Route("/openid/v1/jwks", jwks),
        ]
    )


def serve_issuer(app: Starlette, port: int, cert: Path, key: Path) -> uvicorn.Server:
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning",
        ssl_certfile=str(cert), ssl_keyfile=str(key),
    )  # fmt: skip
    server = uvicorn.Server(config)
    threading.Thread(target=server.run, daemon=True).start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline:
            raise SystemExit("the issuer did not start")
        time.sleep(0.05)
    return server


def identity_mode(
    folder: Path, account: str = "bench:caller"
) -> tuple[str, dict[str, str], uvicorn.Server]:
    """A running issuer, a token it signed for ``system:serviceaccount:<account>`` (also in
    the token volume under ``folder``), and the environment of a process in identity mode."""
    signing = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    now = int(time.time())
    token = jwt.encode(
        {"iss": ISSUER, "aud": [AUDIENCE], "sub": f"system:serviceaccount:{account}",
         "iat": now, "nbf": now, "exp": now + 3600},
        signing, algorithm="RS256", headers={"kid": "bench-1"},
    )  # fmt: skip
    volume = folder / "a2a"
    volume.mkdir()
    cert, key = self_signed(folder)
    (volume / "ca.crt").write_bytes(cert.read_bytes())
    (volume / "api-token").write_text("bench")
    (volume / "token").write_text(token)
    port = free_port()
    server = serve_issuer(issuer_app(signing), port, cert, key)
    env = {
        "MAS_A2A_IDENTITY": "kubernetes",
        "MAS_A2A_TOKEN_FILE": str(volume / "token"),
        "KUBERNETES_SERVICE_HOST": "127.0.0.1",
        "KUBERNETES_SERVICE_PORT": str(port),
    }
    return token, env, server


async def run_wrk(wrk: str, script: Path, url: str, duration: float, token: str) -> Run:
    process = await asyncio.create_subprocess_exec(
        wrk, "-t2", f"-c{CONNECTIONS}", f"-d{duration:g}s", "--timeout", "10s", "--latency",
        "-H", f"maslab-identity: {token}", "-s", str(script), url,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    async with asyncio.timeout(duration + 30):
        out, _ = await process.communicate()
    return parse_wrk(out.decode())


async def main(args: argparse.Namespace) -> int:
    wrk = ensure_wrk()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        token, identity_env, issuer = identity_mode(folder)
        script = folder / "send.lua"
        script.write_text(LUA)
        base_env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        servers = {}
        names = ("off", "on", "base") if args.base else ("off", "on")
        for name in names:
            env = {**base_env, "MAS_CONTROL_DIR": str(folder / f"control-{name}")}
            if name in ("on", "base"):
                env.update(identity_env)
            if name == "base":
                env["PYTHONPATH"] = str(Path(args.base).resolve() / "runtime")
            servers[name] = await start_echo(name, folder, env, allow=[CALLER])
        series = Series()
        errors = 0
        try:
            for index in range(args.rounds):
                # alternate the order, so neither server always runs first in a round
                for name in names if index % 2 == 0 else reversed(names):
                    server = servers[name]
                    before = server.cpu_seconds()
                    run = await run_wrk(wrk, script, server.url, args.duration, token)
                    used = server.cpu_seconds() - before
                    total = run.rate * args.duration
                    run.cpu_ms = used * 1000 / total if total else float("nan")
                    errors += run.errors
                    series.add(name, run)
        finally:
            for server in servers.values():
                await stop(server)
            issuer.should_exit = True
    off = series.median("off")
    print(f"JSON-RPC SendMessage, {CONNECTIONS} connections, {args.rounds} rounds (medians)")
    print(f"{'':6}{'req/s':>10}{'p50 ms':>9}{'p99 ms':>9}{'cpu ms/req':>12}")
    for name in names:
        run = series.median(name)
        print(f"{name:6}{run.rate:10.0f}{run.p50:9.2f}{run.p99:9.2f}{run.cpu_ms:12.3f}")
    for name in names[1:]:
        run = series.median(name)
        # each round's ratio against the off run beside it, then their median: a burst of
        # load from elsewhere moves both runs of a round, not one ratio
        paired = statistics.median(
            r.cpu_ms / o.cpu_ms for r, o in zip(series.runs[name], series.runs["off"], strict=True)
        )
        print(f"{name}/off: throughput {run.rate / off.rate:.3f}, cpu per request "
              f"{run.cpu_ms / off.cpu_ms:.3f} (median of the rounds' ratios {paired:.3f}), "
              f"p50 {run.p50 / off.p50:.3f}")  # fmt: skip
    rates = {n: [round(r.rate) for r in series.runs[n]] for n in series.runs}
    print(f"rounds: {rates}; errors: {errors}")
    return 1 if errors else 0


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--duration", type=float, default=8.0, help="seconds per run (default 8)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    parser.add_argument(
        "--base", default=None, metavar="DIR", help="also serve 'on' from DIR/runtime (base)"
    )
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse())))
