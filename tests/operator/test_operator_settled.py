"""When a full resync pass may leave an Application alone (pure).

An Application is settled by a successful self-contained reconcile, with what that
reconcile left: the echoes of its own writes (the status patch, kopf's annotation patch
after its handler, the children's applies) keep it settled; any other change unsettles it.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from kubernetes import client as k8s
from operator_support import reconciles

from mas_operator.handlers import OperatorContext, application_inputs, run_reconcile, spec_inputs
from mas_operator.kube import Cluster
from mas_operator.metrics import OperatorMetrics
from mas_operator.names import ANNOTATION_CONFORMANCE_RUN, ANNOTATION_DIFFBASE
from mas_operator.status_writes import after_write

pytestmark = pytest.mark.timeout(10)

UID = "6f1c2b7e-0000-4000-8000-000000000001"


def app(version: str = "10") -> dict[str, Any]:
    return {
        "apiVersion": "infra.maslab.io/v1",
        "kind": "Application",
        "metadata": {
            "name": "desk",
            "namespace": "team",
            "uid": UID,
            "generation": 1,
            "resourceVersion": version,
            "labels": {"team": "research"},
            "managedFields": [{"manager": "kubectl", "operation": "Apply"}],
        },
        "spec": {"agency": {"entry": "front"}},
        "status": {"phase": "Ready", "observedGeneration": 1},
    }


def bookkeeping(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` as the echo of a write that changed only bookkeeping: a new version, new
    managed fields, kopf's diff base, a progress record of its handler and the marker kopf
    brands our annotation prefix with."""
    echo = copy.deepcopy(body)
    meta = echo["metadata"]
    meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)
    meta["managedFields"].append({"manager": "mas-operator", "operation": "Update"})
    annotations = meta.setdefault("annotations", {})  # none before kopf's first patch
    annotations[ANNOTATION_DIFFBASE] = '{"spec":{}}'
    annotations["maslab.io/reconcile"] = '{"started":"2026-12-04T00:00:00Z"}'
    annotations["maslab.io/kopf-managed"] = "yes"
    return echo


def test_the_inputs_of_an_application_leave_out_its_bookkeeping() -> None:
    assert application_inputs(bookkeeping(app())) == application_inputs(app())


@pytest.mark.parametrize(
    "change",
    [
        lambda b: b["spec"].update(agency={"entry": "back"}),
        lambda b: b["metadata"].update(generation=2),
        lambda b: b["status"].update(phase="Degraded"),
        lambda b: b["metadata"]["labels"].update(team="ops"),
        lambda b: (
            b["metadata"].setdefault("annotations", {}).update({ANNOTATION_CONFORMANCE_RUN: "2"})
        ),
        lambda b: b["metadata"].update(deletionTimestamp="2026-12-04T00:00:00Z"),
    ],
    ids=["spec", "generation", "status", "label", "conformance-run", "deletion"],
)
def test_what_a_reconcile_reads_changes_the_inputs(change: Any) -> None:
    changed = app()
    change(changed)
    assert application_inputs(changed) != application_inputs(app())


def created() -> dict[str, Any]:
    """The Application as created, before the reconcile that wrote its status."""
    body = app("9")
    del body["status"]
    return body


@pytest.fixture
def ctx() -> OperatorContext:
    """A context whose Application was just reconciled from ``created()``: its status
    write returned ``app()``."""
    context = OperatorContext(Cluster(k8s.ApiClient()), OperatorMetrics())
    context.remember(created())
    context.queue.finished(UID, status=after_write(created(), app(), None))
    context.queue.settle(UID, application_inputs(app()))
    return context


def test_the_echoes_of_our_writes_keep_it_settled(ctx: OperatorContext) -> None:
    ctx.remember(app())  # the status write's echo, however late it comes
    ctx.remember(bookkeeping(app()))  # then kopf's annotation patch
    assert ctx.queue.is_settled(UID)


def test_the_version_it_was_reconciled_from_keeps_it_settled(ctx: OperatorContext) -> None:
    """kopf's handler can be called with the version a resync pass reconciled from, after
    that reconcile wrote its status."""
    ctx.remember(created())
    assert ctx.queue.is_settled(UID)


def test_a_reconcile_queued_behind_the_one_that_settled_it_does_nothing(
    ctx: OperatorContext,
) -> None:
    """kopf's handler and a resync pass both found it unsettled; the second to take its
    lock reads what the first left, and neither applies nor counts a reconcile."""
    assert asyncio.run(run_reconcile(ctx, created())) is None
    assert asyncio.run(run_reconcile(ctx, app())) is None
    assert reconciles(ctx.metrics) == 0
    assert ctx.queue.is_settled(UID)


def test_any_other_change_of_the_application_unsettles_it(ctx: OperatorContext) -> None:
    edited = app("12")
    edited["metadata"]["labels"]["team"] = "ops"
    ctx.remember(edited)
    assert not ctx.queue.is_settled(UID)
    ctx.remember(app("13"))  # changed back: still to be reconciled once
    assert not ctx.queue.is_settled(UID)


def test_a_child_event_that_is_not_our_echo_unsettles_it(ctx: OperatorContext) -> None:
    ctx.queue.enqueue(UID)
    assert not ctx.queue.is_settled(UID)
    assert ctx.queue.is_dirty(UID)


def test_a_forgotten_application_is_not_settled(ctx: OperatorContext) -> None:
    ctx.forget(UID)
    assert not ctx.queue.is_settled(UID)


def child(name: str, version: str) -> dict[str, Any]:
    return {"kind": "Service", "metadata": {"name": name, "resourceVersion": version}}


def test_the_echo_of_our_apply_outside_a_reconcile_keeps_it_settled(ctx: OperatorContext) -> None:
    ctx.queue.finished(UID, versions={("Service", "desk-front"): "213"})
    ctx.queue.child_seen(UID, child("desk-front", "213"))
    assert ctx.queue.is_settled(UID)
    ctx.queue.child_seen(UID, child("desk-front", "214"))  # someone else's write
    assert not ctx.queue.is_settled(UID)
    assert ctx.queue.is_dirty(UID)


async def reconcile_that_sees(ctx: OperatorContext, seen: dict[str, Any], records: str) -> None:
    """A reconcile during which ``seen`` arrives before its thread records that its apply
    of desk-front returned ``records``; then what run_reconcile does after it."""
    queue = ctx.queue
    async with queue.lock(UID):
        queue.child_seen(UID, seen)
        assert not queue.is_dirty(UID)  # held, not judged yet
        queue.finished(UID, versions={("Service", "desk-front"): records})
        queue.settle(UID, application_inputs(app()))
    queue.judge_held(UID)


def test_an_echo_that_beats_the_record_of_its_apply_keeps_it_settled(
    ctx: OperatorContext,
) -> None:
    asyncio.run(reconcile_that_sees(ctx, child("desk-front", "213"), records="213"))
    assert ctx.queue.is_settled(UID)
    assert not ctx.queue.is_dirty(UID)
    assert ctx.queue.holding(UID) == 0


def test_a_change_seen_during_a_reconcile_unsettles_it_when_the_reconcile_ends(
    ctx: OperatorContext,
) -> None:
    asyncio.run(reconcile_that_sees(ctx, child("desk-front", "212"), records="213"))
    assert not ctx.queue.is_settled(UID)
    assert ctx.queue.is_dirty(UID)


def test_a_status_write_does_not_enqueue_but_an_edit_does() -> None:
    """What the Application's watch compares to decide whether to enqueue it."""
    written = app("11")
    written["status"]["phase"] = "Degraded"  # anyone's status write, ours included
    assert spec_inputs(written) == spec_inputs(app())
    assert spec_inputs(bookkeeping(app())) == spec_inputs(app())
    edited = app("12")
    edited["spec"]["agency"]["entry"] = "back"
    assert spec_inputs(edited) != spec_inputs(app())
    rerun = app("13")
    rerun["metadata"]["annotations"] = {ANNOTATION_CONFORMANCE_RUN: "2"}
    assert spec_inputs(rerun) != spec_inputs(app())
