"""Figures of the IntellAgent method on the mock model (no network).

    python bench/method_figures.py

1. Event-invalid rate per environment over seeds 0–4 × 30 events (target ≤ 3 %).
2. Policy inclusion per challenge level on the 30-policy test graph, 4,000 events: the
   weighted walk (Algorithm 1) against walking only among policies that fit the target.
3. Verdict counts by status for the README's quickstart run (airline, 30 events, mock/schema).
4. Edge calls of the policy graph at 40 and 80 policies (blocks of 40), against pairwise.
5. Model calls and prompt tokens per event of a 100-event airline run on mock/schema, and what
   they make of 10,000 events (README's worked estimate).
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def intellagent(*args: str) -> str:
    out = subprocess.run([sys.executable, "-m", "intellagent", *args], capture_output=True, text=True,
                         timeout=600, cwd=REPO)
    if out.returncode != 0:
        raise SystemExit(out.stderr)
    return out.stdout


def statuses(workspace: Path, step: str) -> Counter:
    with sqlite3.connect(workspace / "intellagent.db") as conn:
        return Counter(s for s, in conn.execute("SELECT status FROM run_items WHERE step = ?", (step,)))


def invalid_rates() -> None:
    print("1. event-invalid rate on mock/schema, seeds 0-4 x 30 events")
    for env in ("airline", "retail"):
        counts: Counter = Counter()
        with tempfile.TemporaryDirectory() as tmp:
            for seed in range(5):
                ws = Path(tmp) / str(seed)
                intellagent("run", env, "--events", "30", "--seed", str(seed), "--until", "events",
                            "--workspace", str(ws))
                counts += statuses(ws, "events")
        total = sum(counts.values())
        print(f"   {env}: {counts['invalid']}/{total} invalid ({counts['invalid'] / total:.1%}); {dict(counts)}")


def inclusion() -> None:
    from intellagent.environment import load_environment
    from intellagent.testing.harness import step_context
    from intellagent_plugins.intellagent.sampler import Config, MaxWalk, WeightedWalk
    from tests.test_sampler import graph, inclusion_by_level

    g = graph()
    ctx = step_context(load_environment(REPO / "environments" / "education"), seed=11)
    print("2. inclusions per policy per event by challenge level (30-policy graph, 4,000 events)")
    for label, sampler in (("weighted-walk (Algorithm 1)", WeightedWalk),
                           ("fit-the-target walk (max-walk's rule)", MaxWalk)):
        levels = inclusion_by_level(g, sampler(Config(events=4000, complexity=(2, 11))).run(ctx, g))
        ratio = max(levels.values()) / min(levels.values())
        print(f"   {label}: " + ", ".join(f"{k}: {v:.3f}" for k, v in levels.items())
              + f"; max/min {ratio:.2f}")


def quickstart() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        out = intellagent("run", "airline", "--events", "30", "--model", "mock/schema", "--workspace", str(ws))
        print("3. quickstart run (airline, 30 events, mock/schema):")
        print("   " + out.splitlines()[0])
        print(f"   events: {dict(statuses(ws, 'events'))}; verdicts: {dict(statuses(ws, 'verdicts'))}")


def edge_calls(flows: int, per_flow: int = 10, modes: tuple[str, ...] = ("per-policy", "pairwise")) -> list[int]:
    """The extractor's edge calls for ``flows`` × ``per_flow`` policies in each mode (per-policy:
    blocks of 40), counted on a function model."""
    import asyncio
    from collections import Counter

    from intellagent.environment import load_environment
    from intellagent.llm import LLM
    from intellagent.pipeline import LLMSettings, ModelSettings
    from intellagent.store import Store
    from intellagent.testing.harness import run_step
    from intellagent_plugins.intellagent.extractor import Config, PolicyGraphExtractor
    from tests.test_extractor import make_model

    out = []
    for edges in modes:
        store = Store.in_memory()
        llm = LLM(LLMSettings(default=ModelSettings(model="test/fn")), store=store,
                  providers={"test/fn": make_model(per_flow=per_flow, extra_flows=flows - 2)})
        asyncio.run(run_step(PolicyGraphExtractor(Config(edges=edges)), load_environment(REPO / "environments" / "airline"),
                             llm=llm))
        out.append(Counter(c.role for c in store.calls())["edges"])
    return out


def per_event(events: int = 100) -> dict[str, float]:
    """Model calls and prompt tokens per event of an airline run on mock/schema, by step."""
    import os

    from intellagent.environment import load_environment
    from intellagent.store import Store
    from intellagent.testing.harness import run_pipeline

    with tempfile.TemporaryDirectory() as tmp, open(os.devnull, "w") as quiet:
        store = Store.for_workspace(Path(tmp))
        result = run_pipeline("intellagent", load_environment(REPO / "environments" / "airline"), store=store,
                              progress_stream=quiet, overrides=[("steps.specs.with.events", events, "bench")])
        rows = {r["stage"]: r for r in store.cost_summary(result.run_id)}
    return {f"{what} {step}": rows[step][key] / events for step in ("events", "dialogs", "verdicts")
            for what, key in (("calls", "calls"), ("tokens", "prompt_tokens"))}


PRICE = (0.15, 0.60)  # gpt-4o-mini, $ per million prompt and completion tokens
COMPLETION = 100  # completion tokens assumed per call


def estimate(m: dict[str, float]) -> list[str]:
    """README's worked estimate from the measured figures per event: the sentences and the
    table's cells, for 10,000 events."""
    calls = round(sum(m[f"calls {s}"] for s in ("events", "dialogs", "verdicts")), 1)
    tokens = round(sum(m[f"tokens {s}"] for s in ("events", "dialogs", "verdicts")), -2)
    completion = round(calls * COMPLETION, -2)
    dollars = (tokens * PRICE[0] + completion * PRICE[1]) / 1e6
    total_calls = round(calls * 10_000)
    in_flight_minute = 128 / 2 * 60  # calls a minute at 128 in flight, 2 s each
    tokens_minute = in_flight_minute * (tokens / calls + COMPLETION)
    return [
        f"{m['calls events']:.1f} event-generation calls, {m['calls dialogs']:.1f} dialog calls (user turns, "
        f"agent turns with tool calls, stop reviews) and {m['calls verdicts']:.1f} critic calls, about "
        f"{calls:.1f} calls per event",
        f"about {tokens:,.0f} prompt tokens per event (dialogs {round(m['tokens dialogs'], -2):,.0f}, events "
        f"{round(m['tokens events'], -2):,.0f}, verdicts {round(m['tokens verdicts'], -2):,.0f})",
        f"about {COMPLETION} tokens per call, {completion:,.0f} per event",
        f"| model calls | {calls:.1f} | {total_calls:,} |",
        f"| prompt tokens | {tokens:,.0f} | {tokens * 10_000 / 1e6:,.0f} M |",
        f"| completion tokens | ≈ {completion:,.0f} | ≈ {completion * 10_000 / 1e6:,.0f} M |",
        f"| cost on gpt-4o-mini ($0.15 / $0.60 per M) | ≈ ${dollars:.4f} | ≈ ${dollars * 10_000:,.0f} |",
        f"{total_calls:,} × 2 s / C: {total_calls * 2 / 32 / 3600:.1f} h at C = 32, "
        f"{total_calls * 2 / 128 / 60:.0f} min at C = 128",
        f"about {round(in_flight_minute, -2):,.0f} requests and {tokens_minute / 1e6:.1f} M tokens per minute",
        f"it takes {tokens * 10_000 / 1e6:,.0f} M / 2 M ≈ {tokens * 10_000 / 2e6:,.0f} min",
    ]


def readme_figures() -> list[str]:
    """What README quotes from this bench: the edge calls and the worked estimate."""
    (at_40,), (at_80,) = edge_calls(4, modes=("per-policy",)), edge_calls(8, modes=("per-policy",))
    return [f"P−1 calls up to 41 policies ({at_40} at 40), {at_80} at 80", *estimate(per_event(100))]


if __name__ == "__main__":
    invalid_rates()
    inclusion()
    quickstart()
    at_40, pairwise_40 = edge_calls(4)
    at_80, pairwise_80 = edge_calls(8)
    print(f"4. edge calls: 40 policies {at_40} (pairwise {pairwise_40}), 80 policies {at_80} (pairwise {pairwise_80})")
    m = per_event(100)
    print("5. per event (airline, 100 events, mock/schema): "
          + ", ".join(f"{k} {v:,.1f}" for k, v in m.items()))
    print("README's figures:")
    for line in [f"P−1 calls up to 41 policies ({at_40} at 40), {at_80} at 80", *estimate(m)]:
        print("  " + line)
