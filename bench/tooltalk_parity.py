"""ToolTalk's own scorer against ours, per agent behaviour and set, and what correcting the
reference's slips changes. Needs `pip install --no-deps nvidia-tooltalk`; runs offline.

    python bench/tooltalk_parity.py

Prints, for the oracle and each perturbation, the reference's metrics (its ToolExecutor with
our text comparator injected in place of DistilBERT), ours, and ours with ``corrected: true``,
plus how many per-call flags differ and the wall time of each side.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
import time
import types
from collections import Counter
from pathlib import Path


def load_reference():
    """ToolTalk's executor with its unused heavy imports stubbed (only those not installed)."""
    for name in ("numpy", "torch", "transformers"):
        if importlib.util.find_spec(name) is None:
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


def main() -> None:
    if importlib.util.find_spec("tooltalk") is None:
        sys.exit("needs ToolTalk's reference: pip install --no-deps nvidia-tooltalk")
    executor, get_metrics = load_reference()
    from intellagent.environment import load_environment
    from intellagent.envs import environment_path
    from intellagent.registry import load_registry
    from intellagent_plugins.tooltalk.agents import REFERENCE_AGENTS
    from intellagent_plugins.tooltalk.comparators import token_sort
    from intellagent_plugins.tooltalk.environment.data import conversation_files
    from intellagent_plugins.tooltalk.executor import World, tool_meta
    from intellagent_plugins.tooltalk.replay import replay
    from intellagent_plugins.tooltalk.scoring import assess
    from intellagent_plugins.tooltalk.steps import read_conversation
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.test_tooltalk_parity import predictor, reference_calls

    env = load_environment(environment_path(load_registry(), "tooltalk"))
    meta, actions = tool_meta(env), {n for n, t in env.tools.items() if t.spec.action}
    conversations = [read_conversation(p, s) for s, p in conversation_files(["easy", "hard"])]
    keys = ("success_rate", "precision", "recall", "action_precision", "bad_action_rate")
    print(f"{'behaviour':17} {'set':5} {'side':10} " + " ".join(f"{k:>16}" for k in keys) + "  flags≠")
    for behaviour, agent_cls in REFERENCE_AGENTS.items():
        started = time.perf_counter()
        theirs = {}
        for c in conversations:
            data = c.reference_json()
            executor.run_conversation(data, predictor(agent_cls(None, None, c.model_dump(mode="json"))))
            theirs[c.name] = executor.evaluate_predictions(data)
        t_ref = time.perf_counter() - started
        started = time.perf_counter()
        ours: dict[bool, dict] = {False: {}, True: {}}
        for c in conversations:
            world = World(env, c)
            replayed, _ = asyncio.run(replay(c, world, agent_cls(None, None, c.model_dump(mode="json")),
                                             prompt=env.prompt))
            world.close()
            for corrected in (False, True):
                ours[corrected][c.name] = assess(c, replayed, meta, actions, token_sort, corrected=corrected)
        t_ours = time.perf_counter() - started
        for set_name in ("easy", "hard"):
            names = [c.name for c in conversations if c.set == set_name]
            rows = {}
            total = Counter()
            for n in names:
                total += theirs[n]["metrics"]
            total["num_conversations"] = len(names)
            rows["reference"] = get_metrics(total)
            for corrected, label in ((False, "ours"), (True, "corrected")):
                total = Counter()
                for n in names:
                    total += ours[corrected][n].metrics.model_dump()
                total["num_conversations"] = len(names)
                rows[label] = get_metrics(total)
            differ = {label: sum(
                [(p.match, p.bad_action) for p in ours[corrected][n].predictions]
                != [(f[-2], f[-1]) for f in reference_calls(theirs[n])] for n in names)
                for corrected, label in ((False, "ours"), (True, "corrected"))}
            for side, values in rows.items():
                flags = "" if side == "reference" else f"{differ[side]:>6}"
                print(f"{behaviour:17} {set_name:5} {side:10} "
                      + " ".join(f"{values[k]:>16.4f}" for k in keys) + f"  {flags}")
        print(f"{'':17} time: reference {t_ref:.2f} s, ours {t_ours:.2f} s (78 conversations, both modes)")


if __name__ == "__main__":
    main()
