"""Stage 1 of blueprint validation: format, execution and policy compliance.

- format: the four parts are there (thought, instruction, actions, outputs), each action names
  a tool and its arguments are a JSON object, each output a non-empty string;
- execution: the actions run in order on a copy of the seed database (tool names, argument
  names and types are checked by the tools' schemas, then the tools themselves may refuse); the
  state diff is kept as the diff patch the committee sees;
- checkable: a task must be one an agent can fail: its actions change the database, or it
  expects outputs (each found in the tools' results). Otherwise the state critic passes any
  agent, even one that crashes or does nothing, and the task tests nothing;
- policy: the environment's rule checks over the action trace and the diff; each failure names
  the rule it breaks.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from intellagent.environment import Trace, run_actions, run_checks

from intellagent_plugins.apigen_mt.artefacts import Blueprint, Call, Problem
from intellagent_plugins.dialogue.state import missing_outputs


class DraftAction(BaseModel):
    name: str = Field(description="The tool to call.")
    arguments: str = Field(description="The tool's arguments as a JSON object, e.g. "
                                       "{\"order_id\": \"#W123\"}.")


class Draft(BaseModel):
    """What the generator writes: a blueprint with actions as JSON text."""

    thought: str = Field(description="Your plan: what the user wants and why these actions "
                                     "follow the policy.")
    user_id: str = Field(description="The id of the user the task is for.")
    instruction: str = Field(description="The user's instruction, in the second person ('You "
                             "are ...'), with every detail the actions need and the persona's "
                             "traits; never the tool names.")
    actions: list[DraftAction] = Field(description="The ground-truth tool calls, in order.")
    outputs: list[str] = Field(default_factory=list, description="Short strings the agent must "
                               "say (a price, a count), found in the tools' results; often none.")


def check_format(draft: Draft) -> tuple[Blueprint | None, list[Problem]]:
    problems = []
    for part in ("thought", "instruction", "user_id"):
        if not getattr(draft, part).strip():
            problems.append(Problem(stage="format", reason="missing-part", message=f"the {part} is empty"))
    if not draft.actions:
        problems.append(Problem(stage="format", reason="missing-part", message="there are no actions"))
    calls = []
    for i, action in enumerate(draft.actions):
        try:
            arguments = json.loads(action.arguments) if action.arguments.strip() else {}
        except json.JSONDecodeError as exc:
            problems.append(Problem(stage="format", reason="invalid-json", message=f"action {i} "
                                    f"({action.name}): arguments are not JSON: {exc.msg}"))
            continue
        if not isinstance(arguments, dict):
            problems.append(Problem(stage="format", reason="invalid-json", message=f"action {i} "
                                    f"({action.name}): arguments must be a JSON object"))
            continue
        calls.append(Call(name=action.name.strip(), arguments=arguments))
    for i, output in enumerate(draft.outputs):
        if not isinstance(output, str) or not output.strip():
            problems.append(Problem(stage="format", reason="bad-output", message=f"output {i} is empty"))
    if problems:
        return None, problems
    return Blueprint(thought=draft.thought.strip(), user_id=draft.user_id.strip(),
                     instruction=draft.instruction.strip(), actions=calls,
                     outputs=[o.strip() for o in draft.outputs]), []


@dataclass
class Execution:
    """What running a blueprint's actions gave: the problems, the trace (open databases; close
    it) and the diff patch as text."""

    problems: list[Problem] = field(default_factory=list)
    trace: Trace | None = None
    diff: str = ""
    results: list[str] = field(default_factory=list)

    def close(self) -> None:
        if self.trace is not None:
            self.trace.close()


def diff_patch(trace: Trace) -> str:
    """The state diff as a readable patch: one line per changed field, added or removed row."""
    lines = []
    for table, t in trace.diff.tables.items():
        for key, record in t.added.items():
            lines.append(f"+ {table}[{key}] = {json.dumps(record, default=str)[:600]}")
        for key in t.removed:
            lines.append(f"- {table}[{key}]")
        for key, changes in t.changed.items():
            for c in changes:
                lines.append(f"~ {table}[{key}].{c.path}: {json.dumps(c.before, default=str)[:200]} → "
                             f"{json.dumps(c.after, default=str)[:200]}")
    return "\n".join(lines) or "(no change)"


def execute(env, blueprint: Blueprint, *, stop_on_error: bool = True) -> Execution:
    """Run the actions on a copy of the seed database; a failed call is an execution problem."""
    problems = []
    for i, call in enumerate(blueprint.actions):
        if call.name not in env.tools:
            problems.append(Problem(stage="execution", reason="unknown-tool",
                                    message=f"action {i}: there is no tool '{call.name}' "
                                            f"(tools: {', '.join(sorted(env.tools))})"))
    if problems:
        return Execution(problems=problems)
    trace = run_actions(env.tools, env.seed_database(),
                        [(c.name, c.arguments) for c in blueprint.actions],
                        {"user_id": blueprint.user_id}, stop_on_error=stop_on_error)
    for action in trace.actions:
        if action.error:
            reason = "bad-arguments" if "invalid arguments" in action.output else "refused"
            problems.append(Problem(stage="execution", reason=reason, message=f"action "
                                    f"{action.index} ({action.name}): {action.output}"))
    return Execution(problems=problems, trace=trace, diff=diff_patch(trace),
                     results=[a.output for a in trace.actions])


def problems_feedback(problems: list[Problem]) -> str:
    """The problems as the generator reads them in its revision prompt."""
    return "\n".join(f"- [{p.stage}: {p.reason}] {p.message}" for p in problems)


def check_policy(env, trace: Trace) -> list[Problem]:
    return [Problem(stage="policy", reason=f.check, message=f.text()) for f in run_checks(env.checks, trace)]


def check_outputs(blueprint: Blueprint, results: list[str]) -> list[Problem]:
    """An expected output must come from what the tools returned (the agent can only say what
    it found)."""
    return [Problem(stage="execution", reason="unsupported-output",
                    message=f"output {o!r} appears in no tool result")
            for o in missing_outputs(blueprint.outputs, results)]


def check_testable(blueprint: Blueprint, trace: Trace) -> list[Problem]:
    """A task whose actions change nothing and that expects no output passes an agent that does
    nothing: it tests nothing."""
    if blueprint.outputs or not trace.diff.empty:
        return []
    return [Problem(stage="execution", reason="tests-nothing",
                    message="the actions change nothing in the database and the task expects no "
                            "output: an agent that does nothing would pass it (make a change, or "
                            "ask for a value the agent must tell)")]


def validate(env, draft: Draft) -> tuple[Blueprint | None, list[Problem], Execution]:
    """Stage 1: format, then execution (with the outputs' support and the task's being
    checkable), then policy; stops at the first stage that fails."""
    blueprint, problems = check_format(draft)
    if problems:
        return None, problems, Execution()
    result = execute(env, blueprint)
    if result.problems:
        return blueprint, result.problems, result
    problems = (check_outputs(blueprint, result.results) or check_testable(blueprint, result.trace)
                or check_policy(env, result.trace))
    return blueprint, problems, result


def tool_schemas(env, names: list[str] | None = None) -> list[dict[str, Any]]:
    return [t.openai_schema() for n, t in env.tools.items() if names is None or n in names]
