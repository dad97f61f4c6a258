"""The lock files are one resolution of pyproject.toml's ranges, and have not drifted from them.

pyproject.toml says what we accept (ranges); requirements.lock (the runtime dependencies: what
the image installs) and requirements-dev.lock (those and the dev extras: what `make dev`, and so
CI, installs) pin one resolution of it, written by `make lock` (docs/dependencies.md). These
tests fail when the two disagree, as the CRD drift check does for the models: a requirement
missing from a lock or pinned outside its range, a package an extra pulls in that is not
locked, an entry locked for pyproject.toml that it no longer asks for, or the two locks pinning
a shared package differently. The extras' own requirements are read from the installed
distributions, which `make dev` installs from the dev lock.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from importlib import metadata

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.conftest import REPO

RUNTIME_LOCK = REPO / "requirements.lock"
DEV_LOCK = REPO / "requirements-dev.lock"
# How uv's "# via" annotations name a requirement that comes from our own pyproject.toml.
OURS = "maslab (pyproject.toml)"
# Every private a2a-sdk name we reach was written against a2a-sdk 1.3: the range and the locks
# stay below the next minor until someone moves the adapters and the bound together.
SDK_CEILING = Version("1.4")


@dataclass
class Pin:
    version: Version
    marker: str = ""
    via: set[str] = field(default_factory=set)


def read_lock(text: str) -> dict[str, Pin]:
    """The pins of a `uv pip compile` output, by canonical name, with their "# via" sources."""
    pins: dict[str, Pin] = {}
    current: Pin | None = None
    for line in text.splitlines():
        if not line.strip():
            continue
        if not line[0].isspace() and not line.startswith("#"):
            requirement, _, marker = line.rstrip(" \\").partition(";")
            name, pinned, version = requirement.strip().partition("==")
            assert pinned, f"not an exact pin: {line!r}"
            current = pins[canonicalize_name(name)] = Pin(Version(version), marker.strip())
        elif current is not None and line.lstrip().startswith("#"):
            source = line.strip().lstrip("#").strip().removeprefix("via").strip()
            if source:
                current.via.add(source)
    return pins


def project(*extras: str) -> list[Requirement]:
    """pyproject.toml's runtime requirements, and those of the given extras."""
    with (REPO / "pyproject.toml").open("rb") as file:
        table = tomllib.load(file)["project"]
    lines = list(table["dependencies"])
    for extra in extras:
        lines += table["optional-dependencies"][extra]
    return [Requirement(line) for line in lines]


def extra_requirements(distribution: str, extra: str) -> list[Requirement]:
    """What `distribution[extra]` adds on this interpreter, from its installed metadata."""
    found = []
    for line in metadata.requires(distribution) or []:
        requirement = Requirement(line)
        if requirement.marker is not None and requirement.marker.evaluate({"extra": extra}):
            found.append(requirement)
    return found


def drift(requirements: list[Requirement], pins: dict[str, Pin]) -> list[str]:
    """Each way `pins` no longer resolves `requirements`, as a sentence; empty when none."""
    problems = []
    asked = {canonicalize_name(requirement.name) for requirement in requirements}
    for requirement in requirements:
        pin = pins.get(canonicalize_name(requirement.name))
        if pin is None:
            problems.append(f"{requirement} is not in the lock")
            continue
        if not requirement.specifier.contains(pin.version, prereleases=True):
            problems.append(f"{requirement.name}=={pin.version} is outside {requirement}")
        for extra in sorted(requirement.extras):
            for needed in extra_requirements(requirement.name, extra):
                if canonicalize_name(needed.name) not in pins:
                    problems.append(
                        f"{needed.name} ({requirement.name}[{extra}]) is not in the lock"
                    )
    for name, pin in sorted(pins.items()):
        if OURS in pin.via and name not in asked:
            problems.append(f"{name} is locked for pyproject.toml, which no longer asks for it")
    return problems


def test_runtime_lock_resolves_the_runtime_requirements() -> None:
    problems = drift(project(), read_lock(RUNTIME_LOCK.read_text()))
    assert not problems, "run `make lock` and commit the result:\n" + "\n".join(problems)


def test_dev_lock_resolves_the_runtime_and_dev_requirements() -> None:
    problems = drift(project("dev"), read_lock(DEV_LOCK.read_text()))
    assert not problems, "run `make lock` and commit the result:\n" + "\n".join(problems)


def test_dev_lock_pins_what_the_image_ships() -> None:
    runtime, dev = read_lock(RUNTIME_LOCK.read_text()), read_lock(DEV_LOCK.read_text())
    differ = {
        name: (str(pin.version), str(dev[name].version) if name in dev else None)
        for name, pin in runtime.items()
        if name not in dev or dev[name].version != pin.version
    }
    assert not differ, f"runtime lock vs dev lock: {differ}; run `make lock`"


def test_sdk_stays_below_the_minor_its_adapters_were_written_for() -> None:
    (sdk,) = [r for r in project() if canonicalize_name(r.name) == "a2a-sdk"]
    for beyond in ("1.4.0rc1", "1.4", "2.0"):
        assert not sdk.specifier.contains(beyond, prereleases=True), f"{sdk} allows {beyond}"
    for lock in (RUNTIME_LOCK, DEV_LOCK):
        assert read_lock(lock.read_text())["a2a-sdk"].version < SDK_CEILING, lock.name


def test_drift_names_each_problem() -> None:
    ranges = {canonicalize_name(r.name): str(r) for r in project()}
    pins = read_lock(RUNTIME_LOCK.read_text())
    pins["kopf"] = Pin(Version("0.1"), via={OURS})
    del pins["orjson"]
    del pins["grpcio-reflection"]
    pins["left-over"] = Pin(Version("1.0"), via={OURS})
    assert drift(project(), pins) == [
        "grpcio-reflection (a2a-sdk[grpc]) is not in the lock",
        f"kopf==0.1 is outside {ranges['kopf']}",
        f"{ranges['orjson']} is not in the lock",
        "left-over is locked for pyproject.toml, which no longer asks for it",
    ]


def test_read_lock_keeps_markers_and_sources() -> None:
    text = (
        "# header\n"
        "uvloop==0.23.0 ; sys_platform != 'win32' \\\n"
        "    --hash=sha256:00 \\\n"
        "    # via\n"
        "    #   -c requirements.lock\n"
        "    #   maslab (pyproject.toml)\n"
        "Typing_Extensions==4.16.0 \\\n"
        "    # via pydantic\n"
    )
    assert read_lock(text) == {
        "uvloop": Pin(Version("0.23.0"), "sys_platform != 'win32'", {"-c requirements.lock", OURS}),
        "typing-extensions": Pin(Version("4.16.0"), "", {"pydantic"}),
    }
