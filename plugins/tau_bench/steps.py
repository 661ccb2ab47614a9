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

from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, Field, ValidationError, ValidationInfo

from intellagent.bounds import MAX_ITEMS
from intellagent.errors import ConfigError
from intellagent.model import StrictModel
from intellagent.paths import check_contained, inside
from intellagent.steps import Generator, Sampler
from intellagent.yamlio import read_json
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


def read_tasks(path: Path, env: Any = None) -> list[TauTask]:
    """The tasks of a τ-bench task file (a JSON list), each with its index (its position when
    the file gives none). A file with no task, an entry of the wrong shape, or an action that
    calls no tool of ``env`` is one line naming the file and the entry."""
    raw = read_json(path)
    if not isinstance(raw, list):
        raise ConfigError("a task file is a JSON list of tasks", file=path, line=1)
    if not raw:
        raise ConfigError("holds no task", file=path)
    tasks = []
    for position, entry in enumerate(raw):
        try:
            task = TauTask.model_validate({"index": position, **entry} if isinstance(entry, dict) else entry)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            raise ConfigError(f"task {position}: {where + ': ' if where else ''}{err['msg']}",
                              file=path) from None
        if not task.instruction.strip():
            raise ConfigError(f"task {position}: no instruction (what the simulated user wants)", file=path)
        unknown = [a.name for a in task.actions if env is not None and env.tools and a.name not in env.tools]
        if unknown:
            raise ConfigError(f"task {position}: action '{unknown[0]}' is no tool of environment "
                              f"'{env.name}'", file=path)
        tasks.append(task)
    return tasks


class TauTasks(Sampler):
    """τ-bench's tasks (× trials), read from the environment's task file."""

    name = "tasks"
    Config = TasksConfig
    output = list[TaskSpec]

    def label_values(self, env) -> dict[str, list[Any]]:
        """Its tasks' trials: a gate on a pass^k past them is refused before the run."""
        return {"trial": list(range(self.config.trials))}

    def run(self, ctx) -> list[TaskSpec]:
        path = task_file(ctx.env, self.config.tasks)
        tasks = read_tasks(path, ctx.env)
        if self.config.indices is not None:
            wanted = set(self.config.indices)
            tasks = [t for t in tasks if t.index in wanted]
            missing = sorted(wanted - {t.index for t in tasks})
            if missing:
                raise ConfigError(f"indices {missing} name no task of {path.name}",
                                  item="steps.tasks.with.indices")
        if len(tasks) * self.config.trials > MAX_ITEMS:
            raise ConfigError(f"{len(tasks):,} tasks × {self.config.trials} trials is more than the "
                              f"{MAX_ITEMS:,} items a step may make (docs/input-and-bounds.md)", file=path)
        return [spec for task in tasks for spec in TaskSpec.trials_of(task, self.config.trials)]


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
