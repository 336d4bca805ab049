"""A FAKE Kubernetes API server for the real ``kubectl``: no cluster can run here (no
API-server binary can be had), so this answers exactly what ``kubectl apply
--dry-run=client`` asks a Kubernetes 1.37 API server before it would write: the version,
discovery (legacy ``/api`` and ``/apis``) of the kinds the exports hold (KServe's as if
its CRDs were installed), the OpenAPI v3 index and each group's paths (which tell kubectl
the server validates fields itself: ``fieldValidation``, as every API server since 1.27
does, so kubectl runs no client-side schema check), and 404 for every object (none
exists yet). It never accepts a write.

What kubectl does here is what it does against a real cluster up to the write: read the
folder (every ``.json``, ``.yaml`` and ``.yml`` file in it), decode each object, map its
kind to a resource and look the object up. The objects' fields are checked apart, as
the API server would: kubernetes-validate (Kubernetes 1.37's schemas, strict) and
tests/export/kserve_schema.py (KServe's API types).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

K8S = "1.37.0"
# group/version -> [(resource, kind, namespaced)]
RESOURCES: dict[str, list[tuple[str, str, bool]]] = {
    "v1": [("services", "Service", True), ("pods", "Pod", True)],
    "apps/v1": [("deployments", "Deployment", True)],
    "autoscaling/v2": [("horizontalpodautoscalers", "HorizontalPodAutoscaler", True)],
    "policy/v1": [("poddisruptionbudgets", "PodDisruptionBudget", True)],
    "serving.kserve.io/v1beta1": [("inferenceservices", "InferenceService", True)],
    "serving.kserve.io/v1alpha1": [("servingruntimes", "ServingRuntime", True)],
}
HASH = "0123456789ABCDEF"  # the index's per-document hash (kubectl caches by it)
FIELD_VALIDATION = {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}}


def _openapi_documents() -> dict[str, dict[str, Any]]:
    """``{"api/v1": doc, "apis/apps/v1": doc, ...}``: every schema in every document (refs
    cross groups), the group's own kinds carrying their group-version-kind."""
    documents = {}
    for group_version, resources in RESOURCES.items():
        path = "api/v1" if group_version == "v1" else f"apis/{group_version}"
        group, _, version = group_version.rpartition("/")
        paths = {}
        for resource, kind, _ in resources:
            gvk = {"group": group, "version": version, "kind": kind}
            operation = {
                "x-kubernetes-group-version-kind": gvk,
                "parameters": [FIELD_VALIDATION],
            }
            collection = f"/{path}/namespaces/{{namespace}}/{resource}"
            paths[collection] = {"post": {**operation, "x-kubernetes-action": "post"}}
            paths[f"{collection}/{{name}}"] = {
                "patch": {**operation, "x-kubernetes-action": "patch"},
                "put": {**operation, "x-kubernetes-action": "put"},
            }
        documents[path] = {
            "openapi": "3.0.0",
            "info": {"title": "Kubernetes", "version": f"v{K8S}"},
            "paths": paths,
            "components": {"schemas": {}},
        }
    return documents


class _Handler(BaseHTTPRequestHandler):
    documents: ClassVar[dict[str, dict[str, Any]]] = {}
    requests: ClassVar[list[str]] = []

    def log_message(self, *args: Any) -> None:
        return

    def _send(self, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # the verb http.server dispatches to
        path = self.path.split("?")[0].strip("/")
        self.requests.append(f"GET /{path}")
        found = self._answer(path)
        if found is None:
            status = {"kind": "Status", "apiVersion": "v1", "status": "Failure"}
            self._send(404, {**status, "reason": "NotFound", "code": 404})
        else:
            self._send(200, found)

    def do_POST(self) -> None:
        self.requests.append(f"POST {self.path}")
        self._send(405, {"kind": "Status", "apiVersion": "v1", "code": 405})

    do_PUT = do_PATCH = do_DELETE = do_POST

    def _answer(self, path: str) -> dict[str, Any] | None:
        if path == "version":
            return {"major": "1", "minor": K8S.split(".")[1], "gitVersion": f"v{K8S}"}
        if path == "api":
            return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
        if path == "apis":
            return {"kind": "APIGroupList", "apiVersion": "v1", "groups": _groups()}
        if path == "openapi/v3":
            urls = {name: f"/openapi/v3/{name}?hash={HASH}" for name in self.documents}
            return {"paths": {name: {"serverRelativeURL": url} for name, url in urls.items()}}
        if path.startswith("openapi/v3/"):
            return self.documents.get(path.removeprefix("openapi/v3/"))
        group_version = path.removeprefix("api/").removeprefix("apis/")
        if group_version in RESOURCES and path in ("api/v1", f"apis/{group_version}"):
            return {
                "kind": "APIResourceList",
                "apiVersion": "v1",
                "groupVersion": group_version,
                "resources": [
                    {
                        "name": name,
                        "singularName": kind.lower(),
                        "namespaced": namespaced,
                        "kind": kind,
                        "verbs": ["create", "get", "list", "patch", "update", "delete"],
                    }
                    for name, kind, namespaced in RESOURCES[group_version]
                ],
            }
        return None  # any object: not found (nothing exists yet)


def _groups() -> list[dict[str, Any]]:
    groups: dict[str, list[str]] = {}
    for group_version in RESOURCES:
        if "/" in group_version:
            group, version = group_version.split("/")
            groups.setdefault(group, []).append(version)
    return [
        {
            "name": group,
            "versions": [{"groupVersion": f"{group}/{v}", "version": v} for v in versions],
            "preferredVersion": {"groupVersion": f"{group}/{versions[0]}", "version": versions[0]},
        }
        for group, versions in groups.items()
    ]


@contextmanager
def fake_apiserver() -> Iterator[tuple[str, list[str]]]:
    """A running fake API server on 127.0.0.1: ``(server URL, the requests it saw)``."""
    handler = type("Handler", (_Handler,), {"documents": _openapi_documents(), "requests": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler.requests
    finally:
        server.shutdown()
        server.server_close()
