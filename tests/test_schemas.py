"""schemas/ is generated from the models, and the built-in YAML files satisfy it."""

from __future__ import annotations

import json

import jsonschema
import pytest
from ruamel.yaml import YAML

from intellagent.schemas import render_schemas, stale_schemas
from tests.conftest import REPO

SCHEMAS = REPO / "schemas"


def test_schemas_are_in_sync_with_the_models():
    stale = stale_schemas(SCHEMAS)
    assert stale == [], f"regenerate with `intellagent schemas`: {stale}"
    assert sorted(p.name for p in SCHEMAS.glob("*.json")) == sorted(render_schemas())


def test_a_stale_schema_is_detected(tmp_path):
    for name, text in render_schemas().items():
        (tmp_path / name).write_text(text)
    (tmp_path / "tools.schema.json").write_text("{}")
    assert stale_schemas(tmp_path) == ["tools.schema.json"]


@pytest.mark.parametrize("env", ["airline", "retail", "education"])
def test_builtin_yaml_files_validate_against_the_schemas(env):
    yaml = YAML(typ="safe")
    folder = REPO / "environments" / env
    pairs = [("environment.yaml", "environment.schema.json")]
    if (folder / "tools.yaml").exists():
        pairs += [("tools.yaml", "tools.schema.json"), ("database/schema.yaml", "database.schema.json")]
    for filename, schema_name in pairs:
        schema = json.loads((SCHEMAS / schema_name).read_text())
        jsonschema.validate(yaml.load((folder / filename).read_text()), schema)


def test_schema_rejects_an_unknown_key():
    schema = json.loads((SCHEMAS / "environment.schema.json").read_text())
    with pytest.raises(jsonschema.ValidationError, match="promt"):
        jsonschema.validate({"name": "x", "promt": "p.md"}, schema)
