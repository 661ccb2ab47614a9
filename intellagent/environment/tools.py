"""Tool specifications (YAML) bound to their Python implementations."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import inspect
import json
from pathlib import Path
from typing import Any, Callable

import jsonschema
from pydantic import BaseModel, Field, PrivateAttr, field_validator

from intellagent.bounds import MAX_CHARS
from intellagent.environment.database import Database
from intellagent.environment.refs import ReferenceError_, resolve
from intellagent.errors import ToolError
from intellagent.model import StrictModel


class ToolReturns(StrictModel):
    type: str = "string"
    description: str = ""


def _unwrapped(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _unwrapped(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unwrapped(v) for v in value]
    return value


class ToolSpec(StrictModel):
    """One tool the agent under test may call."""

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
    description: str = Field(max_length=MAX_CHARS, description="What the tool does, for the agent "
                             "(sent with every request the agent makes).")
    parameters: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}, "required": []},
        description="JSON Schema of the arguments (an object schema).")
    returns: ToolReturns = Field(default_factory=ToolReturns)
    action: bool = Field(default=False, description="True when the tool changes the database.")
    terminal: bool = Field(default=False, description="True when calling it ends the conversation "
                                                      "(e.g. a hand-off to a human).")
    timeout: float | None = Field(default=None, gt=0, le=3600, description="Seconds a call may take "
                                  "(default: the environment's tool_timeout).")
    implementation: str = Field(description="'module:function' or 'file.py:function'; called as "
                                            "function(db, **arguments).")
    meta: dict[str, Any] = Field(default_factory=dict, description="Declarations for pipelines "
                                 "that need more than the call (e.g. how two invocations are "
                                 "compared, parameters the harness injects).")
    _source: str = PrivateAttr(default="")

    @field_validator("description")
    @classmethod
    def _said(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("a tool's description is what the agent knows of it: it cannot be empty")
        return value

    @field_validator("parameters", "meta", mode="after")
    @classmethod
    def _plain_containers(cls, value: dict[str, Any]) -> dict[str, Any]:
        """Plain dicts and lists, not the YAML reader's commented containers: the schema goes
        into every agent request and is serialised there (ruamel's containers iterate in Python)."""
        return _unwrapped(value)

    @field_validator("parameters")
    @classmethod
    def _object_schema(cls, value: dict[str, Any]) -> dict[str, Any]:
        if value.get("type") != "object":
            raise ValueError("parameters must be a JSON Schema with type: object")
        try:
            jsonschema.Draft202012Validator.check_schema(value)
        except jsonschema.SchemaError as exc:
            raise ValueError(f"not a valid JSON Schema: {exc.message}") from None
        unknown = [r for r in value.get("required", []) if r not in value.get("properties", {})]
        if unknown:
            raise ValueError(f"required names '{unknown[0]}', which is not among the properties")
        return value

    @property
    def properties(self) -> dict[str, Any]:
        return self.parameters.get("properties", {})

    @property
    def required(self) -> list[str]:
        return list(self.parameters.get("required", []))


class ToolsFile(StrictModel):
    tools: list[ToolSpec] = Field(description="At least one tool (an environment without tools "
                                  "names no tools file).")

    @field_validator("tools")
    @classmethod
    def _some(cls, value: list[ToolSpec]) -> list[ToolSpec]:
        if not value:
            raise ValueError("lists no tool (an environment without tools names no tools file)")
        return value


class ToolResult(BaseModel):
    """What a call gave back: the text the agent sees, and whether it was refused or crashed."""

    output: str
    error: bool = False
    crashed: bool = Field(default=False, description="The implementation raised something other "
                                                     "than ToolError (a bug in the tool).")


def signature_problems(spec: ToolSpec, func: Callable[..., Any]) -> list[str]:
    """How ``func``'s signature differs from ``spec`` (first parameter is the database)."""
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):
        return [f"implementation of '{spec.name}' is not a function"]
    if inspect.iscoroutinefunction(func) or inspect.isasyncgenfunction(func):
        return [f"implementation of '{spec.name}' is async (async def): tools run synchronously "
                "inside a transaction; write it as a plain function"]
    params = list(sig.parameters.values())
    if not params or params[0].kind not in (inspect.Parameter.POSITIONAL_ONLY,
                                            inspect.Parameter.POSITIONAL_OR_KEYWORD):
        return [f"implementation of '{spec.name}' must take the database as its first parameter"]
    rest = {p.name: p for p in params[1:]}
    if any(p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL) for p in rest.values()):
        return [f"implementation of '{spec.name}' must name its parameters (no *args/**kwargs)"]
    spec_names = set(spec.properties)
    differences = []
    missing = sorted(spec_names - set(rest))
    extra = sorted(set(rest) - spec_names)
    if missing:
        differences.append(f"lacks {', '.join(missing)}")
    if extra:
        differences.append(f"has {', '.join(extra)}, which the spec does not declare")
    for name in sorted(spec_names & set(rest)):
        has_default = rest[name].default is not inspect.Parameter.empty
        if name in spec.required and has_default:
            differences.append(f"gives required '{name}' a default")
        if name not in spec.required and not has_default:
            differences.append(f"gives optional '{name}' no default")
    if not differences:
        return []
    return [f"implementation of '{spec.name}' does not match its spec: {'; '.join(differences)}"]


class Tool:
    """A spec with its implementation: validates arguments, runs in a transaction."""

    def __init__(self, spec: ToolSpec, func: Callable[..., Any]) -> None:
        self.spec = spec
        self.func = func
        self._validator = jsonschema.Draft202012Validator(spec.parameters)

    @property
    def name(self) -> str:
        return self.spec.name

    def openai_schema(self) -> dict[str, Any]:
        """The tool as the OpenAI chat-completions API describes functions."""
        return {"type": "function", "function": {
            "name": self.spec.name, "description": self.spec.description,
            "parameters": self.spec.parameters}}

    def argument_problems(self, arguments: dict[str, Any]) -> list[str]:
        out = []
        for err in sorted(self._validator.iter_errors(arguments), key=lambda e: list(e.path)):
            where = ".".join(str(p) for p in err.path)
            out.append(f"{where}: {err.message}" if where else err.message)
        return out

    def call(self, db: Database | None, arguments: dict[str, Any] | str) -> ToolResult:
        """Run the tool. A refusal or a crash rolls its writes back and is reported, not raised."""
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as exc:
                return ToolResult(output=f"Error: arguments are not valid JSON: {exc.msg}", error=True)
        if not isinstance(arguments, dict):
            return ToolResult(output="Error: arguments must be a JSON object", error=True)
        problems = self.argument_problems(arguments)
        if problems:
            return ToolResult(output="Error: invalid arguments: " + "; ".join(problems), error=True)
        try:
            if db is None:
                value = self.func(None, **arguments)
            else:
                with db.transaction():
                    value = self.func(db, **arguments)
        except ToolError as exc:
            return ToolResult(output=f"Error: {exc}", error=True)
        except (Exception, SystemExit) as exc:  # a bug in the tool; the agent sees it as an error
            what = f"called sys.exit({exc.code!r})" if isinstance(exc, SystemExit) else \
                f"{type(exc).__name__}: {exc}"
            return ToolResult(output=f"Error: tool '{self.name}' crashed: {what}", error=True, crashed=True)
        if value is None:
            return ToolResult(output="")
        if isinstance(value, str):
            return ToolResult(output=value)
        try:
            return ToolResult(output=json.dumps(value, default=_plain, ensure_ascii=False))
        except (TypeError, ValueError) as exc:
            return ToolResult(output=f"Error: tool '{self.name}' returned a value that cannot be "
                                     f"sent as JSON: {exc}", error=True, crashed=True)


def _plain(value: Any) -> Any:
    """JSON for the values tools commonly return beyond JSON's own types."""
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return base64.b64encode(bytes(value)).decode("ascii")
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    raise TypeError(f"{type(value).__name__} is not JSON")


def bind_tool(spec: ToolSpec, base: Path) -> tuple[Tool | None, list[str]]:
    """The tool and the problems found binding it (unresolvable or mismatched implementation)."""
    try:
        func = resolve(spec.implementation, base)
    except ReferenceError_ as exc:
        return None, [f"tool '{spec.name}': implementation {exc}"]
    if not callable(func):
        return None, [f"tool '{spec.name}': implementation '{spec.implementation}' is not callable"]
    problems = signature_problems(spec, func)
    return (None if problems else Tool(spec, func)), problems
