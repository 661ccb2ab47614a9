"""τ-bench tasks as a pipeline: run τ-bench's hand-written tasks inside IntellAgent.

- sampler ``tasks``: one spec per task and trial, read from a τ-bench task file (``index``,
  ``user_id``, ``instruction``, ``actions``, ``outputs``);
- generator ``task-events``: the task as the dialogue kit's scenario (the instruction for the
  simulated user, the environment's data untouched: point the environment at τ-bench's data with
  ``--data``); the user is told neither the expected actions nor the outputs;
- critic ``state``: the dialogue kit's ``state-check`` (the final database against the ground
  truth replayed, every required output said; a crash is ``agent-error``) with ``task`` scores
  labelled by task index and trial, for pass^k over trials; count ``agent-error`` among the
  failures.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, Field, ValidationError, ValidationInfo

from intellagent.bounds import MAX_ITEMS
from intellagent.errors import ConfigError
from intellagent.model import StrictModel
from intellagent.paths import check_contained, inside
from intellagent.steps import Generator, Sampler
from intellagent_plugins.dialogue.state import StateCheck
from intellagent_plugins.tau_bench.artefacts import TaskEvent, TaskSpec, TauTask


def _task_file_name(value: str, info: ValidationInfo) -> str:
    check_contained(value, "τ-bench task file", info)
    return value


class TasksConfig(StrictModel):
    tasks: Annotated[str, AfterValidator(_task_file_name)] = Field(
        description="τ-bench task file (JSON); relative paths are looked up in the environment's "
                    "data folder (and must stay inside it), then in the current folder.")
    trials: int = Field(default=1, ge=1, le=1000, description="Runs of each task, for pass^k.")
    indices: list[int] | None = Field(default=None, max_length=MAX_ITEMS, description="Only these task "
                                      "indices.")


def task_file(env, name: str) -> Path:
    path = Path(name)
    if not path.is_absolute():
        folders = {p.parent for p in env.seed_files.values()} or {env.path}
        found = (inside(f, name) for f in sorted(folders))
        path = next((f for f in found if f is not None and f.is_file()), path)
    if not path.is_file():
        raise ConfigError(f"τ-bench task file '{name}' not found", file=path)
    return path


def read_tasks(path: Path) -> list[TauTask]:
    """The tasks of a τ-bench task file (a JSON list), each with its index (its position when
    the file gives none)."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"invalid JSON: {exc.msg}", file=path, line=exc.lineno) from None
    if not isinstance(raw, list):
        raise ConfigError("a task file is a JSON list of tasks", file=path)
    tasks = []
    for position, entry in enumerate(raw):
        try:
            tasks.append(TauTask.model_validate({"index": position, **entry}
                                                if isinstance(entry, dict) else entry))
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            raise ConfigError(f"task {position}: {where}: {err['msg']}", file=path) from None
    return tasks


class TauTasks(Sampler):
    """τ-bench's tasks (× trials), read from the environment's task file."""

    name = "tasks"
    Config = TasksConfig
    output = list[TaskSpec]

    def run(self, ctx) -> list[TaskSpec]:
        wanted = set(self.config.indices) if self.config.indices is not None else None
        return [spec for task in read_tasks(task_file(ctx.env, self.config.tasks))
                if wanted is None or task.index in wanted
                for spec in TaskSpec.trials_of(task, self.config.trials)]


class TauTaskEvents(Generator):
    """A task as a scenario: the instruction for the user, the environment's data untouched."""

    name = "task-events"
    inputs = {"spec": TaskSpec}
    output = TaskEvent

    def run(self, ctx, spec: TaskSpec) -> TaskEvent:
        return TaskEvent.of(spec)


class TauState(StateCheck):
    """The kit's end-state check, scored per task and trial."""

    name = "state"
    inputs = {"scenario": TaskEvent, "dialog": StateCheck.inputs["dialog"]}
    score_name = "task"
    score_labels = ("task", "trial")

    def labels(self, scenario: TaskEvent) -> dict[str, Any]:
        return {"task": scenario.index, "trial": scenario.trial}
