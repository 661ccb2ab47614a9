"""``apigen-tasks``: the accepted blueprints (single and combined) as τ-bench tasks, each run
``trials`` times: the τ-bench pipeline's task events, any user simulator and agent, and the
state critic take it from there."""

from __future__ import annotations

import json
from typing import Any

from pydantic import Field

from intellagent.bounds import MAX_ITEMS
from intellagent.model import StrictModel
from intellagent.steps import Generator, ItemEstimate, Sampler
from intellagent_plugins.dialogue.scenario import Action

from intellagent_plugins.apigen_mt.artefacts import (BlueprintResult, BlueprintTask, BlueprintTaskEvent,
                                                     BlueprintTaskSpec)


def as_task(index: int, result: BlueprintResult) -> BlueprintTask:
    """An accepted blueprint as a τ-bench task, with the blueprint it came from."""
    b = result.blueprint
    assert b is not None
    return BlueprintTask(index=index, user_id=b.user_id, instruction=b.instruction,
                         actions=[Action(name=a.name, arguments=a.arguments) for a in b.actions],
                         outputs=list(b.outputs), blueprint=result.id, kind=result.kind,
                         persona=b.persona)


def accepted_tasks(blueprints: list[BlueprintResult],
                   combined: list[BlueprintResult] | None) -> list[BlueprintTask]:
    """The accepted blueprints, singles then combined, each distinct task once (the same user
    and the same actions make the same task, whatever the instruction's wording)."""
    chosen = sorted((b for b in blueprints if b.status == "accepted"), key=lambda b: b.id)
    chosen += sorted((b for b in combined or [] if b.status == "accepted"), key=lambda b: b.id)
    seen, distinct = set(), []
    for b in chosen:
        key = (b.blueprint.user_id, json.dumps([a.model_dump() for a in b.blueprint.actions], sort_keys=True))
        if key not in seen:
            seen.add(key)
            distinct.append(b)
    return [as_task(i, b) for i, b in enumerate(distinct)]


class TasksConfig(StrictModel):
    trials: int = Field(default=3, ge=1, le=MAX_ITEMS,
                        description="Attempts per task (rejection sampling keeps "
                                                     "the successful ones; pass^k over them).")


class ApigenTasks(Sampler):
    """Every accepted blueprint as a task, × trials."""

    name = "tasks"
    Config = TasksConfig
    inputs = {"blueprints": list[BlueprintResult], "combined": list[BlueprintResult] | None}
    output = list[BlueprintTaskSpec]

    def estimate(self, env) -> ItemEstimate:
        """``trials`` tasks per blueprint and combined task it gathers (fewer: the rejected
        ones and duplicates are dropped)."""
        return ItemEstimate(per_input=self.config.trials)

    def label_values(self, env) -> dict[str, list[Any]]:
        """Its tasks' trials: a gate on a pass^k past them is refused before the run."""
        return {"trial": list(range(self.config.trials))}

    def run(self, ctx, blueprints: list[BlueprintResult],
            combined: list[BlueprintResult] | None = None) -> list[BlueprintTaskSpec]:
        return [spec for task in accepted_tasks(blueprints, combined)
                for spec in BlueprintTaskSpec.trials_of(task, self.config.trials)]


class BlueprintTaskEvents(Generator):
    """A blueprint task as the dialogue kit's scenario (τ-bench's task event, with the
    blueprint it came from)."""

    name = "task-events"
    inputs = {"spec": BlueprintTaskSpec}
    output = BlueprintTaskEvent

    def run(self, ctx, spec: BlueprintTaskSpec) -> BlueprintTaskEvent:
        return BlueprintTaskEvent.of(spec, blueprint=spec.task.blueprint, kind=spec.task.kind)
