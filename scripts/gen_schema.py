"""Write ``schema/model.schema.json``, the JSON Schema of model.yaml, from ``ModelSpec``.

Editors (e.g. VS Code's YAML extension with ``# yaml-language-server: $schema=...``) use it
to complete and check model.yaml files. The file is committed; ``tests/test_schema.py``
fails when it is stale, and this script regenerates it.

Usage: ``python scripts/gen_schema.py [--check]`` (``--check``: exit 1 if stale, write
nothing).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from mmaas.build.spec_checks import pipeline_kind
from mmaas.core.files import atomic_write_text
from mmaas.core.pipelines import PIPELINES
from mmaas.spec.model import ModelSpec

ROOT = Path(__file__).resolve().parent.parent
SCHEMA_PATH = ROOT / "schema" / "model.schema.json"
DIALECT = "https://json-schema.org/draft/2020-12/schema"


def render_schema() -> str:
    """The schema's JSON text (sorted keys, 2-space indent, trailing newline): the spec's
    own, plus what pydantic cannot say: exactly one of ``source`` (one engine) and
    ``engines`` (several), each pipeline kind's ``settings`` (by ``kind``), and that a
    mapping with a key pattern (engine and asset names) takes no other keys."""
    schema = {"$schema": DIALECT, **ModelSpec.model_json_schema()}
    schema["title"] = "mmaas model.yaml"
    schema["oneOf"] = [{"required": ["source"]}, {"required": ["engines"]}]
    kinds = []
    for kind in sorted(PIPELINES):
        settings = pipeline_kind(kind).settings.model_json_schema(ref_template="#/$defs/{model}")
        schema["$defs"].update(settings.pop("$defs", {}))
        kinds.append(
            {
                "if": {"properties": {"kind": {"const": kind}}},
                "then": {"properties": {"settings": settings}},
            }
        )
    schema["$defs"]["PipelineSpec"]["allOf"] = kinds
    _close_patterns(schema)
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def _close_patterns(node: object) -> None:
    """Add ``additionalProperties: false`` to every object schema whose keys have a pattern
    (pydantic writes ``patternProperties`` alone, which lets any other key through)."""
    if isinstance(node, dict):
        if "patternProperties" in node:
            node.setdefault("additionalProperties", False)
        for value in node.values():
            _close_patterns(value)
    elif isinstance(node, list):
        for value in node:
            _close_patterns(value)


def main() -> None:
    """Command-line entry: write the schema, or with ``--check`` compare it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is stale")
    args = parser.parse_args()
    text = render_schema()
    current = SCHEMA_PATH.read_text() if SCHEMA_PATH.is_file() else ""
    if args.check:
        if current != text:
            sys.exit(f"{SCHEMA_PATH} is stale; run python scripts/gen_schema.py")
        return
    atomic_write_text(SCHEMA_PATH, text)
    print(f"wrote {SCHEMA_PATH.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
