"""ToolTalk's own scorer against ours, per agent behaviour and set, and what correcting the
reference's slips changes. Needs `pip install --no-deps nvidia-tooltalk`; runs offline.

    python bench/tooltalk_parity.py

Prints, for the oracle, each perturbation and an oracle that sends every list-valued argument
as one comma-joined string (``joined-lists``), the reference's metrics (its ToolExecutor with our
text comparator injected in place of DistilBERT), ours, and ours with ``corrected: true``, plus
how many per-call flags differ and the wall time of each side; then the figures README quotes.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
import time
import types
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
KEYS = ("success_rate", "precision", "recall", "action_precision", "bad_action_rate", "soft_success")
SIDES = ("reference", "ours", "corrected")


def load_reference():
    """ToolTalk's executor with its unused heavy imports stubbed (only those not installed)."""
    for name in ("numpy", "torch", "transformers"):
        if name not in sys.modules and importlib.util.find_spec(name) is None:
            stub = types.ModuleType(name)
            stub.DistilBertModel = stub.DistilBertTokenizer = None
            sys.modules[name] = stub
    import tooltalk
    from tooltalk.apis import calendar, email, message, reminder
    from tooltalk.evaluation.metrics import get_metrics
    from tooltalk.evaluation.tool_executor import ToolExecutor

    from intellagent_plugins.tooltalk.comparators import token_sort

    for module in (calendar, email, message, reminder):
        module.semantic_str_compare = lambda p, g: 0.0 if p is None else token_sort(p, g)
    return ToolExecutor(init_database_dir=str(Path(tooltalk.__file__).parent / "data" / "databases")), get_metrics


def behaviours() -> dict[str, type]:
    """The reference agents, and an oracle that joins every list-valued argument into one string
    (``["a", "b"]`` → ``"a,b"``): a mistake real models make, on which the two sides' tools differ."""
    from intellagent_plugins.tooltalk.agents import REFERENCE_AGENTS, OracleAgent

    class JoinedLists(OracleAgent):
        behaviour = "joined-lists"

        def perturb(self, plan):
            return [[(name, {k: ",".join(map(str, v)) if isinstance(v, list) else v for k, v in arguments.items()})
                     for name, arguments in turn] for turn in plan]

    return {**REFERENCE_AGENTS, "joined-lists": JoinedLists}


@dataclass
class Figures:
    """Per behaviour, set and side: the aggregate metrics; per behaviour and side: the
    conversations whose per-call flags differ from the reference's; the wall times."""

    metrics: dict[tuple[str, str, str], dict[str, float]] = field(default_factory=dict)
    differ: dict[tuple[str, str, str], int] = field(default_factory=dict)
    conversations: dict[str, int] = field(default_factory=dict)
    seconds: dict[tuple[str, str], float] = field(default_factory=dict)


def measure() -> Figures:
    executor, get_metrics = load_reference()
    from intellagent.environment import load_environment
    from intellagent.envs import environment_path
    from intellagent.registry import load_registry
    from intellagent_plugins.tooltalk.comparators import token_sort
    from intellagent_plugins.tooltalk.environment.data import conversation_files
    from intellagent_plugins.tooltalk.executor import World, tool_meta
    from intellagent_plugins.tooltalk.replay import replay
    from intellagent_plugins.tooltalk.scoring import assess
    from intellagent_plugins.tooltalk.steps import read_conversation
    sys.path.insert(0, str(REPO))
    from tests.test_tooltalk_parity import predictor, reference_calls

    env = load_environment(environment_path(load_registry(), "tooltalk"))
    meta, actions = tool_meta(env), {n for n, t in env.tools.items() if t.spec.action}
    conversations = [read_conversation(p, s) for s, p in conversation_files(["easy", "hard"])]
    out = Figures(conversations={s: sum(c.set == s for c in conversations) for s in ("easy", "hard")})
    for behaviour, agent_cls in behaviours().items():
        started = time.perf_counter()
        theirs: dict[str, Any] = {}
        for c in conversations:
            data = c.reference_json()
            executor.run_conversation(data, predictor(agent_cls(None, None, c.model_dump(mode="json"))))
            theirs[c.name] = (executor.evaluate_predictions(data), data)
        out.seconds[behaviour, "reference"] = time.perf_counter() - started
        started = time.perf_counter()
        ours: dict[bool, dict] = {False: {}, True: {}}
        for c in conversations:
            world = World(env, c)
            replayed, _ = asyncio.run(replay(c, world, agent_cls(None, None, c.model_dump(mode="json")),
                                             prompt=env.prompt))
            world.close()
            for corrected in (False, True):
                ours[corrected][c.name] = assess(c, replayed, meta, actions, token_sort, corrected=corrected)
        out.seconds[behaviour, "ours"] = time.perf_counter() - started
        for set_name in ("easy", "hard"):
            names = [c.name for c in conversations if c.set == set_name]
            per_side = {"reference": [theirs[n][0]["metrics"] for n in names]}
            for corrected, side in ((False, "ours"), (True, "corrected")):
                per_side[side] = [ours[corrected][n].metrics.model_dump() for n in names]
                out.differ[behaviour, set_name, side] = sum(
                    [(p.match, p.bad_action) for p in ours[corrected][n].predictions]
                    != [(f[-2], f[-1]) for f in reference_calls(theirs[n][1])] for n in names)
            for side, rows in per_side.items():
                total: Counter = Counter()
                for row in rows:
                    total += Counter({k: v for k, v in row.items() if isinstance(v, (int, float))})
                total["num_conversations"] = len(names)
                metrics = get_metrics(total)
                # ToolTalk's aggregation has no soft success: the mean over conversations, as ours
                metrics["soft_success"] = sum(row["soft_success"] for row in rows) / len(rows)
                out.metrics[behaviour, set_name, side] = {k: metrics[k] for k in KEYS}
    return out


def num(x: float) -> str:
    """A figure as README writes it: up to 4 decimals, no trailing zeros."""
    return f"{x:.4f}".rstrip("0").rstrip(".")


def readme_figures(f: Figures) -> list[str]:
    """The sentences README quotes, from the figures."""
    def m(behaviour: str, set_name: str, key: str, side: str = "ours") -> float:
        return f.metrics[behaviour, set_name, side][key]

    def both(behaviour: str, key: str = "success_rate") -> str:
        return f"{num(m(behaviour, 'easy', key))} / {num(m(behaviour, 'hard', key))}"

    total = sum(f.conversations.values())
    changed = sum(n for (b, s, side), n in f.differ.items() if side == "corrected" and b != "joined-lists")
    behaviours_compared = len({b for b, _, _ in f.metrics if b != "joined-lists"})
    lines = [
        f"oracle {both('oracle')}, drop {both('drop')} (hard recall {num(m('drop', 'hard', 'recall'))}), "
        f"wrong argument {both('wrong-argument')}, extra action {both('extra-action')}, extra non-action "
        f"{both('extra-non-action')} (precision {both('extra-non-action', 'precision')}), early call "
        f"{both('early-call')}",
        f"{changed} conversation{'s' if changed != 1 else ''} of {behaviours_compared * total} changes",
        f"success {num(m('wrong-argument', 'easy', 'success_rate'))} → "
        f"{num(m('wrong-argument', 'easy', 'success_rate', 'corrected'))}",
    ]
    labels = {"success_rate": "success rate", "precision": "precision", "recall": "recall",
              "action_precision": "action precision", "bad_action_rate": "incorrect-action rate",
              "soft_success": "soft success"}
    for set_name in ("easy", "hard"):
        same = [labels[k] for k in KEYS if m("joined-lists", set_name, k, "reference") == m("joined-lists", set_name, k)]
        other = [f"{labels[k]} {num(m('joined-lists', set_name, k, 'reference'))} there, "
                 f"{num(m('joined-lists', set_name, k))} here"
                 for k in KEYS if m("joined-lists", set_name, k, "reference") != m("joined-lists", set_name, k)]
        lines.append(f"{set_name} set: " + (", ".join(same) + " the same" if same else "")
                     + ("; " + ", ".join(other) if other else ""))
    return lines


def dataset_figures() -> list[str]:
    """README's description of ToolTalk's world and conversations, counted from the package and
    our environment."""
    from intellagent.environment import load_environment
    from intellagent.envs import environment_path
    from intellagent.registry import load_registry
    from intellagent_plugins.tooltalk.environment.data import conversation_files
    from intellagent_plugins.tooltalk.generation import plugin_tools
    from intellagent_plugins.tooltalk.steps import read_conversation

    env = load_environment(environment_path(load_registry(), "tooltalk"))
    conversations = [read_conversation(p, s) for s, p in conversation_files(["easy", "hard"])]
    calls = {s: [len(c.calls()) for c in conversations if c.set == s] for s in ("easy", "hard")}
    one = "one call each" if set(calls["easy"]) == {1} else f"{min(calls['easy'])}–{max(calls['easy'])}"
    return [f"{len(env.tools)} tools in {len(plugin_tools(env))} plugins",
            f"{sum(t.spec.action for t in env.tools.values())} of them actions that change the world",
            f"{len(conversations)} hand-checked conversations",
            f"({len(calls['easy'])} easy ones with {one}, {len(calls['hard'])} hard ones with "
            f"{min(calls['hard'])}–{max(calls['hard'])})"]


def main() -> None:
    if importlib.util.find_spec("tooltalk") is None:
        sys.exit("needs ToolTalk's reference: pip install --no-deps nvidia-tooltalk")
    f = measure()
    print(f"{'behaviour':17} {'set':5} {'side':10} " + " ".join(f"{k:>16}" for k in KEYS) + "  flags≠")
    for behaviour in dict.fromkeys(b for b, _, _ in f.metrics):
        for set_name in ("easy", "hard"):
            for side in SIDES:
                values = f.metrics[behaviour, set_name, side]
                flags = "" if side == "reference" else f"{f.differ[behaviour, set_name, side]:>6}"
                print(f"{behaviour:17} {set_name:5} {side:10} "
                      + " ".join(f"{values[k]:>16.4f}" for k in KEYS) + f"  {flags}")
        print(f"{'':17} time: reference {f.seconds[behaviour, 'reference']:.2f} s, ours "
              f"{f.seconds[behaviour, 'ours']:.2f} s ({sum(f.conversations.values())} conversations, both modes)")
    print("\nREADME's figures:")
    for line in [*dataset_figures(), *readme_figures(f)]:
        print("  " + line)


if __name__ == "__main__":
    main()
