"""Figures of the APIGen-MT pipeline on a synthetic generator (no network, no real model).

    python bench/apigen_figures.py [--seeds 5] [--blueprints 30]

The generator is a Python function standing in for the model: it reads the user's records in
its prompt and proposes a real task (retail: cancel a pending order, change its address,
return a delivered item, change the default address; airline: cancel an eligible reservation,
add a bag, or, for a user with neither, ask the membership level, an expected output), but its first draft is flawed at set rates — arguments that are not JSON (15 %),
another customer's order or an ineligible reservation (15 %), an id that does not exist (10 %) —
and a revision that sees the feedback is right. Each committee member scores each metric 1 with
probability 0.85. So the figures measure the pipeline's machinery (validation, majority vote,
feedback loop, recombination, trajectories with the oracle agent), not a language model: with a
real model the rates are the model's. Printed per domain over seeds: acceptance without and with
the feedback loop and the gain, rejections by stage and reason, combined tasks, trajectory
success, pass^k, average turns, unique trajectories, and the time per run.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from intellagent.environment import load_environment  # noqa: E402
from intellagent.testing.harness import run_pipeline  # noqa: E402
from intellagent_plugins.providers.mock import FunctionModel  # noqa: E402

FLAWS = (("json", 0.15), ("owner", 0.15), ("missing", 0.10))


def _rng(request, *salt) -> random.Random:
    return random.Random(hashlib.sha256((request.key() + repr(salt)).encode()).hexdigest())


def _records(text: str, table: str) -> list[dict]:
    return [json.loads(m) for m in re.findall(rf"- {table}\[[^\]]+\]: (.*)", text)]


def retail_task(text, user, rng, flaw):
    record = json.loads(re.search(rf"- users\[{re.escape(user)}\]: (.*)", text).group(1))
    orders = [o for o in _records(text, "orders") if o["user_id"] == user]
    others = [o for o in _records(text, "orders") if o["user_id"] != user]
    lookup = {"name": "find_user_id_by_email", "arguments": json.dumps({"email": record["email"]})}
    pending = [o for o in orders if o["status"] == "pending"]
    delivered = [o for o in orders if o["status"] == "delivered"]
    options = ["user_address"] + ["cancel", "address"] * bool(pending) + ["return"] * bool(delivered)
    kind = rng.choice(options)
    address = {**record["address"], "address1": f"{rng.randint(1, 99)} New Street"}
    if kind == "user_address":
        call = ("modify_user_address", {"user_id": user, **address})
        say = f"Your default address is now {address['address1']}."
    elif kind in ("cancel", "address"):
        order = rng.choice(pending)
        call = (("cancel_pending_order", {"order_id": order["order_id"], "reason": "no longer needed"})
                if kind == "cancel" else ("modify_pending_order_address", {"order_id": order["order_id"], **address}))
        say = f"Order {order['order_id']}: {'cancel it, no longer needed' if kind == 'cancel' else 'ship it to ' + address['address1']}."
    else:
        order = rng.choice(delivered)
        item = rng.choice(order["items"])
        call = ("return_delivered_order_items", {"order_id": order["order_id"], "item_ids": [item["item_id"]],
                                                 "payment_method_id": order["payment_history"][0]["payment_method_id"]})
        say = f"Return the {item['name']} of order {order['order_id']} to the original payment method."
    if flaw == "owner" and others and "order_id" in call[1]:
        call = (call[0], {**call[1], "order_id": others[0]["order_id"]})
    elif flaw == "missing" and "order_id" in call[1]:
        call = (call[0], {**call[1], "order_id": "#W0000000"})
    return [lookup, {"name": call[0], "arguments": json.dumps(call[1])}], f"You are {user} ({record['email']}). {say}", []


def airline_task(text, user, rng, flaw):
    reservations = [r for r in _records(text, "reservations") if r["user_id"] == user and r.get("status") != "cancelled"]
    user_rec = json.loads(re.search(rf"- users\[{re.escape(user)}\]: (.*)", text).group(1))
    cards = [k for k, m in user_rec["payment_methods"].items() if m["source"] == "credit_card"]
    future = [r for r in reservations if all(s["date"] > "2024-05-16" for s in r["flights"])]
    eligible = [r for r in future if r["cabin"] == "business" or r["insurance"] == "yes"]
    lookup = {"name": "get_user_details", "arguments": json.dumps({"user_id": user})}
    if eligible and (rng.random() < 0.5 or not (future and cards)):
        r = rng.choice(eligible)
        call = ("cancel_reservation", {"reservation_id": r["reservation_id"]})
        say = f"Cancel reservation {r['reservation_id']}; your plans changed."
        if flaw == "owner":
            bad = [x for x in future if x not in eligible]
            call = ("cancel_reservation", {"reservation_id": (bad or [r])[0]["reservation_id"]})
    elif future and cards:
        r = rng.choice(future)
        call = ("update_reservation_baggages", {"reservation_id": r["reservation_id"],
                                                "total_baggages": r["total_baggages"] + 1,
                                                "nonfree_baggages": r["nonfree_baggages"] + 1, "payment_id": cards[0]})
        say = f"Add one checked bag to reservation {r['reservation_id']}, paid with your credit card."
        if flaw == "owner":
            call = (call[0], {**call[1], "total_baggages": max(0, r["total_baggages"] - 1)})
    else:  # nothing to change: a question with an answer to check (a task must test something)
        return [lookup], f"Your user id is {user}. Ask which membership level you have.", [user_rec["membership"]]
    if flaw == "missing":
        call = (call[0], {**call[1], "reservation_id": "ZZZZZZ"})
    return [lookup, {"name": call[0], "arguments": json.dumps(call[1])}], f"Your user id is {user}. {say}", []


def synthetic_model(domain: str):
    def answer(request, response_model):
        name = getattr(response_model, "__name__", "")
        text = "\n".join(str(m.get("content")) for m in request.messages)
        if name == "Draft":
            user = re.search(r"The task is for the user (\S+)\.", text).group(1)
            revising = "Previous blueprint" in text
            rng = _rng(request, "draft") if not revising else random.Random(text.split("Previous blueprint")[0])
            roll, flaw = rng.random(), None
            edge = 0.0
            for kind, p in FLAWS:
                edge += p
                if roll < edge and not revising:
                    flaw = kind
                    break
            actions, instruction, outputs = (retail_task if domain == "retail" else airline_task)(text, user, rng, flaw)
            if flaw == "json":
                actions[-1]["arguments"] = actions[-1]["arguments"].replace('"', "'")
            return {"thought": "from the records", "user_id": user, "instruction": instruction,
                    "actions": actions, "outputs": outputs}
        if name == "Review":
            rng = _rng(request, "review")
            return {m: {"score": int(rng.random() < 0.85), "reason": f"{m} judged"}
                    for m in ("correctness", "completeness", "satisfaction", "creativity")}
        if name == "CombinedInstruction":
            return {"thought": "both", "instruction": " Then: ".join(re.findall(r"(?:First|Second) task: (.*)", text))}
        if name == "UserTurn":
            first = len(request.messages) <= 2
            goal = request.messages[0]["content"].split("Your goal:")[-1].strip()[:300]
            return {"thought": "t", "message": goal if first else "Thanks.", "stop": "continue" if first else "success"}
        if name == "Choice":
            return {"best": 1}
        return "Done."
    return answer


@dataclass
class DomainFigures:
    """One domain over the seeds."""

    domain: str
    seeds: int
    blueprints: int
    n: int = 0
    first: int = 0
    final: int = 0
    combined: int = 0
    combined_ok: int = 0
    tasks: int = 0
    trials: int = 0
    passed: int = 0
    unique: int = 0
    stages: Counter = field(default_factory=Counter)
    reasons: Counter = field(default_factory=Counter)
    turns: list = field(default_factory=list)
    pass_k: Counter = field(default_factory=Counter)
    seconds: list = field(default_factory=list)


def measure(domain: str, seeds: int = 5, blueprints: int = 30) -> DomainFigures:
    """The pipeline on ``domain`` for seeds 0 … seeds−1, with the synthetic generator and the
    oracle agent."""
    f = DomainFigures(domain, seeds, blueprints)
    env = load_environment(REPO / "environments" / domain)
    for seed in range(seeds):
        with tempfile.TemporaryDirectory() as tmp, open(os.devnull, "w") as quiet:
            start = time.perf_counter()
            result = run_pipeline("apigen-mt", env, workspace=Path(tmp), progress_stream=quiet,
                                  providers={"mock/function": FunctionModel(synthetic_model(domain))},
                                  overrides=[("llm.default.model", "mock/function", "bench"),
                                             ("agent.use", "tau-bench/oracle", "bench"),
                                             ("seed", seed, "bench"),
                                             ("steps.contexts.with.blueprints", blueprints, "bench"),
                                             ("steps.contexts.with.user_pool", 10, "bench"),
                                             ("steps.tasks.with.trials", 2, "bench"),
                                             ("steps.dialogs.with.candidates", 2, "bench")])
            f.seconds.append(time.perf_counter() - start)
        m = result.report.metrics
        acc = m["acceptance"].values
        f.n += acc["n"]
        f.first += round(acc["without"] * acc["n"])
        f.final += round(acc["with"] * acc["n"])
        funnel = m["funnel"].values
        f.combined += funnel["combined tasks attempted"]
        f.combined_ok += funnel["combined tasks accepted"]
        f.tasks += funnel["tasks"]
        f.trials += funnel["trajectories (trials)"]
        f.passed += funnel["successful trajectories"]
        f.unique += funnel["unique successful trajectories (kept)"]
        for row in m["rejections"].rows:
            f.stages[row["stage"]] += row.get("rejected", 0)
        for row in m["rejection-reasons"].rows:
            f.reasons[(row["stage"], row["reason"])] += row.get("rejected", 0)
        f.turns.append(m["turns"].values.get("mean") or 0)
        for k, v in m["pass-hat-k"].values.items():
            f.pass_k[k] += v / seeds
    return f


RULE_STAGES = ("policy", "conflict")  # a rejection there names a rule of the domain


def readme_figures(retail: DomainFigures, airline: DomainFigures) -> list[str]:
    """The sentences README quotes, from both domains' figures."""
    def acceptance(f: DomainFigures, long: bool) -> str:
        if long:
            return (f"acceptance {100 * f.first / f.n:.1f} % without the feedback loop, {100 * f.final / f.n:.1f} % "
                    f"with it (×{f.final / f.first:.2f}, n = {f.n})")
        return f"{100 * f.first / f.n:.1f} % and {100 * f.final / f.n:.1f} % (×{f.final / f.first:.2f})"

    def rules(f: DomainFigures) -> str:
        broke = [(r, c) for (stage, r), c in f.reasons.most_common() if stage in RULE_STAGES]
        return (f"{sum(c for _, c in broke)} rejected versions broke a rule of the domain: "
                + ", ".join(f"{r} {c}" for r, c in broke))

    def combined(f: DomainFigures) -> str:
        return f"{f.combined_ok} of {f.combined} combined tasks accepted ({rules(f)})"

    perfect = all(f.passed == f.trials and all(v == 1 for v in f.pass_k.values()) for f in (retail, airline))
    oracle = ("trajectory success, pass^1 and pass^2 1 in both domains with the oracle" if perfect else
              "; ".join(f"{f.domain} trajectory success {f.passed}/{f.trials}, "
                        + ", ".join(f"{k} {v:.3f}" for k, v in sorted(f.pass_k.items())) for f in (retail, airline)))
    return [f"retail {acceptance(retail, True)}, {combined(retail)}; airline {acceptance(airline, False)}, "
            f"{combined(airline)}; {oracle}"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--blueprints", type=int, default=30)
    args = parser.parse_args()
    figures = {}
    for domain in ("retail", "airline"):
        f = figures[domain] = measure(domain, args.seeds, args.blueprints)
        print(f"{domain}: seeds 0-{args.seeds - 1} x {args.blueprints} blueprints (synthetic generator, oracle agent)")
        print(f"  acceptance without the feedback loop {f.first / f.n:.1%}, with it {f.final / f.n:.1%}, "
              f"gain x{f.final / f.first:.2f}  (n={f.n})")
        print("  rejected versions by stage: " + ", ".join(f"{s} {c}" for s, c in f.stages.most_common()))
        print("  by reason: " + ", ".join(f"{s}/{r} {c}" for (s, r), c in f.reasons.most_common(8)))
        print(f"  combined tasks accepted {f.combined_ok}/{f.combined}; tasks {f.tasks}; trajectory success "
              f"{f.passed}/{f.trials}; " + ", ".join(f"{k} {v:.3f}" for k, v in sorted(f.pass_k.items()))
              + f"; mean user turns {sum(f.turns) / len(f.turns):.2f}; unique successes kept {f.unique}")
        print(f"  time per run {sum(f.seconds) / len(f.seconds):.1f} s "
              f"(median {sorted(f.seconds)[len(f.seconds) // 2]:.1f} s)")
    if args.seeds == 5 and args.blueprints == 30:
        print("README's figures:")
        for line in readme_figures(figures["retail"], figures["airline"]):
            print("  " + line)


if __name__ == "__main__":
    main()
