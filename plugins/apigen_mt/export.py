"""``apigen-export``: a reporter that writes what the run produced for reuse, in
``runs/RUN/apigen/``:

- ``tasks.json``: every accepted blueprint (single and combined) as a τ-bench task (index,
  user_id, instruction, actions with kwargs, outputs, and the blueprint it came from): run it as
  a benchmark with ``intellagent run ENV --pipeline tau-bench --tasks PATH``;
- ``trajectories.openai.jsonl``: each unique successful trajectory as an OpenAI fine-tuning chat
  example (``messages`` with tool calls and tool results, ``tools``);
- ``trajectories.jsonl``: the same with the task id, trial and blueprint beside them.

Only trials the state critic passed and that end with the agent's reply are exported, and of
identical trajectories of one task only the first (rejection sampling keeps the unique
successes).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from intellagent.report import Reporter

from intellagent_plugins.apigen_mt.artefacts import Trajectory
from intellagent_plugins.apigen_mt.critic import TrajectoryState, exportable
from intellagent_plugins.apigen_mt.tasks import ApigenTasks


def openai_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The agent's messages as OpenAI's fine-tuning format wants them (no empty content beside
    tool calls)."""
    out = []
    for m in messages:
        m = dict(m)
        if m.get("role") == "assistant" and m.get("tool_calls") and not m.get("content"):
            m.pop("content", None)
        out.append(m)
    return out


def _step(plan, test) -> str | None:
    return next((name for name, s in plan.steps.items() if test(s)), None)


class ApigenExport(Reporter):
    name = "export"

    def write(self, report, data, folder: Path, views) -> Path:
        out = folder / "apigen"
        out.mkdir(parents=True, exist_ok=True)
        plan = data.plan
        tasks_step = _step(plan, lambda s: isinstance(s.plugin, ApigenTasks))
        dialogs_step = _step(plan, lambda s: isinstance(s.output.base, type) and issubclass(s.output.base, Trajectory))
        verdicts_step = _step(plan, lambda s: isinstance(s.plugin, TrajectoryState))
        tasks: dict[int, dict[str, Any]] = {}
        if tasks_step is not None:
            for spec in data.value(tasks_step) or []:
                tasks.setdefault(spec.task.index, spec.task.as_entry())
        (out / "tasks.json").write_text(json.dumps(list(tasks.values()), indent=1, ensure_ascii=False),
                                        encoding="utf-8")
        passed = {i.item for i in data.items(verdicts_step) if i.status == "pass"} if verdicts_step else set()
        seen: set[tuple[Any, str]] = set()
        with (out / "trajectories.openai.jsonl").open("w", encoding="utf-8") as chat, \
                (out / "trajectories.jsonl").open("w", encoding="utf-8") as plain:
            if dialogs_step is not None:
                for item, dialog in data.values(dialogs_step):
                    if item not in passed or not exportable(dialog):
                        continue
                    index, _, trial = item.rpartition("-")
                    task = tasks.get(int(index.lstrip("T") or -1)) if index.startswith("T") else None
                    key = (index, dialog.signature())
                    if key in seen:
                        continue
                    seen.add(key)
                    chat.write(json.dumps({"messages": openai_messages(dialog.messages), "tools": dialog.tools},
                                          ensure_ascii=False) + "\n")
                    plain.write(json.dumps({
                        "task_id": task["index"] if task else index, "trial": int(trial) if trial.isdigit() else trial,
                        "blueprint": task.get("blueprint") if task else None, "user_id": task.get("user_id") if task else None,
                        "messages": dialog.messages, "tools": dialog.tools}, ensure_ascii=False) + "\n")
        return out
