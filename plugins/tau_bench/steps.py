"""τ-bench tasks as a pipeline: run τ-bench's hand-written tasks inside IntellAgent.

- sampler ``tau-tasks``: one event spec per task and trial, read from a τ-bench task file
  (``index``, ``user_id``, ``instruction``, ``actions``, ``outputs``);
- generator ``tau-task-events``: the instruction becomes the simulated user's scenario; the
  event's database is the environment's data untouched (point the environment at τ-bench's data
  with ``--data``); the user is told neither the expected actions nor the outputs;
- critic ``tau-state``: passes when the dialog's final database has the same hash as a fresh one
  after replaying the ground-truth actions, and every required output appears in the agent's
  replies; a dialog the agent crashed in is ``agent-error`` (a failure of the agent, whatever
  the state: a task that changes nothing would otherwise pass). Its ``task`` scores (labelled
  with the task index) give pass^k over trials; count ``agent-error`` among the failures.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import Field

from intellagent.conversation import Dialog
from intellagent.errors import ConfigError
from intellagent.model import StrictModel
from intellagent.steps import Critic, Generator, Output, Sampler, Score
from intellagent_plugins.intellagent.artefacts import Event, EventSpec, Verdict, Violation


def missing_outputs(outputs: list[str], texts: list[str]) -> list[str]:
    """The expected outputs that appear in none of ``texts`` (τ-bench's rule: case and thousands
    separators aside)."""
    said = " ".join(texts).lower().replace(",", "")
    return [o for o in outputs if o.lower().replace(",", "") not in said]


class TaskSpec(EventSpec):
    """An event spec that replays a τ-bench task (its own type: only task-reading samplers give
    one, so a task step cannot be wired to a graph walk)."""

    task: dict[str, Any] = Field(description="The task: index, trial, user_id, instruction, "
                                             "actions, outputs.")

    @classmethod
    def trials_of(cls, task: dict[str, Any], trials: int) -> list["TaskSpec"]:
        """One spec per trial of ``task`` (named by its ``index`` and the trial)."""
        return [cls(id=f"T{task['index']:03d}-{trial}", policies=[], target_complexity=0,
                    complexity=0, task={**task, "trial": trial}) for trial in range(trials)]


class TaskEvent(Event):
    """An event made from a τ-bench task."""

    task: dict[str, Any]


class TasksConfig(StrictModel):
    tasks: str = Field(description="τ-bench task file (JSON); relative paths are looked up in the "
                                   "environment's data folder.")
    trials: int = Field(default=1, ge=1, description="Runs of each task, for pass^k.")
    indices: list[int] | None = Field(default=None, description="Only these task indices.")


def task_file(env, name: str) -> Path:
    path = Path(name)
    if not path.is_absolute():
        folders = {p.parent for p in env.seed_files.values()} or {env.path}
        path = next((f / name for f in sorted(folders) if (f / name).is_file()), path)
    if not path.is_file():
        raise ConfigError(f"τ-bench task file '{name}' not found", file=path)
    return path


class TauTasks(Sampler):
    """τ-bench's tasks (× trials), read from the environment's task file."""

    name = "tau-tasks"
    Config = TasksConfig
    output = list[TaskSpec]

    def run(self, ctx) -> list[TaskSpec]:
        path = task_file(ctx.env, self.config.tasks)
        try:
            tasks = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ConfigError(f"invalid JSON: {exc.msg}", file=path, line=exc.lineno) from None
        wanted = set(self.config.indices) if self.config.indices is not None else None
        specs = []
        for position, task in enumerate(tasks):
            index = task.get("index", position)
            if wanted is not None and index not in wanted:
                continue
            specs += TaskSpec.trials_of({**task, "index": index}, self.config.trials)
        return specs


class TauTaskEvents(Generator):
    """A task as an event: the instruction for the user, the environment's data untouched."""

    name = "tau-task-events"
    inputs = {"spec": TaskSpec}
    output = TaskEvent

    def run(self, ctx, spec: TaskSpec) -> TaskEvent:
        task = spec.task
        user = task.get("user_id")
        return TaskEvent(id=spec.id, spec=spec, scenario=task.get("instruction", ""),
                         user_knowledge=f"Your user id is {user}." if user else "", task=task)


class TauState(Critic):
    """Final database hash against the ground truth's, and every required output said."""

    name = "tau-state"
    inputs = {"event": TaskEvent, "dialog": Dialog}
    output = Verdict

    def __init__(self, config) -> None:
        super().__init__(config)
        self._expected: dict[str, str] = {}

    def expected_hash(self, env, task: dict) -> str:
        """The hash after replaying the ground truth on a fresh database (transfers skipped)."""
        key = json.dumps(task["actions"], sort_keys=True)
        if key not in self._expected:
            db = env.seed_database()
            for action in task["actions"]:
                if action["name"] != "transfer_to_human_agents" and action["name"] in env.tools:
                    env.tools[action["name"]].call(db, action["kwargs"])
            self._expected[key] = db.hash()
            db.close()
        return self._expected[key]

    def run(self, ctx, event: TaskEvent, dialog: Dialog) -> Output[Verdict]:
        task = event.task
        if dialog.stop_reason == "agent-error":  # a crash fails the task, whatever the state says
            return self._outcome(event, dialog, "agent-error", f"the agent failed: {dialog.error}", [])
        problems = []
        if ctx.env.db_schema is not None and dialog.final_hash is None:
            raise ConfigError("the dialogs carry no final database hash: set `final_hash: true` on "
                              "the simulator step (user-agent) that makes them")
        if ctx.env.db_schema is not None and dialog.final_hash != self.expected_hash(ctx.env, task):
            problems.append("the final database differs from the ground truth's")
        said = [t.content or "" for t in dialog.turns if t.role == "assistant"]
        problems += [f"the agent never said {o!r}" for o in missing_outputs(task.get("outputs") or [], said)]
        return self._outcome(event, dialog, "fail" if problems else "pass", "; ".join(problems), problems)

    def _outcome(self, event: TaskEvent, dialog: Dialog, status: str, reason: str,
                 problems: list[str]) -> Output[Verdict]:
        task = event.task
        verdict = Verdict(id=event.id, status=status, reason=reason, stop=dialog.stop_reason or "",
                          violated=[Violation(policy="task", reason=p) for p in problems])
        score = Score(name="task", status=status, note=reason,
                      labels={"task": task.get("index"), "trial": task.get("trial")})
        return Output(value=verdict, status=status, note=reason, scores=[score])
