"""``environment.yaml``: what an environment is called and where its parts are."""

from __future__ import annotations

from pydantic import Field

from intellagent.model import StrictModel

NAME_PATTERN = r"^[a-z][a-z0-9_-]{0,63}$"


class DatabaseSection(StrictModel):
    schema_file: str = Field(alias="schema", description="The database schema YAML, relative to "
                                                          "the environment folder.")
    seed: str | dict[str, str] | None = Field(
        default=None,
        description="A folder holding one file per table (<table>.json, .jsonl or .csv, optionally "
                    ".gz), or a mapping from table to file.")
    loader: str | None = Field(
        default=None,
        description="'file.py:function' or 'module:function' returning the seed rows as "
                    "{table: {key: record}}: for data read at run time, e.g. from an installed "
                    "package. Instead of seed.")


class EnvironmentManifest(StrictModel):
    """The manifest of an environment folder. Paths are relative to the folder."""

    name: str = Field(pattern=NAME_PATTERN)
    version: str = "0.1.0"
    description: str = ""
    prompt: str = Field(default="prompt.md", description="The agent's system prompt or policy "
                                                          "document (Markdown, used literally).")
    task: str | None = Field(default=None, description="Optional Markdown file describing the "
                                                       "agent's task; inferred from the prompt "
                                                       "when absent.")
    database: DatabaseSection | None = None
    tools: str | None = Field(default=None, description="Tool specifications YAML.")
    validators: str | None = Field(default=None, description="Python file (validators.py) or "
                                                             "module holding the data validators.")
    tool_timeout: float = Field(default=30.0, gt=0, le=3600, description="Seconds a tool call may "
                                "take (a tool's own `timeout` overrides it); a call that outlasts "
                                "it ends its conversation as an infra error, never the run.")
    checks: str | None = Field(default=None, description="Python file (checks.py) or module "
                               "holding the rule checks: functions marked @rule_check(id, rule) "
                               "that decide from a trace of tool calls and its database states "
                               "whether a rule of the agent's instructions was followed.")
