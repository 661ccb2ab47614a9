"""The APIs a procedure needs, and the rules that make them usable as an agent's tools.

A procedure is kept only when its APIs are valid JSON-Schema-like definitions: at least one
API; names that are identifiers and unique; a description; parameters that form a valid JSON
Schema object (Draft 2020-12) in which every parameter is typed and named like an identifier and
``required`` names only declared parameters; and an output.
"""

from __future__ import annotations

import re
from typing import Any

import jsonschema
from pydantic import BaseModel, Field

from intellagent_plugins.almita.artefacts import Api, Rejection

IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
JSON_TYPES = ("string", "integer", "number", "boolean", "array", "object", "null")


class ParameterDraft(BaseModel):
    name: str = Field(description="snake_case identifier.")
    type: str = Field(description="A JSON Schema type: string, integer, number, boolean, array or object.")
    description: str
    required: bool = True
    enum: list[str] | None = Field(default=None, description="The allowed values, when they are few.")


class ApiDraft(BaseModel):
    name: str = Field(description="snake_case function name.")
    description: str
    parameters: list[ParameterDraft]
    output: str = Field(description="What a call returns (its fields, or the possible results).")


class ApiList(BaseModel):
    apis: list[ApiDraft]


def api_from_draft(draft: ApiDraft) -> Api:
    properties: dict[str, Any] = {}
    for p in draft.parameters:
        prop: dict[str, Any] = {"type": p.type, "description": p.description}
        if p.enum:
            prop["enum"] = list(p.enum)
        properties[p.name] = prop
    required = [p.name for p in draft.parameters if p.required]
    return Api(name=draft.name, description=draft.description, output=draft.output,
               parameters={"type": "object", "properties": properties, "required": list(dict.fromkeys(required))})


def _parameters_problem(api: Api) -> str | None:
    schema = api.parameters
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return f"{api.name}: parameters are not a JSON Schema object (type: object)"
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        return f"{api.name}: parameters are not a valid JSON Schema: {exc.message}"
    properties = schema.get("properties", {})
    for name, prop in properties.items():
        if not IDENTIFIER.match(name):
            return f"{api.name}: parameter {name!r} is not an identifier"
        types = prop.get("type") if isinstance(prop, dict) else None
        types = types if isinstance(types, list) else [types]
        if not isinstance(prop, dict) or not types or not all(t in JSON_TYPES for t in types):
            return f"{api.name}: parameter {name!r} has no JSON type ({prop.get('type') if isinstance(prop, dict) else prop!r})"
    unknown = [r for r in schema.get("required", []) if r not in properties]
    if unknown:
        return f"{api.name}: required parameter {unknown[0]!r} is not declared"
    return None


def check_apis(apis: list[Api], drafts: list[ApiDraft] | None = None) -> list[Rejection]:
    """Every API rule broken (empty: the APIs are valid). ``drafts``: the model's answer, to
    catch a parameter declared twice, which a schema's properties cannot hold."""
    broken: list[Rejection] = []

    def rule(name: str, detail: str | None) -> None:
        if detail and not any(r.rule == name for r in broken):
            broken.append(Rejection(rule=name, detail=detail))

    if not apis:
        rule("api-present", "the procedure names no API")
    seen: set[str] = set()
    for api in apis:
        if not IDENTIFIER.match(api.name):
            rule("api-names", f"{api.name!r} is not an identifier")
        elif api.name in seen:
            rule("api-names", f"two APIs are called {api.name!r}")
        seen.add(api.name)
        if not api.description.strip():
            rule("api-description", f"{api.name} has no description")
        rule("api-parameters", _parameters_problem(api))
        if not api.output.strip():
            rule("api-output", f"{api.name} does not say what it returns")
    for draft in drafts or []:
        names = [p.name for p in draft.parameters]
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup:
            rule("api-parameters", f"{draft.name}: parameter {dup!r} is declared twice")
    return broken
