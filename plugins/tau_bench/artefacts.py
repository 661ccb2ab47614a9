"""τ-bench's artefacts, public to the pipelines that build on τ-bench (APIGen-MT): a task, the
spec of one trial of it, and the dialogue kit's scenario it becomes."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from intellagent_plugins.dialogue.scenario import Action, GroundTruth, Scenario


class TauTask(BaseModel):
    """A τ-bench task (as its task files hold it) and which trial of it this is."""

    index: int
    trial: int = 0
    user_id: str | None = None
    instruction: str = ""
    actions: list[Action] = Field(default_factory=list, description="The ground-truth tool calls.")
    outputs: list[str] = Field(default_factory=list, description="What the agent must say.")

    def as_entry(self) -> dict[str, Any]:
        """The task as τ-bench's task files hold it (actions with ``kwargs``), without the
        trial, with any fields a subclass adds."""
        entry = self.model_dump(mode="json", exclude={"trial", "actions"})
        return {**entry, "actions": [{"name": a.name, "kwargs": a.arguments} for a in self.actions]}


class TaskSpec(BaseModel):
    """One trial of a task, named by its index and the trial (``T007-2``)."""

    id: str
    task: TauTask

    @classmethod
    def trials_of(cls, task: TauTask, trials: int) -> list["TaskSpec"]:
        """One spec per trial of ``task``."""
        return [cls(id=f"T{task.index:03d}-{trial}", task=task.model_copy(update={"trial": trial}))
                for trial in range(trials)]


class TaskEvent(Scenario):
    """A task as a scenario: the instruction is the simulated user's brief, the user id what it
    knows, the actions and outputs the ground truth; the database is the environment's data
    untouched."""

    index: int
    trial: int = 0
    user_id: str | None = None

    @classmethod
    def of(cls, spec: TaskSpec, **extra: object) -> "TaskEvent":
        task = spec.task
        return cls(id=spec.id, brief=task.instruction, index=task.index, trial=task.trial,
                   user_id=task.user_id,
                   user_knowledge=f"Your user id is {task.user_id}." if task.user_id else "",
                   ground_truth=GroundTruth(actions=task.actions, outputs=task.outputs), **extra)
