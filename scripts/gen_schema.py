"""Write the generated references: ``schema/model.schema.json``, the JSON Schema of
model.yaml (from ``ModelSpec``), and the table of runtime settings in ``docs/runtime.md``
(from the settings table, :mod:`mmaas.core.runtime_settings`, between its two markers).

Editors (e.g. VS Code's YAML extension with ``# yaml-language-server: $schema=...``) use the
schema to complete and check model.yaml files. Both files are committed;
``tests/spec/test_schema.py`` and ``tests/core/test_runtime_settings.py`` fail when one is
stale, and this script regenerates them.

Usage: ``python scripts/gen_schema.py [--check]`` (``--check``: exit 1 if one is stale,
write nothing).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from mmaas.build.spec_checks import pipeline_kind
from mmaas.core.files import atomic_write_text
from mmaas.core.pipelines import PIPELINES
from mmaas.core.runtime_settings import SETTINGS
from mmaas.spec.model import ModelSpec

ROOT = Path(__file__).resolve().parent.parent
SCHEMA_PATH = ROOT / "schema" / "model.schema.json"
RUNTIME_DOC = ROOT / "docs" / "runtime.md"
DIALECT = "https://json-schema.org/draft/2020-12/schema"
TABLE_BEGIN = (
    "<!-- the runtime settings table: made by python scripts/gen_schema.py from "
    "toolkit/mmaas/core/runtime_settings.py; do not edit by hand -->"
)
TABLE_END = "<!-- end of the runtime settings table -->"


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


def render_settings_doc(text: str) -> str:
    """``text`` (docs/runtime.md) with the part between :data:`TABLE_BEGIN` and
    :data:`TABLE_END` replaced by the table of every runtime setting: its variable, its
    model.yaml key, what it takes (kind, limits, unit), its default and its doc.

    Raises:
        ValueError: ``text`` lacks one of the markers.
    """
    lines = [
        "| variable | model.yaml | takes | default | meaning |",
        "|---|---|---|---|---|",
    ]
    for setting in SETTINGS:
        key = f"`{setting.yaml_key}`" if setting.key else "(environment only)"
        given = setting.default not in (None, ())
        default = f"`{setting.format(setting.default)}`" if given else "(unset)"
        lines.append(
            f"| `{setting.env}` | {key}{' (given)' if setting.switch else ''} | "
            f"{setting.kind.expects} | {default} | {setting.doc} |"
        )
    head, begin, rest = text.partition(TABLE_BEGIN)
    _, end, tail = rest.partition(TABLE_END)
    if not begin or not end:
        raise ValueError(f"{RUNTIME_DOC} lacks the markers {TABLE_BEGIN!r} and {TABLE_END!r}")
    return head + begin + "\n" + "\n".join(lines) + "\n" + end + tail


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
    """Command-line entry: write the schema and the settings table, or with ``--check``
    compare them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a file is stale")
    args = parser.parse_args()
    doc = RUNTIME_DOC.read_text()
    outputs = {SCHEMA_PATH: render_schema(), RUNTIME_DOC: render_settings_doc(doc)}
    for path, text in outputs.items():
        current = path.read_text() if path.is_file() else ""
        if args.check:
            if current != text:
                sys.exit(f"{path} is stale; run python scripts/gen_schema.py")
            continue
        if current != text:
            atomic_write_text(path, text)
            print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
