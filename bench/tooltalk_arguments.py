"""Calls with bad arguments, run by ToolTalk's executor and by ours: where the exceptions and
outcomes differ. Needs `pip install --no-deps nvidia-tooltalk`; runs offline.

    python bench/tooltalk_arguments.py

Every ground-truth call of the 78 conversations, from the state its turn starts in, is run with
each argument left out, each argument given a value of another type (a number or null for a
string, a string for a number, a string or a list of numbers for a list), and an unknown
argument added. Prints how many variants give the same exception and response on both sides and
the differing ones by kind: the texts, and the calls ToolTalk runs that we refuse (by whether
the tool is an action, since a refused action is never an incorrect one).
"""

from __future__ import annotations

import copy
import importlib.util
import sys
from collections import Counter
from pathlib import Path


def variants(given: dict) -> list[tuple[str, dict]]:
    out = [("missing", {k: v for k, v in given.items() if k != drop}) for drop in given]
    for key, value in given.items():
        if isinstance(value, str):
            others = [123, None]
        elif isinstance(value, bool):
            others = ["yes"]
        elif isinstance(value, (int, float)):
            others = ["abc"]
        elif isinstance(value, list):
            others = ["x", [1]]
        else:
            others = [None]
        out += [("ill-typed", {**given, key: other}) for other in others]
    return out + [("unknown", {**given, "colour": "red"})]


def measure() -> tuple[Counter, dict[str, set]]:
    """Per kind of variant: how many, and how they compare (the counts; the differing texts)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from tooltalk_parity import load_reference

    executor, _ = load_reference()
    from intellagent.environment import load_environment
    from intellagent.envs import environment_path
    from intellagent.registry import load_registry
    from intellagent_plugins.tooltalk.environment.data import conversation_files
    from intellagent_plugins.tooltalk.executor import World
    from intellagent_plugins.tooltalk.steps import read_conversation

    env = load_environment(environment_path(load_registry(), "tooltalk"))
    actions = {n for n, t in env.tools.items() if t.spec.action}
    counts: Counter = Counter()
    texts: dict[str, set] = {}
    for set_name, path in conversation_files(["easy", "hard"]):
        conversation = read_conversation(path, set_name)
        data = conversation.reference_json()
        world = World(env, conversation)
        calls = conversation.calls()
        for position, (turn, truth) in enumerate(calls):
            name = truth.request.api_name
            given = {k: v for k, v in truth.request.parameters.items() if k != "session_token"}
            history = [{"request": c.request.model_dump()} for _, c in calls[:position]]
            for kind, arguments in variants(given):
                executor.init_conversation_state(data["metadata"], copy.deepcopy(history), data["user"])
                _, theirs = executor.execute_tool(name, copy.deepcopy(arguments))
                db = world._start.copy()
                for _, earlier in calls[:position]:
                    world.execute(db, earlier.request.api_name, dict(earlier.request.parameters))
                ours = world.execute(db, name, copy.deepcopy(arguments))
                db.close()
                counts[kind, "variants"] += 1
                if (ours.exception, ours.response) == (theirs["exception"], theirs["response"]):
                    counts[kind, "same"] += 1
                elif theirs["exception"] is None and ours.exception is not None:
                    counts[kind, "run there, refused here: action" if name in actions
                           else "run there, refused here: non-action"] += 1
                elif theirs["exception"] is not None and ours.exception is not None:
                    counts[kind, "both fail, other text"] += 1
                    texts.setdefault(kind, set()).add((theirs["exception"], ours.exception))
                else:
                    counts[kind, "other"] += 1
        world.close()
    return counts, texts


def readme_figures(counts: Counter) -> list[str]:
    """The sentence README quotes, from the counts."""
    def n(kind: str, what: str) -> int:
        return counts[kind, what]

    refused_action = n("ill-typed", "run there, refused here: action")
    refused = refused_action + n("ill-typed", "run there, refused here: non-action")
    same = "all give" if n("missing", "same") == n("missing", "variants") and \
        n("unknown", "same") == n("unknown", "variants") else "not all give"
    return [f"of {n('missing', 'variants'):,} variants with an argument left out and "
            f"{n('unknown', 'variants'):,} with an unknown one, {same} ToolTalk's exception and response; "
            f"of {n('ill-typed', 'variants'):,} ill-typed ones, {n('ill-typed', 'same'):,} give the same, "
            f"{n('ill-typed', 'both fail, other text'):,} fail on both sides with other texts, and "
            f"{refused:,} ({refused_action:,} of them actions) run there and are refused here"]


def main() -> None:
    if importlib.util.find_spec("tooltalk") is None:
        sys.exit("needs ToolTalk's reference: pip install --no-deps nvidia-tooltalk")
    counts, texts = measure()
    for kind in ("missing", "unknown", "ill-typed"):
        row = {k: v for (k2, k), v in counts.items() if k2 == kind}
        print(f"{kind:10} " + ", ".join(f"{k} {v}" for k, v in row.items())
              + f"; distinct text pairs {len(texts.get(kind, ()))}")
    print("\nREADME's figures:")
    for line in readme_figures(counts):
        print("  " + line)


if __name__ == "__main__":
    main()
