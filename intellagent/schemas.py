"""JSON Schemas of every YAML file kind and of the protocol an agent behind an endpoint speaks,
generated from the pydantic models into ``schemas/``."""

from __future__ import annotations

import json
from pathlib import Path

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


def render_schemas() -> dict[str, str]:
    out = {}
    for filename, model in SCHEMAS.items():
        schema = model.model_json_schema(by_alias=True)
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
