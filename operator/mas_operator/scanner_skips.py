"""The findings of checkov and kube-score an agent's Deployment skips, each with its reason.

CI scans what the operator renders (``tests/scanners``); what it still flags is a choice
the Application makes, not a defect of the manifest, so it is skipped in the manifest
itself: ``checkov.io/skip<n>: <check>=<reason>`` and ``kube-score/ignore: <checks>``
annotations on the Deployment. docs/operations.md lists them ("Scanner findings skipped").
"""

from __future__ import annotations

from mas.infra.models import RuntimeSpec
from mas_operator.scheduling import spread_out

CHECKOV_SKIPS = (
    (
        "CKV_K8S_11",
        "no CPU limit by default: a limit throttles a busy turn; "
        "spec.runtime.resources.limits.cpu sets one",
    ),
    (
        "CKV_K8S_15",
        "the pull policy is spec.runtime.image_pull_policy (IfNotPresent by default): "
        "Always makes every pod start depend on the registry",
    ),
    (
        "CKV_K8S_43",
        "the image is spec.runtime.image as the Application names it; name a digest to pin it",
    ),
)
# kube-score's CPU limit (container-resources) is skipped by its own flag in tests/scanners,
# so its memory and request checks still apply; the reasons are those of CHECKOV_SKIPS.
KUBE_SCORE_IGNORED = ("container-image-pull-policy",)
# A single replica is the Application's choice (docs/operations.md: what a drain costs it).
KUBE_SCORE_SINGLE_REPLICA = ("deployment-replicas",)


def skip_annotations(runtime: RuntimeSpec) -> dict[str, str]:
    """The skip annotations of an agent's Deployment."""
    out = {
        f"checkov.io/skip{n}": f"{check}={why}" for n, (check, why) in enumerate(CHECKOV_SKIPS, 1)
    }
    ignored = list(KUBE_SCORE_IGNORED)
    if not spread_out(runtime):
        ignored += KUBE_SCORE_SINGLE_REPLICA
    out["kube-score/ignore"] = ",".join(ignored)
    return out
