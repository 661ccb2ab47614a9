"""How dialogs' prompts grow, and how much of each is the previous one (a provider's prompt cache
discounts a repeated prefix), on τ-bench's airline tasks with a fixed dialog length.

    python bench/prompt_growth.py [--tasks 10] [--turns 8]

The simulated user and the agent are scripted (mock/function) with the same texts for every
task, so the figures depend only on how prompts are built. Prints, per role: the mean growth of
the prompt per user turn (tokens ≈ characters / 4 of the request's messages), and the share of
each call's prompt that is a byte-identical prefix of the previous call of the same role in the
same dialog (the prompt: the tools, or the answer's schema, then the messages). Beside the user's
figure, the growth of τ-bench's own user prompt built from the
same texts (its layout: system instruction, "Hi! How can I help you today?", then the
conversation with roles flipped, the user's raw replies resent). Targets: the user's growth ≤ 1.2×
τ-bench's; ≥ 90 % of each dialog call's prompt a prefix of the previous one's (the worst call
is the second of a dialog, whose prompt is the shortest). Last, how many calls extend the previous
call's whole prompt unchanged (only append to it). For such a call the prefix share is the previous
prompt's length over its own: with a first prompt of P characters and T more a turn, the second
call's share is P / (P + T), under 90 % whenever P < 9 T, however the prompt is built.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from intellagent.environment import load_environment  # noqa: E402
from intellagent.plan import load_plan  # noqa: E402
from intellagent.registry import load_registry  # noqa: E402
from intellagent.runner import run_plan  # noqa: E402
from intellagent.store import Store  # noqa: E402

TAU_BENCH = Path(__file__).resolve().parent.parent.parent / "shared" / "datasets" / "tau-bench"
USER_SAYS = "I need to change my flight to the next day, and keep the same cabin please."
USER_THINKS = "The agent asked for my reservation; I should give it and then ask about the fee."
AGENT_SAYS = ("I can help with that. Could you please give me your reservation number and the new "
              "date you would like to travel on?")
REQUESTS: dict[str, list[tuple[str, list[dict]]]] = defaultdict(list)  # role → (dialog, messages)


def scripted(request, response_model):
    """mock/function: the user never stops; the agent answers the same text."""
    dialog = request.sample or ""  # the draw of the dialog's inputs: one per dialog
    # what the provider reads first: the tools (the agent's), or the answer's schema (as a tool)
    head = json.dumps(request.tools if response_model is None else request.response_schema)
    if response_model is None:
        REQUESTS["agent"].append((dialog, head, request.messages))
        return AGENT_SAYS
    REQUESTS["user"].append((dialog, head, request.messages))
    return {"thought": USER_THINKS, "message": USER_SAYS, "stop": "continue", "reason": ""}


def tokens(messages: list[dict]) -> int:
    return len(json.dumps(messages, ensure_ascii=False)) // 4


def prefix_share(previous: tuple[str, list[dict]], current: tuple[str, list[dict]]) -> tuple[int, int, bool]:
    """(characters of ``current``'s prompt, tools or schema then messages, that are a
    byte-identical prefix of ``previous``'s; its length; whether ``current`` extends the whole of
    ``previous`` unchanged, only appending)."""
    a = previous[0] + json.dumps(previous[1], ensure_ascii=False)[:-1]  # where new messages go
    b = current[0] + json.dumps(current[1], ensure_ascii=False)
    common = 0
    for x, y in zip(a, b):
        if x != y:
            break
        common += 1
    return common, len(b), common == len(a)


def figures(role: str) -> tuple[float, float, float, int, int]:
    by_dialog: dict[str, list[tuple[str, list[dict]]]] = defaultdict(list)
    for dialog, head, messages in REQUESTS[role]:
        by_dialog[dialog].append((head, messages))
    growth, shares = [], []
    for prompts in by_dialog.values():
        for previous, current in zip(prompts, prompts[1:]):
            shares.append(prefix_share(previous, current))
        calls = [messages for _, messages in prompts]
        if role == "user" and len(calls) > 1:
            growth.append((tokens(calls[-1]) - tokens(calls[0])) / (len(calls) - 1))
        elif role == "agent":
            user_turns = [c for c in calls if c[-1]["role"] == "user"]
            if len(user_turns) > 1:
                growth.append((tokens(user_turns[-1]) - tokens(user_turns[0])) / (len(user_turns) - 1))
    worst = min(common / total for common, total, _ in shares)
    overall = sum(common for common, _, _ in shares) / sum(total for _, total, _ in shares)
    appended = sum(1 for _, _, whole in shares if whole)
    return statistics.mean(growth), worst, overall, len(shares), appended


def tau_bench_growth(turns: int) -> float:
    """τ-bench's user prompt for the same texts: its raw replies (a ReAct user's thought with
    them) resent with the agent's, roles flipped."""
    messages = [{"role": "system", "content": "Instruction: ..."},
                {"role": "user", "content": "Hi! How can I help you today?"}]
    sizes = []
    for _ in range(turns):
        sizes.append(tokens(messages))
        messages += [{"role": "assistant", "content": USER_SAYS}, {"role": "user", "content": AGENT_SAYS}]
    return (sizes[-1] - sizes[0]) / (len(sizes) - 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--turns", type=int, default=8)
    args = parser.parse_args()
    sys.modules.setdefault("bench.prompt_growth", sys.modules[__name__])
    registry = load_registry()
    env = load_environment(registry.resolve("environment", "airline").value, data=TAU_BENCH / "airline")
    overrides = [("llm.default", {"model": "mock/function", "options": {"function": "bench.prompt_growth:scripted"}}, "bench"),
                 ("steps.tasks.with.indices", list(range(args.tasks)), "bench"),
                 ("steps.dialogs.with.max_turns", args.turns, "bench"), ("report", [], "bench")]
    plan = load_plan("tau-bench", registry, overrides=overrides)
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(run_plan(plan, env, store=Store.for_workspace(tmp), registry=registry,
                             workspace=Path(tmp), progress_stream=open("/dev/null", "w")))
    baseline = tau_bench_growth(args.turns)
    for role in ("user", "agent"):
        growth, worst, overall, calls, appended = figures(role)
        line = (f"{role:<6} prompt growth per user turn {growth:.1f} tokens; a prefix of the previous "
                f"call: {overall:.1%} of all prompt tokens, ≥ {worst:.1%} of each ({calls} calls); "
                f"{appended} of {calls} calls extend the previous one unchanged")
        if role == "user":
            line += f"; τ-bench's user on the same texts: {baseline:.1f} tokens (ratio {growth / baseline:.2f}, target ≤ 1.2)"
        print(line)


if __name__ == "__main__":
    main()
