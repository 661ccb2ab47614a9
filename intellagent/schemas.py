"""JSON Schemas of every YAML file kind and of the protocol an agent behind an endpoint speaks,
generated from the pydantic models into ``schemas/``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from intellagent.agent import AgentRequest, AgentResponse
from intellagent.environment.dbschema import DatabaseSchema
from intellagent.environment.manifest import EnvironmentManifest
from intellagent.environment.tools import ToolsFile
from intellagent.pipeline import PipelineSpec

SCHEMAS: dict[str, type[BaseModel]] = {
    "environment.schema.json": EnvironmentManifest,
    "database.schema.json": DatabaseSchema,
    "tools.schema.json": ToolsFile,
    "pipeline.schema.json": PipelineSpec,
    "agent-request.schema.json": AgentRequest,
    "agent-response.schema.json": AgentResponse,
}


def _canonical(node: Any) -> Any:
    """The schema in a form that does not change with pydantic's version: no
    ``additionalProperties: true`` (JSON Schema's default, which newer pydantic spells out for a
    free mapping), whole numbers written as integers (older pydantic writes bounds of a float
    field as ``3600.0``) and a lone ``$ref`` beside a description written as itself (older
    pydantic wraps it in ``allOf``; draft 2020-12 takes it as it is)."""
    if isinstance(node, dict):
        refs = node.get("allOf")
        if isinstance(refs, list) and len(refs) == 1 and isinstance(refs[0], dict) \
                and set(refs[0]) == {"$ref"} and "$ref" not in node:
            node = {"$ref": refs[0]["$ref"], **{k: v for k, v in node.items() if k != "allOf"}}
        return {k: _canonical(v) for k, v in node.items()
                if not (k == "additionalProperties" and v is True)}
    if isinstance(node, list):
        return [_canonical(v) for v in node]
    if isinstance(node, float) and node.is_integer():
        return int(node)
    return node


def render_schemas() -> dict[str, str]:
    out = {}
    for filename, model in SCHEMAS.items():
        schema = _canonical(model.model_json_schema(by_alias=True))
        schema = {"$schema": "https://json-schema.org/draft/2020-12/schema",
                  "$id": f"https://intellagent.dev/schemas/{filename}", **schema}
        out[filename] = json.dumps(schema, indent=2, ensure_ascii=False) + "\n"
    return out


def write_schemas(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for filename, text in render_schemas().items():
        path = folder / filename
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            written.append(path)
    return written


def stale_schemas(folder: Path) -> list[str]:
    """The schema files in ``folder`` that differ from what the models generate."""
    return [name for name, text in render_schemas().items()
            if not (folder / name).is_file() or (folder / name).read_text(encoding="utf-8") != text]
