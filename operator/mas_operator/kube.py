"""The operator's only API I/O: server-side apply, list, delete, Secrets' versions, status.

All writes of child objects go through server-side apply under one field manager
(:data:`~mas_operator.names.FIELD_MANAGER`), with ``force`` (the operator owns the fields it
sets). The client is the official synchronous ``kubernetes`` client; callers run it in a
worker thread. API failures surface as :class:`kubernetes.client.ApiException`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

from kubernetes import client as k8s

from mas.infra.models import API_GROUP, API_VERSION, PLURAL
from mas_operator.backoff import parse_retry_after
from mas_operator.children import CHILD_KINDS, ChildKind
from mas_operator.names import FIELD_MANAGER

logger = logging.getLogger(__name__)

_KINDS = {kind.kind: kind for kind in CHILD_KINDS}
_JSON = "application/json"


def api_message(exc: k8s.ApiException) -> str:
    """The API server's own message of a failure (its Status ``message``), else the reason."""
    try:
        status = json.loads(exc.body or "")
    except ValueError:
        status = None
    message = status.get("message") if isinstance(status, dict) else None
    return str(message or f"{exc.status} {exc.reason}")


def retry_after(exc: k8s.ApiException) -> float | None:
    """Seconds the API server's ``Retry-After`` header asks a client to wait, if it sent one."""
    headers = exc.headers or {}
    return parse_retry_after(headers.get("Retry-After"))


def _collection(kind: ChildKind, namespace: str) -> str:
    root = "/api/v1" if kind.api_version == "v1" else f"/apis/{kind.api_version}"
    return f"{root}/namespaces/{namespace}/{kind.plural}"


@dataclass
class Cluster:
    """A thin wrapper around one :class:`kubernetes.client.ApiClient`."""

    api: k8s.ApiClient
    field_manager: str = FIELD_MANAGER
    timeout: float = 30.0
    # The url warnings last posted per Application uid: a reconcile that starts from a copy
    # older than its predecessor's status write must not post them again.
    warned: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # uid: the edges an EdgeNotReady Warning was posted for, until they are Ready again
    edges_warned: dict[str, set[tuple[str, str, str]]] = field(default_factory=dict)

    def _call(
        self,
        path: str,
        method: str,
        *,
        query: Iterable[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = _JSON,
        accept: str = _JSON,
    ) -> dict[str, Any]:
        verb, url, headers, data, post = self.api.param_serialize(
            method=method,
            resource_path=path,
            query_params=list(query),
            header_params={"Content-Type": content_type, "Accept": accept},
            body=body,
            auth_settings=["BearerToken"],
        )
        response = self.api.call_api(
            verb,
            url,
            header_params=headers,
            body=data,
            post_params=post,
            _request_timeout=self.timeout,
        )
        response.read()  # type: ignore[no-untyped-call]
        if not 200 <= response.status < 300:
            raise k8s.ApiException(http_resp=response)
        return cast(dict[str, Any], json.loads(response.data) if response.data else {})

    def apply(self, manifest: Mapping[str, Any]) -> dict[str, Any]:
        """Server-side apply one child; returns the object as the server has it."""
        kind = _KINDS[manifest["kind"]]
        meta = manifest["metadata"]
        path = f"{_collection(kind, meta['namespace'])}/{meta['name']}"
        query = [("fieldManager", self.field_manager), ("force", "true")]
        # Sent as JSON text, serialised once here: the client sends text as it is, where
        # it would first walk a dict to copy it (JSON is YAML, as an apply patch wants).
        return self._call(
            path,
            "PATCH",
            query=query,
            body=json.dumps(manifest, separators=(",", ":")).encode(),
            content_type="application/apply-patch+yaml",
        )

    def create(self, kind: ChildKind, manifest: Mapping[str, Any]) -> dict[str, Any] | None:
        """Create an object that is never updated (a Job); ``None`` when it exists already."""
        path = _collection(kind, manifest["metadata"]["namespace"])
        try:
            return self._call(
                path, "POST", query=[("fieldManager", self.field_manager)], body=dict(manifest)
            )
        except k8s.ApiException as exc:
            if exc.status == 409:
                return None
            raise

    def list_children(self, kind: ChildKind, namespace: str, selector: str) -> list[dict[str, Any]]:
        """Every object of ``kind`` in ``namespace`` matching the label ``selector``."""
        out = self._call(_collection(kind, namespace), "GET", query=[("labelSelector", selector)])
        items = out.get("items") or []
        for item in items:
            item.setdefault("kind", kind.kind)
            item.setdefault("apiVersion", kind.api_version)
        return cast(list[dict[str, Any]], items)

    def serves(self, group: str, version: str, plural: str) -> bool:
        """Whether the API server serves ``plural`` in ``group/version`` (discovery, which
        every authenticated client may read)."""
        try:
            found = self._call(f"/apis/{group}/{version}", "GET")
        except k8s.ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return any(r.get("name") == plural for r in found.get("resources") or [])

    def list_application_names(self, page: int = 500) -> list[tuple[str, str, str]]:
        """``(namespace, name, uid)`` of every Application in the cluster: metadata only,
        ``page`` at a time (a cluster-wide LIST: needs a ClusterRole to list them)."""
        path = f"/apis/{API_GROUP}/{API_VERSION}/{PLURAL}"
        accept = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
        out: list[tuple[str, str, str]] = []
        token = ""
        while True:
            query = [("limit", str(page))] + ([("continue", token)] if token else [])
            listing = self._call(path, "GET", query=query, accept=accept)
            for item in listing.get("items") or []:
                meta = item.get("metadata") or {}
                out.append(
                    (str(meta.get("namespace")), str(meta.get("name")), str(meta.get("uid")))
                )
            token = (listing.get("metadata") or {}).get("continue") or ""
            if not token:
                return out

    def delete(self, kind: ChildKind, namespace: str, name: str) -> None:
        """Delete one child (already gone is fine)."""
        try:
            self._call(
                f"{_collection(kind, namespace)}/{name}",
                "DELETE",
                body={"propagationPolicy": "Background"},
            )
        except k8s.ApiException as exc:
            if exc.status != 404:
                raise

    def secret_versions(self, namespace: str, names: Iterable[str]) -> dict[str, str]:
        """``{name: resourceVersion}`` of Secrets (``"missing"`` for an absent one).

        Only metadata is requested; values are never read into the operator's memory.
        """
        versions: dict[str, str] = {}
        for name in names:
            try:
                meta = self._call(
                    f"/api/v1/namespaces/{namespace}/secrets/{name}",
                    "GET",
                    accept="application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
                )
                versions[name] = str(meta["metadata"]["resourceVersion"])
            except k8s.ApiException as exc:
                if exc.status != 404:
                    raise
                versions[name] = "missing"
        return versions

    def patch_status(
        self, namespace: str, name: str, status: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        """Merge-patch ``status`` of an Application (its status subresource); returns the
        Application as the server has it after the patch (``None``: it was deleted)."""
        path = f"/apis/{API_GROUP}/{API_VERSION}/namespaces/{namespace}/{PLURAL}/{name}/status"
        try:
            return self._call(
                path,
                "PATCH",
                body={"status": dict(status)},
                content_type="application/merge-patch+json",
            )
        except k8s.ApiException as exc:
            if exc.status != 404:  # deleted meanwhile: nothing to report on
                raise
            return None

    def post_event(
        self, involved: Mapping[str, Any], event_type: str, reason: str, message: str
    ) -> None:
        """Post a core/v1 Event about ``involved`` (failures are logged, never raised)."""
        meta = involved["metadata"]
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
            "involvedObject": {
                "apiVersion": involved.get("apiVersion"),
                "kind": involved.get("kind"),
                "name": meta["name"],
                "namespace": meta["namespace"],
                "uid": meta.get("uid"),
            },
            "type": event_type,
            "reason": reason,
            "message": message[:1024],
            "source": {"component": self.field_manager},
            "reportingComponent": self.field_manager,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        try:
            self._call(f"/api/v1/namespaces/{meta['namespace']}/events", "POST", body=body)
        except k8s.ApiException as exc:
            logger.warning("could not post the %s Event %s: %s", event_type, reason, exc.reason)
