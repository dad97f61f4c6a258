"""A real Kubernetes control plane on loopback for integration tests.

``ControlPlane`` runs etcd, kube-apiserver and kube-controller-manager (built
from Go modules by ``scripts/build-envtest``) as child processes bound to
127.0.0.1 on ports the OS picks, with a throw-away CA, serving certificate,
service-account key, token file and data directory, and tears all of it down
on exit::

    from envtest.controlplane import ControlPlane

    with ControlPlane() as cp:
        api = kubernetes.client.CoreV1Api(cp.api_client())
        ...

Authentication is by static bearer tokens: ``cp.admin_token`` (user
``envtest-admin``, group ``system:masters``) and ``cp.user_token`` (user
``envtest-user``, no groups beyond ``system:authenticated``, so it can do
nothing until RBAC grants it something). Authorization is ``Node,RBAC``.

Dependencies: the standard library, ``kubernetes``, ``pyyaml`` and, for the
certificates, ``cryptography`` when it is importable (else the ``openssl``
command line tool).

Environment:

``MAS_ENVTEST_DIR``
    directory holding ``etcd``, ``kube-apiserver`` and
    ``kube-controller-manager`` (default: the directory
    ``scripts/build-envtest`` builds into).
``MAS_ENVTEST_KEEP``
    ``1`` keeps the work directory (logs, certificates, etcd data) after
    teardown, for debugging; its path is logged.
``MAS_ENVTEST_START_TIMEOUT``
    seconds to wait for the control plane to become ready (default 120).
"""

from __future__ import annotations

import atexit
import base64
import datetime
import gc
import ipaddress
import json
import logging
import os
import re
import secrets
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from tests.ports import free_port

__all__ = [
    "BINARIES",
    "ControlPlane",
    "ControlPlaneError",
    "binaries_available",
    "binaries_dir",
    "build_command",
]

log = logging.getLogger(__name__)

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent.parent
BUILD_SCRIPT = REPO_ROOT / "scripts" / "build-envtest"
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager")

ADMIN_USER = "envtest-admin"
TEST_USER = "envtest-user"
KCM_USER = "system:kube-controller-manager"
SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"


class ControlPlaneError(RuntimeError):
    """The control plane could not be started (the message has log tails)."""


# --------------------------------------------------------------------------
# Binaries


def _module_version(go_mod: Path, module: str) -> str | None:
    try:
        text = go_mod.read_text()
    except OSError:
        return None
    m = re.search(rf"^\s*(?:require\s+)?{re.escape(module)}\s+(v\S+)", text, re.M)
    return m.group(1) if m else None


def envtest_version() -> str:
    """The version key the build script uses, e.g. ``k8s-v1.34.4-etcd-v3.6.16``."""
    k8s = _module_version(HERE / "go.mod", "k8s.io/kubernetes") or "unknown"
    etcd = _module_version(HERE / "etcd" / "go.mod", "go.etcd.io/etcd/server/v3") or "unknown"
    return f"k8s-{k8s}-etcd-{etcd}"


def binaries_dir() -> Path:
    """Where the binaries are looked for: ``$MAS_ENVTEST_DIR`` or the build cache."""
    env = os.environ.get("MAS_ENVTEST_DIR")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "maslab" / "envtest" / envtest_version()


def build_command() -> str:
    return (
        f"{BUILD_SCRIPT.relative_to(REPO_ROOT)}"
        if BUILD_SCRIPT.exists()
        else "scripts/build-envtest"
    )


def binaries_available() -> tuple[bool, str]:
    """``(True, dir)`` when all three binaries are there, else ``(False, how-to-build)``."""
    d = binaries_dir()
    missing = [b for b in BINARIES if not os.access(d / b, os.X_OK)]
    if not missing:
        return True, str(d)
    return False, (
        f"envtest binaries missing in {d}: {', '.join(missing)}. "
        f"Build them once with `{build_command()}` from the repository root "
        "(compiles etcd, kube-apiserver and kube-controller-manager from Go modules: "
        "needs Go >= 1.26 and a Go module proxy; about 7 minutes on 2 cores and 4 GB of Go caches), "
        "or set MAS_ENVTEST_DIR to a directory that holds them."
    )


# --------------------------------------------------------------------------
# Small helpers


def _tail(path: Path, lines: int = 40) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 64 * 1024))
            data = f.read().decode("utf-8", "replace")
    except OSError as e:
        return f"(no log: {e})"
    return "\n".join(data.splitlines()[-lines:])


def _set_pdeathsig() -> None:
    """In the child: get SIGTERM when the parent dies (Linux), so no orphans."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except Exception:  # pragma: no cover - best effort only
        pass


# --------------------------------------------------------------------------
# Certificates and keys


_SERVING_DNS = [
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
]
_SERVING_IPS = ["127.0.0.1", "10.0.0.1"]


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


FRONT_PROXY_CN = "front-proxy-client"


def generate_pki(out: Path) -> dict[str, Path]:
    """CA, certificates and the service-account key pair, as PEM files.

    Made with the ``cryptography`` package when importable, else ``openssl``.
    Returns paths keyed by ``ca_crt ca_key`` (the CA), ``tls_crt tls_key``
    (kube-apiserver serving cert), ``proxy_crt proxy_key`` (client cert the
    apiserver's aggregator authenticates with, CN ``front-proxy-client``)
    and ``sa_key sa_pub`` (service-account token signing key).
    """
    out.mkdir(parents=True, exist_ok=True)
    paths = {
        "ca_crt": out / "ca.crt",
        "ca_key": out / "ca.key",
        "tls_crt": out / "apiserver.crt",
        "tls_key": out / "apiserver.key",
        "proxy_crt": out / "front-proxy-client.crt",
        "proxy_key": out / "front-proxy-client.key",
        "sa_key": out / "sa.key",
        "sa_pub": out / "sa.pub",
    }
    try:
        import cryptography  # noqa: F401
    except ImportError:
        if not shutil.which("openssl"):
            raise ControlPlaneError(
                "need the Python package `cryptography` or the `openssl` command to make certificates"
            ) from None
        _pki_openssl(out, paths)
    else:
        _pki_cryptography(paths)
    return paths


def _pki_cryptography(p: Mapping[str, Path]) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    def new_key() -> Any:
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def write_key(path: Path, key: Any) -> None:
        _write_private(
            path,
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.TraditionalOpenSSL,
                serialization.NoEncryption(),
            ),
        )

    def usage(**on: bool) -> x509.KeyUsage:
        names = [
            "digital_signature",
            "content_commitment",
            "key_encipherment",
            "data_encipherment",
            "key_agreement",
            "key_cert_sign",
            "crl_sign",
            "encipher_only",
            "decipher_only",
        ]
        return x509.KeyUsage(**{n: on.get(n, False) for n in names})

    now = datetime.datetime.now(datetime.UTC)

    def builder(cn: str, issuer: x509.Name, key: Any) -> x509.CertificateBuilder:
        return (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
            .issuer_name(issuer)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=7))
        )

    ca_key = new_key()
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "maslab-envtest-ca")])
    ca_cert = (
        builder("maslab-envtest-ca", ca_name, ca_key)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            usage(digital_signature=True, key_cert_sign=True, crl_sign=True), critical=True
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    p["ca_crt"].write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    write_key(p["ca_key"], ca_key)

    def leaf(cn: str, eku: Any, crt: Path, key_path: Path, sans: list | None = None) -> None:
        key = new_key()
        b = (
            builder(cn, ca_name, key)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(usage(digital_signature=True, key_encipherment=True), critical=True)
            .add_extension(x509.ExtendedKeyUsage([eku]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                critical=False,
            )
        )
        if sans:
            b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        crt.write_bytes(b.sign(ca_key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM))
        write_key(key_path, key)

    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in _SERVING_DNS]
    sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in _SERVING_IPS]
    leaf("kube-apiserver", ExtendedKeyUsageOID.SERVER_AUTH, p["tls_crt"], p["tls_key"], sans)
    leaf(FRONT_PROXY_CN, ExtendedKeyUsageOID.CLIENT_AUTH, p["proxy_crt"], p["proxy_key"])

    sa_key = new_key()
    write_key(p["sa_key"], sa_key)
    p["sa_pub"].write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )


def _pki_openssl(out: Path, p: Mapping[str, Path]) -> None:
    def run(*args: str) -> None:
        r = subprocess.run(["openssl", *args], cwd=out, capture_output=True, text=True, check=False)
        if r.returncode != 0:
            raise ControlPlaneError(f"openssl {' '.join(args)} failed: {r.stderr.strip()}")

    def leaf(cn: str, eku: str, crt: Path, key: Path, san: str | None = None) -> None:
        ext = out / f"{crt.stem}.ext"
        ext.write_text(
            "basicConstraints=critical,CA:FALSE\n"
            "keyUsage=critical,digitalSignature,keyEncipherment\n"
            f"extendedKeyUsage={eku}\n" + (f"subjectAltName={san}\n" if san else "")
        )
        csr = out / f"{crt.stem}.csr"
        run("genrsa", "-out", str(key), "2048")
        run("req", "-new", "-key", str(key), "-subj", f"/CN={cn}", "-out", str(csr))
        run(
            "x509",
            "-req",
            "-in",
            str(csr),
            "-CA",
            str(p["ca_crt"]),
            "-CAkey",
            str(p["ca_key"]),
            "-CAcreateserial",
            "-sha256",
            "-days",
            "7",
            "-extfile",
            str(ext),
            "-out",
            str(crt),
        )

    san = ",".join([f"DNS:{n}" for n in _SERVING_DNS] + [f"IP:{i}" for i in _SERVING_IPS])
    old = os.umask(0o077)
    try:
        run("genrsa", "-out", str(p["ca_key"]), "2048")
        run(
            "req",
            "-x509",
            "-new",
            "-key",
            str(p["ca_key"]),
            "-sha256",
            "-days",
            "7",
            "-subj",
            "/CN=maslab-envtest-ca",
            "-out",
            str(p["ca_crt"]),
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,digitalSignature,keyCertSign,cRLSign",
        )
        leaf("kube-apiserver", "serverAuth", p["tls_crt"], p["tls_key"], san)
        leaf(FRONT_PROXY_CN, "clientAuth", p["proxy_crt"], p["proxy_key"])
        run("genrsa", "-out", str(p["sa_key"]), "2048")
        run("rsa", "-in", str(p["sa_key"]), "-pubout", "-out", str(p["sa_pub"]))
    finally:
        os.umask(old)


# --------------------------------------------------------------------------
# Kubeconfig


def write_kubeconfig(
    path: Path, server: str, ca_file: Path, token: str, user: str = "user"
) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "envtest",
                "cluster": {
                    "server": server,
                    # Inline, so the file works wherever it is copied to.
                    "certificate-authority-data": base64.b64encode(
                        Path(ca_file).read_bytes()
                    ).decode(),
                },
            }
        ],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "envtest", "context": {"cluster": "envtest", "user": user}}],
        "current-context": "envtest",
        "preferences": {},
    }
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        yaml.safe_dump(config, f, sort_keys=False)
    return path


# --------------------------------------------------------------------------
# Processes


class _Process:
    def __init__(self, name: str, argv: Sequence[str], log_path: Path, cwd: Path):
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self.cwd = cwd
        self.popen: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self._log = open(self.log_path, "ab")
        self._log.write(f"# {' '.join(self.argv)}\n".encode())
        self._log.flush()
        kwargs: dict[str, Any] = {}
        # PDEATHSIG fires when the *thread* that forked ends, so only use it
        # from the main thread (whose end is the end of the process).
        if (
            sys.platform.startswith("linux")
            and threading.current_thread() is threading.main_thread()
        ):
            kwargs["preexec_fn"] = _set_pdeathsig
        self.popen = subprocess.Popen(
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=self.cwd,
            start_new_session=True,
            **kwargs,
        )

    def exited(self) -> int | None:
        return None if self.popen is None else self.popen.poll()

    def stop(self, timeout: float = 10.0) -> None:
        p = self.popen
        if p is not None and p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                log.warning("%s did not stop in %.0fs; killing it", self.name, timeout)
                p.kill()
                p.wait(timeout)
        if getattr(self, "_log", None) is not None:
            self._log.close()
            self._log = None

    def tail(self, lines: int = 40) -> str:
        return _tail(self.log_path, lines)


# --------------------------------------------------------------------------
# The control plane


class ControlPlane:
    """etcd + kube-apiserver + kube-controller-manager on 127.0.0.1.

    Use as a context manager, or call :meth:`start` and :meth:`stop`.
    """

    def __init__(
        self,
        binaries: str | os.PathLike[str] | None = None,
        *,
        start_timeout: float | None = None,
        work_dir: str | os.PathLike[str] | None = None,
        keep_work_dir: bool | None = None,
        extra_apiserver_args: Iterable[str] = (),
        extra_controller_manager_args: Iterable[str] = (),
        controller_manager: bool = True,
    ) -> None:
        self.binaries = Path(binaries) if binaries else binaries_dir()
        if start_timeout is None:
            start_timeout = float(os.environ.get("MAS_ENVTEST_START_TIMEOUT", "120"))
        self.start_timeout = start_timeout
        self._given_work_dir = Path(work_dir) if work_dir else None
        if keep_work_dir is None:
            keep_work_dir = os.environ.get("MAS_ENVTEST_KEEP") == "1"
        self.keep_work_dir = keep_work_dir
        self.extra_apiserver_args = list(extra_apiserver_args)
        self.extra_controller_manager_args = list(extra_controller_manager_args)
        self.with_controller_manager = controller_manager

        self.admin_token = secrets.token_hex(24)
        self.user_token = secrets.token_hex(24)
        self.user_name = TEST_USER
        self.admin_user = ADMIN_USER
        self._kcm_token = secrets.token_hex(24)

        self.work_dir: Path | None = None
        self.server_url = ""
        self.etcd_url = ""
        self.kubeconfig_path: Path | None = None
        self.ca_path: Path | None = None
        self.startup_seconds: float | None = None
        self._procs: list[_Process] = []
        self._api_clients: list[Any] = []
        self._started = False

    # -- lifecycle ---------------------------------------------------------

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def logs(self) -> dict[str, Path]:
        """Log file of each process, by name."""
        return {p.name: p.log_path for p in self._procs}

    def start(self) -> ControlPlane:
        if self._started:
            return self
        missing = [b for b in BINARIES if not os.access(self.binaries / b, os.X_OK)]
        if missing:
            if self.binaries == binaries_dir():
                raise ControlPlaneError(binaries_available()[1])
            raise ControlPlaneError(
                f"missing {', '.join(missing)} in {self.binaries}; build them with `{build_command()}`"
            )
        t0 = time.monotonic()
        deadline = t0 + self.start_timeout
        attempt = 1
        while True:
            self._started = True
            atexit.register(self.stop)
            try:
                self._prepare()
                self._start_etcd(deadline)
                self._start_apiserver(deadline)
                if self.with_controller_manager:
                    self._start_controller_manager(deadline)
                break
            except ControlPlaneError as e:
                self.stop()
                # A port picked as free can be taken before the child binds it.
                if (
                    attempt < 3
                    and "address already in use" in str(e)
                    and time.monotonic() < deadline
                ):
                    log.warning("envtest: port clash on start-up, retrying (%d)", attempt)
                    attempt += 1
                    continue
                raise
            except BaseException:
                self.stop()
                raise
        self.startup_seconds = time.monotonic() - t0
        # Polling servers that were not up yet leaves half-opened TLS sockets behind for the
        # garbage collector; collect them here, quietly, so they are not blamed on a test.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)
            gc.collect()
        log.info(
            "envtest control plane up at %s in %.1fs (work dir %s)",
            self.server_url,
            self.startup_seconds,
            self.work_dir,
        )
        return self

    def stop(self) -> None:
        """Terminate the processes (SIGTERM, then SIGKILL after 10s), remove the work dir."""
        if not self._started:
            return
        self._started = False
        atexit.unregister(self.stop)
        for c in self._api_clients:
            try:
                c.close()
            except Exception:
                pass
        self._api_clients.clear()
        for p in reversed(self._procs):
            try:
                p.stop()
            except Exception as e:  # pragma: no cover
                log.warning("stopping %s: %s", p.name, e)
        if self.work_dir is not None:
            if self.keep_work_dir:
                log.warning("envtest: kept work dir %s", self.work_dir)
            elif self._given_work_dir is None:
                shutil.rmtree(self.work_dir, ignore_errors=True)

    # -- start-up steps ----------------------------------------------------

    def _prepare(self) -> None:
        if self._given_work_dir:
            self.work_dir = self._given_work_dir
            self.work_dir.mkdir(parents=True, exist_ok=True)
        else:
            self.work_dir = Path(tempfile.mkdtemp(prefix="maslab-envtest-"))
        self._procs = []
        shutil.rmtree(self.work_dir / "etcd", ignore_errors=True)  # always a fresh cluster
        (self.work_dir / "logs").mkdir(exist_ok=True)
        self.pki = generate_pki(self.work_dir / "pki")
        self.ca_path = self.pki["ca_crt"]
        self.token_file = self.work_dir / "tokens.csv"
        _write_private(
            self.token_file,
            (
                f'{self.admin_token},{ADMIN_USER},uid-envtest-admin,"system:masters"\n'
                f"{self.user_token},{TEST_USER},uid-envtest-user\n"
                f'{self._kcm_token},{KCM_USER},uid-kube-controller-manager,"system:masters"\n'
            ).encode(),
        )

    def _spawn(self, name: str, argv: Sequence[str]) -> _Process:
        assert self.work_dir is not None
        p = _Process(name, argv, self.work_dir / "logs" / f"{name}.log", self.work_dir)
        self._procs.append(p)
        p.start()
        return p

    def _failure(self, what: str, procs: Sequence[_Process] | None = None) -> ControlPlaneError:
        parts = [what]
        for p in procs if procs is not None else self._procs:
            rc = p.exited()
            state = "running" if rc is None else f"exited with {rc}"
            parts.append(f"--- {p.name} ({state}), last lines of {p.log_path}:\n{p.tail()}")
        if not self.keep_work_dir:
            parts.append("(set MAS_ENVTEST_KEEP=1 to keep the logs and work dir)")
        return ControlPlaneError("\n".join(parts))

    def _wait(self, proc: _Process, deadline: float, what: str, check) -> None:
        last: object = None
        while True:
            rc = proc.exited()
            if rc is not None:
                raise self._failure(f"{proc.name} exited with {rc} while waiting for {what}")
            try:
                if check():
                    return
            except Exception as e:  # keep the last reason for the error message
                last = e
            if time.monotonic() > deadline:
                raise self._failure(
                    f"timed out after {self.start_timeout:.0f}s waiting for {what} (last error: {last!r})"
                )
            time.sleep(0.1)

    def _start_etcd(self, deadline: float) -> None:
        assert self.work_dir is not None
        client, peer = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client}"
        peer_url = f"http://127.0.0.1:{peer}"
        proc = self._spawn(
            "etcd",
            [
                str(self.binaries / "etcd"),
                "--name=envtest",
                f"--data-dir={self.work_dir / 'etcd'}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=envtest={peer_url}",
                "--initial-cluster-state=new",
                "--unsafe-no-fsync=true",
                "--log-level=warn",
            ],
        )

        def healthy() -> bool:
            with urllib.request.urlopen(f"{self.etcd_url}/health", timeout=2) as r:
                return json.loads(r.read()).get("health") == "true"

        self._wait(proc, deadline, "etcd /health", healthy)

    def _start_apiserver(self, deadline: float) -> None:
        assert self.work_dir is not None
        port = free_port()
        self.server_url = f"https://127.0.0.1:{port}"
        pki = self.pki
        proc = self._spawn(
            "kube-apiserver",
            [
                str(self.binaries / "kube-apiserver"),
                "--advertise-address=127.0.0.1",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                f"--etcd-servers={self.etcd_url}",
                f"--tls-cert-file={pki['tls_crt']}",
                f"--tls-private-key-file={pki['tls_key']}",
                f"--client-ca-file={pki['ca_crt']}",
                # Front proxy (aggregation layer) as kubeadm sets it up; the
                # controller-manager's delegated authentication reads it.
                f"--requestheader-client-ca-file={pki['ca_crt']}",
                f"--requestheader-allowed-names={FRONT_PROXY_CN}",
                "--requestheader-username-headers=X-Remote-User",
                "--requestheader-group-headers=X-Remote-Group",
                "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                f"--proxy-client-cert-file={pki['proxy_crt']}",
                f"--proxy-client-key-file={pki['proxy_key']}",
                f"--token-auth-file={self.token_file}",
                "--authorization-mode=Node,RBAC",
                f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
                f"--service-account-key-file={pki['sa_pub']}",
                f"--service-account-signing-key-file={pki['sa_key']}",
                f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
                # The "kubernetes" Service would point at 127.0.0.1, which
                # Endpoints validation rejects; nothing in-cluster needs it.
                "--endpoint-reconciler-type=none",
                "--allow-privileged=true",
                "--profiling=false",
                f"--cert-dir={self.work_dir / 'apiserver-certs'}",
                *self.extra_apiserver_args,
            ],
        )
        ctx = ssl.create_default_context(cafile=str(self.ca_path))

        def ready() -> bool:
            req = urllib.request.Request(
                f"{self.server_url}/readyz", headers={"Authorization": f"Bearer {self.admin_token}"}
            )
            try:
                with urllib.request.urlopen(req, timeout=5, context=ctx) as r:
                    return r.status == 200
            except urllib.error.HTTPError as e:  # 500 while post-start hooks run
                with e:  # close its socket now, not at garbage collection
                    body = e.read()[-500:].decode(errors="replace")
                raise RuntimeError(f"/readyz {e.code}: {body}") from None

        self._wait(proc, deadline, "kube-apiserver /readyz", ready)
        self.kubeconfig_path = write_kubeconfig(
            self.work_dir / "admin.kubeconfig",
            self.server_url,
            self.ca_path,
            self.admin_token,
            ADMIN_USER,
        )

    def _start_controller_manager(self, deadline: float) -> None:
        assert self.work_dir is not None and self.ca_path is not None
        kubeconfig = write_kubeconfig(
            self.work_dir / "kube-controller-manager.kubeconfig",
            self.server_url,
            self.ca_path,
            self._kcm_token,
            "kube-controller-manager",
        )
        port = free_port()
        pki = self.pki
        proc = self._spawn(
            "kube-controller-manager",
            [
                str(self.binaries / "kube-controller-manager"),
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                f"--cert-dir={self.work_dir / 'kcm-certs'}",
                "--leader-elect=false",
                "--controllers=*",
                f"--service-account-private-key-file={pki['sa_key']}",
                f"--root-ca-file={pki['ca_crt']}",
                f"--cluster-signing-cert-file={pki['ca_crt']}",
                f"--cluster-signing-key-file={pki['ca_key']}",
                f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
                *self.extra_controller_manager_args,
            ],
        )
        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE

        def healthy() -> bool:
            with urllib.request.urlopen(
                f"https://127.0.0.1:{port}/healthz", timeout=5, context=insecure
            ) as r:
                return r.status == 200

        self._wait(proc, deadline, "kube-controller-manager /healthz", healthy)

        # The serviceaccount controller making the "default" ServiceAccount
        # shows the controllers really run against this API server.
        ctx = ssl.create_default_context(cafile=str(self.ca_path))

        def default_sa() -> bool:
            req = urllib.request.Request(
                f"{self.server_url}/api/v1/namespaces/default/serviceaccounts/default",
                headers={"Authorization": f"Bearer {self.admin_token}"},
            )
            with urllib.request.urlopen(req, timeout=5, context=ctx) as r:
                return r.status == 200

        self._wait(proc, deadline, "the default ServiceAccount (controllers running)", default_sa)

    # -- clients -----------------------------------------------------------

    def _require_started(self) -> None:
        if not self._started or self.kubeconfig_path is None:
            raise ControlPlaneError("control plane is not running")

    def user_kubeconfig(
        self,
        token: str | None = None,
        name: str = "user",
        path: str | os.PathLike[str] | None = None,
    ) -> Path:
        """Write a kubeconfig that authenticates with ``token`` (default: the non-admin user's)."""
        self._require_started()
        assert self.work_dir is not None and self.ca_path is not None
        token = token or self.user_token
        if path is None:
            path = (
                self.work_dir
                / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}-{secrets.token_hex(4)}.kubeconfig"
            )
        return write_kubeconfig(Path(path), self.server_url, self.ca_path, token, name)

    def env(self, token: str | None = None) -> dict[str, str]:
        """Environment for a subprocess (e.g. the operator) to reach this cluster.

        ``KUBECONFIG`` points at the admin kubeconfig (or one for ``token``).
        """
        self._require_started()
        path = self.kubeconfig_path if token is None else self.user_kubeconfig(token)
        return {"KUBECONFIG": str(path)}

    def api_client(self, token: str | None = None):
        """A ``kubernetes.client.ApiClient`` for the admin (or for ``token``)."""
        from kubernetes import config as k8s_config

        self._require_started()
        path = self.kubeconfig_path if token is None else self.user_kubeconfig(token)
        client = k8s_config.new_client_from_config(config_file=str(path))
        self._api_clients.append(client)
        return client

    def user_api_client(self):
        """A ``kubernetes.client.ApiClient`` for the non-admin test user."""
        return self.api_client(self.user_token)

    def dynamic_client(self, token: str | None = None):
        from kubernetes.dynamic import DynamicClient

        assert self.work_dir is not None
        # Keep the discovery cache in the work dir, not as a stray file in /tmp.
        return DynamicClient(
            self.api_client(token), cache_file=str(self.work_dir / "discovery-cache.json")
        )

    # -- apply ---------------------------------------------------------------

    def apply_yaml(
        self,
        docs: str | os.PathLike[str] | Mapping[str, Any] | Iterable[Mapping[str, Any]],
        *,
        namespace: str | None = None,
        field_manager: str = "envtest",
        force_conflicts: bool = True,
        wait_crds: float = 30.0,
    ) -> list[dict[str, Any]]:
        """Server-side apply every object of ``docs``; return them as the server has them (JSON dicts, camelCase keys).

        ``docs`` is a path to a YAML file, a YAML string (multi-document), an
        object dict or a list of object dicts. Namespaced objects without a
        namespace go to ``namespace`` (default ``"default"``). A
        CustomResourceDefinition is waited for until it is Established, so
        later documents may be its custom objects.
        """
        from kubernetes.dynamic.exceptions import ResourceNotFoundError

        objects = _load_docs(docs)
        dyn = self.dynamic_client()
        applied: list[dict[str, Any]] = []
        for obj in objects:
            api_version, kind = obj.get("apiVersion"), obj.get("kind")
            name = (obj.get("metadata") or {}).get("name")
            if not (api_version and kind and name):
                raise ValueError(f"object needs apiVersion, kind and metadata.name: {obj!r}")
            retry_until = time.monotonic() + wait_crds
            while True:
                try:
                    res = dyn.resources.get(api_version=api_version, kind=kind)
                    break
                except ResourceNotFoundError:
                    if time.monotonic() > retry_until:
                        raise
                    dyn.resources.invalidate_cache()
                    time.sleep(0.5)
            ns = None
            if res.namespaced:
                ns = obj["metadata"].get("namespace") or namespace or "default"
                obj = {**obj, "metadata": {**obj["metadata"], "namespace": ns}}
            out = res.server_side_apply(
                body=obj,
                name=name,
                namespace=ns,
                field_manager=field_manager,
                force_conflicts=force_conflicts,
            )
            applied.append(out.to_dict())
            if kind == "CustomResourceDefinition" and api_version.startswith(
                "apiextensions.k8s.io/"
            ):
                self._wait_crd_established(dyn, name, wait_crds)
                dyn.resources.invalidate_cache()
        return applied

    def _wait_crd_established(self, dyn, name: str, timeout: float) -> None:
        crds = dyn.resources.get(
            api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition"
        )
        deadline = time.monotonic() + timeout
        while True:
            conds = (crds.get(name=name).to_dict().get("status") or {}).get("conditions") or []
            if any(c.get("type") == "Established" and c.get("status") == "True" for c in conds):
                return
            if time.monotonic() > deadline:
                raise ControlPlaneError(f"CRD {name} not Established after {timeout:.0f}s: {conds}")
            time.sleep(0.2)


def _load_docs(docs: Any) -> list[dict[str, Any]]:
    if isinstance(docs, Mapping):
        items: list[Any] = [docs]
    elif isinstance(docs, os.PathLike) or (
        isinstance(docs, str) and "\n" not in docs and Path(docs).is_file()
    ):
        with open(docs) as f:
            items = list(yaml.safe_load_all(f))
    elif isinstance(docs, str):
        items = list(yaml.safe_load_all(docs))
    else:
        items = list(docs)
    out: list[dict[str, Any]] = []
    for item in items:
        if not item:
            continue
        if item.get("kind", "").endswith("List") and "items" in item:
            out.extend(dict(i) for i in item["items"])
        else:
            out.append(dict(item))
    return out
