"""``mas-operator conformance``: probe every published AgentCard in some namespaces.

The chart's Helm test (``helm test``, values ``conformance.test.enabled``) runs it. It lists
the Applications, takes every ``status.agents.<id>.card_url`` the operator published, runs
``mas-ctl conformance --url CARD -o json`` on each (a subprocess: the operator never imports
``mas.ctl``), reads each verdict exactly as the operator reads a conformance Job's
(:func:`mas_operator.conformance.from_termination`), prints one row per agent and exits 1
when any is not conformant. It needs only ``list`` on Applications.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from kubernetes import client as k8s

from mas.infra.models import API_GROUP, API_VERSION, PLURAL
from mas_operator.conformance.verdicts import AgentConformance, from_termination


@dataclass(frozen=True)
class PublishedCard:
    """One deployed agent's AgentCard, as its Application's status publishes it."""

    namespace: str
    application: str
    agent: str
    card_url: str


def published_cards(applications: Iterable[Mapping[str, Any]]) -> list[PublishedCard]:
    """Every ``status.agents.<id>.card_url``, sorted by namespace, Application and agent."""
    cards = []
    for app in applications:
        meta = app.get("metadata") or {}
        agents = (app.get("status") or {}).get("agents") or {}
        for agent, status in agents.items():
            url = (status or {}).get("card_url")
            if url:
                cards.append(PublishedCard(meta["namespace"], meta["name"], agent, url))
    return sorted(cards, key=lambda c: (c.namespace, c.application, c.agent))


def list_applications(api: k8s.ApiClient, namespaces: Sequence[str]) -> list[dict[str, Any]]:
    """The Applications of ``namespaces`` (every namespace when it is empty)."""
    custom = k8s.CustomObjectsApi(api)
    if not namespaces:
        found = cast(
            dict[str, Any], custom.list_cluster_custom_object(API_GROUP, API_VERSION, PLURAL)
        )
        return list(found.get("items") or [])
    items: list[dict[str, Any]] = []
    for namespace in namespaces:
        found = cast(
            dict[str, Any],
            custom.list_namespaced_custom_object(API_GROUP, API_VERSION, namespace, PLURAL),
        )
        items += found.get("items") or []
    return items


def default_mas_ctl() -> list[str]:
    """``mas-ctl`` beside this interpreter (the image's virtualenv), else from ``PATH``."""
    beside = Path(sys.executable).parent / "mas-ctl"
    return [str(beside)] if beside.exists() else ["mas-ctl"]


def probe_card(
    card: PublishedCard, *, mas_ctl: Sequence[str], timeout: float, deadline: float
) -> AgentConformance:
    """Run the probe on one card; its JSON on stdout is the result, whatever the exit code."""
    argv = [*mas_ctl, "conformance", "--url", card.card_url, "-o", "json"]
    argv += ["--timeout", f"{timeout:g}"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=deadline, check=False)
    except subprocess.TimeoutExpired:
        return AgentConformance(
            "False", "ProbeFailed", f"the probe did not finish within {deadline:g}s"
        )
    except OSError as exc:
        return AgentConformance("False", "ProbeFailed", f"cannot run {argv[0]}: {exc}")
    verdict = from_termination({"exitCode": done.returncode, "message": done.stdout})
    if done.returncode == 2 and done.stderr.strip():  # a usage error says why on stderr
        return AgentConformance(verdict.status, verdict.reason, done.stderr.strip())
    return verdict


def render_rows(rows: Sequence[tuple[PublishedCard, AgentConformance]]) -> str:
    """The per-agent table and a verdict line."""
    table = [("NAMESPACE", "APPLICATION", "AGENT", "CONFORMANT", "DETAIL")]
    table += [(c.namespace, c.application, c.agent, v.status, v.message) for c, v in rows]
    widths = [max(len(r[i]) for r in table) for i in range(4)]
    lines = [
        "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:4])) + "  " + row[4]
        for row in table
    ]
    failed = sum(1 for _, v in rows if v.status != "True")
    cards = "AgentCard" if len(rows) == 1 else "AgentCards"
    verdict = (
        f"conformant: {len(rows)} published {cards}"
        if not failed
        else f"NOT conformant: {failed} of {len(rows)} published {cards}"
    )
    return "\n".join([*(line.rstrip() for line in lines), "", verdict])


def check_published_cards(
    api: k8s.ApiClient,
    namespaces: Sequence[str],
    *,
    timeout: float,
    deadline: float,
    parallel: int,
    mas_ctl: Sequence[str] | None = None,
) -> int:
    """List, probe, print; 0 when every published card is conformant (or there is none)."""
    cards = published_cards(list_applications(api, namespaces))
    where = ", ".join(namespaces) or "any namespace"
    if not cards:
        print(f"no published AgentCards in {where}: nothing to probe")
        return 0
    command = list(mas_ctl or default_mas_ctl())

    def one(card: PublishedCard) -> AgentConformance:
        return probe_card(card, mas_ctl=command, timeout=timeout, deadline=deadline)

    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        verdicts = list(pool.map(one, cards))
    rows = list(zip(cards, verdicts, strict=True))
    print(render_rows(rows))
    return 0 if all(v.status == "True" for v in verdicts) else 1
