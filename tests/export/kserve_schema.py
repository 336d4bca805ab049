"""Check KServe objects (YAML files) against the KServe SDK's API types (PyPI ``kserve``:
the OpenAPI models generated from KServe's CRD Go types, and the ``kubernetes`` client's
core/v1 models they embed). Run with the interpreter of the venv that holds the SDK
(``.venv-kserve``, scripts/install_clients.sh: kserve pins protobuf<7, which the project's
own venv cannot take)::

    .venv-kserve/bin/python tests/export/kserve_schema.py FILE.yaml...

Every key must be a field of its type (unknown fields fail, as ``kubectl apply
--validate=strict`` would), every value of the field's type, and every object must
construct with the SDK's own required-field checks. Exit 0 and ``ok`` per file, or 1 and
one line per problem.
"""

from __future__ import annotations

import sys

import kserve
import yaml
from kubernetes import client as k8s

KINDS = {
    ("serving.kserve.io/v1alpha1", "ServingRuntime"): "V1alpha1ServingRuntime",
    ("serving.kserve.io/v1beta1", "InferenceService"): "V1beta1InferenceService",
}
SCALARS = {"str": (str,), "int": (int,), "bool": (bool,), "float": (int, float)}


def model_class(name: str) -> type:
    found = getattr(kserve, name, None) or getattr(k8s, name, None)
    if found is None:
        raise KeyError(name)
    return found


def check(value: object, kind: str, path: str, problems: list[str]) -> None:
    kind = kind.replace("List[", "list[").replace("Dict[", "dict(")
    if kind.startswith("dict(") and kind.endswith("]"):
        kind = kind[:-1] + ")"
    if kind.startswith("list["):
        if not isinstance(value, list):
            problems.append(f"{path}: a list expected, got {value!r}")
            return
        for index, item in enumerate(value):
            check(item, kind[5:-1], f"{path}[{index}]", problems)
    elif kind.startswith("dict("):
        if not isinstance(value, dict):
            problems.append(f"{path}: a mapping expected, got {value!r}")
            return
        inner = kind[kind.index(",") + 1 : -1].strip()
        for key, item in value.items():
            check(item, inner, f"{path}.{key}", problems)
    elif kind in SCALARS:
        wrong_bool = isinstance(value, bool) and kind != "bool"
        if wrong_bool or not isinstance(value, SCALARS[kind]):
            problems.append(f"{path}: {kind} expected, got {value!r}")
    elif kind != "object":
        cls = model_class(kind)
        if not isinstance(value, dict):
            problems.append(f"{path}: a {kind} object expected, got {value!r}")
            return
        fields = {json_key: attr for attr, json_key in cls.attribute_map.items()}
        for key, item in value.items():
            if key not in fields:
                problems.append(f"{path}.{key}: not a field of {kind}")
            else:
                check(item, cls.openapi_types[fields[key]], f"{path}.{key}", problems)
        try:  # the SDK's constructors check required fields and allowed values
            cls(**{fields[key]: item for key, item in value.items() if key in fields})
        except (ValueError, TypeError) as exc:
            problems.append(f"{path}: {kind}: {exc}")


def main(paths: list[str]) -> int:
    failed = False
    for path in paths:
        with open(path) as stream:
            document = yaml.safe_load(stream)
        kind = KINDS.get((document.get("apiVersion"), document.get("kind")))
        problems: list[str] = []
        if kind is None:
            problems.append(f"not a KServe object this check knows: {document.get('kind')}")
        else:
            check(document, kind, document["kind"], problems)
        for problem in problems:
            print(f"{path}: {problem}")
        failed = failed or bool(problems)
        if not problems:
            print(f"{path}: ok")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
