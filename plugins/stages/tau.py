"""τ-bench tasks as events: run τ-bench's hand-written tasks inside IntellAgent.

- extractor ``tau-policy``: no model call; one node standing for the whole domain policy
  (τ-bench scores adherence to the policy as a whole, not policy by policy);
- sampler ``tau-tasks``: one event spec per task and trial, read from a τ-bench task file
  (``index``, ``user_id``, ``instruction``, ``actions``, ``outputs``);
- generator ``tau-task-events``: the instruction becomes the simulated user's scenario; the
  event's database is the environment's data untouched (point the environment at τ-bench's data
  with ``--data``);
- critic ``tau-state``: passes when the dialog's final database has the same hash as a fresh one
  after replaying the ground-truth actions, and every required output appears in the agent's
  replies. Results are reported as pass^k over the trials of each task.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import Field

from intellagent.artefacts import Dialog, Event, EventSpec, Policy, PolicyGraph, Verdict, Violation
from intellagent.errors import ConfigError
from intellagent.model import StrictModel
from intellagent.stages import Critic, Extractor, Generator, NoOptions, Sampler

POLICY = Policy(id="P1", flow="tau-bench", text="Follow the domain policy document in full.",
                category="company policy", challenge=3)


class TauPolicy(Extractor):
    name = "tau-policy"
    Config = NoOptions

    async def extract(self, ctx) -> PolicyGraph:
        return PolicyGraph(environment=ctx.env.name, task="Replay τ-bench tasks.", flows=["tau-bench"],
                           policies=[POLICY])


class TasksConfig(StrictModel):
    tasks: str = Field(description="τ-bench task file (JSON); relative paths are looked up in the "
                                   "environment's data folder.")
    trials: int = Field(default=1, ge=1, description="Runs of each task, for pass^k.")
    indices: list[int] | None = Field(default=None, description="Only these task indices.")


def task_file(ctx, name: str) -> Path:
    path = Path(name)
    if not path.is_absolute():
        folders = {p.parent for p in ctx.env.seed_files.values()} or {ctx.env.path}
        path = next((f / name for f in folders if (f / name).is_file()), path)
    if not path.is_file():
        raise ConfigError(f"τ-bench task file '{name}' not found", file=path)
    return path


class TauTasks(Sampler):
    name = "tau-tasks"
    Config = TasksConfig

    def sample(self, ctx, graph: PolicyGraph, events: int | None = None) -> list[EventSpec]:
        path = task_file(ctx, self.config.tasks)
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
            for trial in range(self.config.trials):
                specs.append(EventSpec(id=f"T{index:03d}-{trial}", policies=[POLICY.id],
                                       target_complexity=POLICY.challenge, complexity=POLICY.challenge,
                                       task={**task, "index": index, "trial": trial}))
        return specs


class TauTaskEvents(Generator):
    name = "tau-task-events"
    Config = NoOptions

    def __init__(self, config) -> None:
        super().__init__(config)
        self._seed_hash: str | None = None

    async def generate(self, ctx, graph: PolicyGraph, spec: EventSpec) -> Event:
        task = spec.task or {}
        if self._seed_hash is None and ctx.env.db_schema is not None:
            db = ctx.env.seed_database()  # every task starts from the untouched data
            self._seed_hash = db.hash()
            db.close()
        outputs = task.get("outputs") or []
        return Event(id=spec.id, spec=spec, scenario=task.get("instruction", ""),
                     user_knowledge=f"Your user id is {task.get('user_id')}." if task.get("user_id") else "",
                     expected={POLICY.id: "Reach the ground-truth end state"
                               + (f" and tell the user: {', '.join(outputs)}" if outputs else "")},
                     task=task, initial_hash=self._seed_hash)


class TauState(Critic):
    name = "tau-state"
    Config = NoOptions

    def __init__(self, config) -> None:
        super().__init__(config)
        self._expected: dict[str, str] = {}

    def expected_hash(self, ctx, task: dict) -> str:
        """The hash after replaying the ground truth on a fresh database (transfers skipped)."""
        key = json.dumps(task["actions"], sort_keys=True)
        if key not in self._expected:
            db = ctx.env.seed_database()
            for action in task["actions"]:
                if action["name"] != "transfer_to_human_agents" and action["name"] in ctx.env.tools:
                    ctx.env.tools[action["name"]].call(db, action["kwargs"])
            self._expected[key] = db.hash()
            db.close()
        return self._expected[key]

    async def critique(self, ctx, graph: PolicyGraph, event: Event, dialog: Dialog) -> Verdict:
        if dialog.stop_reason == "infra-error":
            return Verdict(event_id=event.id, status="infra-error", reason=dialog.error or "")
        task = event.task or {}
        problems = []
        if ctx.env.db_schema is not None and dialog.final_hash != self.expected_hash(ctx, task):
            problems.append("the final database differs from the ground truth's")
        said = " ".join((t.content or "") for t in dialog.turns if t.role == "assistant")
        said = said.lower().replace(",", "")
        for output in task.get("outputs") or []:
            if output.lower().replace(",", "") not in said:
                problems.append(f"the agent never said {output!r}")
        return Verdict(event_id=event.id, status="fail" if problems else "pass", exercised=[POLICY.id],
                       violated=[Violation(policy=POLICY.id, reason=p) for p in problems],
                       reason="; ".join(problems))
