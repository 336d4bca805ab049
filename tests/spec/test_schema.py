"""The committed JSON Schema of model.yaml is the one ModelSpec generates."""

from __future__ import annotations

import json

from scripts import gen_schema as generator

from paths import ROOT


def test_committed_schema_is_current() -> None:
    assert generator.SCHEMA_PATH.read_text() == generator.render_schema(), (
        "schema/model.schema.json is stale: run python scripts/gen_schema.py"
    )


def test_schema_forbids_unknown_keys_and_requires_the_basics() -> None:
    schema = json.loads((ROOT / "schema" / "model.schema.json").read_text())
    assert schema["additionalProperties"] is False
    assert set(schema["required"]) == {"name", "version"}
    assert schema["oneOf"] == [{"required": ["source"]}, {"required": ["engines"]}]
    assert schema["$defs"]["EngineSpec"]["required"] == ["source"]
    kinds = {
        rule["if"]["properties"]["kind"]["const"]: rule["then"]["properties"]["settings"]
        for rule in schema["$defs"]["PipelineSpec"]["allOf"]
    }
    assert set(kinds) == {"ensemble", "qwen2-vl"}
    assert kinds["ensemble"]["required"] == ["steps"]
    assert kinds["qwen2-vl"]["additionalProperties"] is False
    assert schema["$defs"]["InputSpec"]["additionalProperties"] is False


def test_engine_and_asset_names_follow_their_pattern_and_nothing_else() -> None:
    schema = json.loads((ROOT / "schema" / "model.schema.json").read_text())
    engines = schema["properties"]["engines"]["anyOf"][0]
    assets = schema["properties"]["assets"]
    for mapping in (engines, assets):
        assert list(mapping["patternProperties"]) == ["^[a-z0-9][a-z0-9_-]{0,62}$"]
        assert mapping["additionalProperties"] is False
