"""What a run will cost before it starts (``intellagent run ... --estimate``): per step, the items
to make, the items reused, model calls, tokens, dollars, and a range for the wall time. No model
and no agent is called.

Three sources, each exact where it can be:

- **what the store already holds**: the plan is walked as a run walks it (the same scheduler,
  the same item keys), each item looked up instead of made; a step that calls no model (a
  sampler), or an item its step says asks none, is computed, being free. An item found is reused at no cost; an item not found is to
  be made, and so is everything that depends on it, its fan-out included (whose size is then an
  estimate).
- **what one item costs**: each step says so (:meth:`intellagent.steps.Step.estimate`: calls and
  tokens per role, elements of its list, calls one after another) from its options and the
  environment; a step that says nothing is one call per role with the environment's prompt.
- **what an earlier run measured**: where the workspace holds a finished run of the same
  pipeline, its calls and tokens per item of each step, by role, the elements of each list and
  the seconds a call took replace the step's own guesses (a list length the step's options fix,
  such as ``events``, stays); and the run's own time besides its model calls: its start, its
  report (scaled by the items it covers) and the items of its steps that call no model (those
  the walk makes, as long as they took it).
"""

from __future__ import annotations

import inspect
import json
import math
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import BaseModel, Field

from intellagent.executors import fan_out_limit, items_in_flight
from intellagent.steps import ItemEstimate, RoleLoad

DEFAULT_OUTPUTS = 10.0  # elements of a list a step gives, when nothing says
LATENCY = (0.5, 4.0)  # seconds a call takes, when no earlier run says
#: seconds a run takes of its own, when no earlier run says: its start (the interpreter, imports,
#: the environment, plugins: 2.0-3.3 s for airline on 2 busy cores) and its report, per item it
#: covers (0.6-1.6 ms there)
START = (1.0, 4.0)
REPORT_ITEM = (0.0005, 0.005)
SPREAD = (0.7, 1.5)  # a measured time's range in the next run: the range of a call's seconds


def tokens(*parts: Any) -> float:
    """About how many tokens ``parts`` take in a prompt (four characters a token, as the mock
    models and most servers without a tokenizer count; a dict or list as its JSON)."""
    return sum(len(p if isinstance(p, str) else json.dumps(p, ensure_ascii=False)) for p in parts) / 4


class StepCost(BaseModel):
    name: str
    items: float = Field(description="Items to make.")
    reused: int = Field(default=0, description="Items the store holds already.")
    calls: float
    prompt_tokens: float
    completion_tokens: float
    dollars: float | None = Field(description="None when a model it calls has no known price.")
    source: str = Field(description="Where the per-item figures come from.")


class Estimate(BaseModel):
    steps: list[StepCost]
    calls: float
    prompt_tokens: float
    completion_tokens: float
    dollars: float | None
    wall: tuple[float, float] = Field(description="Seconds, low and high.")
    unpriced: list[str] = Field(default_factory=list)
    earlier_run: str | None = None
    calls_range: tuple[float, float] | None = Field(
        default=None, description="Where the calls likely fall (95 %), from how much the earlier run's "
        "items varied, when it measured a step's every call; None when nothing was measured.")
    measured: dict[str, int] = Field(default_factory=dict, description="Items measured per step "
                                     "behind calls_range.")
    own: tuple[float, float] = Field(default=(0.0, 0.0), description="Seconds of the wall the run takes "
                                     "of its own, low and high: its start, its steps that call no "
                                     "model and its report.")
    own_source: str = Field(default="", description="Where the run's own seconds come from.")

    def lines(self) -> list[str]:
        out = [f"{'step':<14} {'items':>7} {'reused':>7} {'calls':>8} {'prompt tok':>12} "
               f"{'compl. tok':>11} {'cost $':>10}  from"]
        for s in self.steps:
            dollars = "-" if s.dollars is None else f"{s.dollars:.4f}"
            out.append(f"{s.name:<14} {s.items:>7.0f} {s.reused:>7} {s.calls:>8.0f} {s.prompt_tokens:>12.0f} "
                       f"{s.completion_tokens:>11.0f} {dollars:>10}  {s.source}")
        dollars = "unknown (no price for " + ", ".join(self.unpriced) + ")" if self.dollars is None \
            else f"${self.dollars:.4f}"
        out.append(f"total: {self.calls:.0f} calls, {self.prompt_tokens:.0f} prompt + "
                   f"{self.completion_tokens:.0f} completion tokens, {dollars}; wall "
                   f"{_duration(self.wall[0])} to {_duration(self.wall[1])}")
        if self.own_source:
            out.append(f"of the wall, {_duration(self.own[0])} to {_duration(self.own[1])} is the run's own "
                       f"time: {self.own_source}")
        if self.calls_range is not None:
            low, high = self.calls_range
            share = (high - self.calls) / self.calls * 100 if self.calls else 0.0
            out.append(f"likely {low:.0f} to {high:.0f} calls (95 %, ±{share:.0f} %), if the items to make vary "
                       "as the measured ones did (" + ", ".join(f"{k} {name}" for name, k in self.measured.items())
                       + "); tokens and dollars move with the calls")
        return out


def own_time(earlier: dict[str, Any], items: float, free: float,
             report: bool = True) -> tuple[tuple[float, float], str]:
    """The seconds a run takes besides its items that call a model (low, high), and whence: its
    start (the interpreter, imports, the environment, plugins, the agent's pre-flight), as long
    whatever its size; the ``free`` seconds of its steps that call no model; and its report (the
    summaries, the HTML, JSON and CSV written), which grows with the ``items`` it covers (none
    under ``--until``). The start and the report are as the ``earlier`` run recorded them, else
    guessed."""
    own, run = earlier.get("own"), earlier.get("run_id")
    no_model = f"the steps that call no model ({free:.2f} s)" if free >= 0.005 else ""
    if own is None:
        low, high = START[0] + free * SPREAD[0], START[1] + free * SPREAD[1]
        if report:
            low, high = low + REPORT_ITEM[0] * items, high + REPORT_ITEM[1] * items
        why = f"run {run} did not record them" if run else "a finished run in the workspace measures them"
        return (low, high), f"its start{' and report' if report else ''}, guessed ({why})" + \
            (f"; {no_model}" if no_model else "")
    seconds = own["report"] * items / max(1, own["items"]) if report else 0.0
    parts = [f"its start ({own['start']:.1f} s in run {run})", no_model,
             f"its report ({own['report']:.2f} s for its {own['items']} items, {seconds:.2f} s for {items:.0f})"
             if report else ""]
    parts = [p for p in parts if p]
    said = ", ".join(parts[:-1]) + f" and {parts[-1]}" if len(parts) > 1 else parts[0]
    return tuple((own["start"] + free + seconds) * f for f in SPREAD), said


def _duration(seconds: float) -> str:
    if seconds < 10:  # a small run: its own start and report are seconds of it
        return f"{seconds:.1f} s"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def default_estimate(step: Any, env: Any) -> ItemEstimate:
    """One call per role the step declares, and the agent's when it talks to the agent under
    test (a step replaying conversations to it may declare no role of its own), with the
    environment's prompt."""
    prompt = tokens(getattr(env, "prompt", "") or "") + 500
    roles = [*step.roles, *(["agent"] if step.uses_agent and "agent" not in step.roles else [])]
    return ItemEstimate(roles={r: RoleLoad(calls=1, prompt_tokens=prompt, completion_tokens=300)
                               for r in roles}, sequential=len(roles))


# -- what the store holds ------------------------------------------------------------------------

@dataclass
class Reuse:
    """What a walk of the plan over the store found, per step: items held (``reused``), items to
    make (``new``), of those the ones that start a fan-out whose elements are known only once
    made (``unknown``: the items below them are not in ``new``), and the calls of the items to
    make whose answers the cache holds (``cached``)."""

    reused: Counter = field(default_factory=Counter)
    new: Counter = field(default_factory=Counter)
    unknown: Counter = field(default_factory=Counter)
    #: of ``new``, the items made of an item that is itself to make (made only if that one goes on)
    waiting: Counter = field(default_factory=Counter)
    #: by step and role, the calls of items to make that the cache answers already (calls,
    #: prompt and completion tokens): an unfinished item's, made again for free
    cached: dict[tuple[str, str], tuple[int, int, int]] = field(default_factory=dict)
    #: by step, what each item to make whose inputs the walk knows costs (the step's
    #: :meth:`~intellagent.steps.Step.estimate_item`)
    items: dict[str, list[ItemEstimate]] = field(default_factory=dict)
    #: of the steps that call no model, the items the walk made as the run will (``computed``)
    #: and the seconds they took it
    computed: Counter = field(default_factory=Counter)
    seconds: Counter = field(default_factory=Counter)

    def item_estimate(self, step: str) -> ItemEstimate | None:
        """The mean of the :attr:`items` of ``step`` (tokens weighted by calls), None without any."""
        return ItemEstimate.mean(self.items.get(step, []))


class _Quiet:
    def expect(self, step: Any, n: int) -> None: ...
    def item_started(self, step: Any, scope: Any) -> None: ...
    def item_done(self, step: Any, scope: Any, held: Any) -> None: ...
    def step_started(self, step: Any) -> None: ...
    def step_done(self, step: Any) -> None: ...


async def plan_reuse(plan: Any, env: Any, store: Any, *, steps: list[str] | None = None,
                     cache: bool = True) -> Reuse:
    """Walk ``plan`` (its ``steps``) as a run would, looking every item up in ``store``.

    The agent under test is prepared only when that touches nothing outside this process (its
    class keeps the base's prepare, or declares ``prepares_offline``): otherwise its identity is
    unknown and the items that talk to it count as new."""
    from intellagent.agent import Agent, AgentSetup
    from intellagent.context import StepLLM
    from intellagent.errors import IntellagentError
    from intellagent.executors import LocalConfig, LocalExecutor
    from intellagent.hashing import content_hash
    from intellagent.items import ItemMaker, typed
    from intellagent.llm import LLM
    from intellagent.results import adapter, annotation_of
    from intellagent.scheduling import Held, Scheduler, first_error
    from intellagent.steps import DEGRADED, UNFINISHED, Output, Step

    selected = [plan.steps[n] for n in (steps if steps is not None else plan.steps)]
    setup = AgentSetup()
    agent = plan.agent.value if plan.agent is not None else None
    offline = agent is not None and (getattr(agent, "prepares_offline", False)
                                     or getattr(agent.prepare, "__func__", None) is Agent.prepare.__func__)
    if offline and any(s.uses_agent for s in selected):
        setup = await agent.prepare(plan.agent_config, env)
    llm = LLM(plan.spec.llm, store=store, seed=plan.spec.seed, cache=cache)
    maker = ItemMaker(plan, env, store=store, llm=llm, seed=plan.spec.seed, run_id="", owner="estimate",
                      on_error=lambda step, exc: None, agent=setup)
    roots = {s.domain[-1] for s in selected if s.domain}
    free = {s.name for s in selected if not (s.roles or s.uses_agent)}
    itemwise = {s.name for s in selected if type(s.plugin).estimate_item is not Step.estimate_item}
    needed = roots | {w.source for s in selected if s.name in free | itemwise for w in s.wires}
    found = Reuse()
    answers = store.cached_answers() if cache else {}

    async def make(step: Any, scope: Any, inputs: dict[str, Any], hashes: list) -> Held:
        key = content_hash(maker.static_key(step), hashes)
        if any(w.mode == "gather" for w in step.wires):
            return _to_make(step, key, known=False)
        if any(str(h).startswith("new:") for _, h in hashes):
            found.waiting[step.name] += 1
            return _to_make(step, key, known=False)
        row = store.item(key) if cache or step.name in free else None
        if row is not None and row.status not in UNFINISHED and row.status != DEGRADED:
            found.reused[step.name] += 1
            value = adapter(annotation_of(step.output)).validate_json(row.payload) \
                if step.name in needed else None
            return Held(value, row.value_hash, row.status, row.halt)
        guess = step.plugin.estimate_item(env, **inputs) if step.name in itemwise else None
        if step.name not in free:
            if guess is not None:  # its inputs known: what this very item costs
                found.items.setdefault(step.name, []).append(guess)
            # an item the step says asks no model (its inputs carry what it would ask for, say
            # given procedures) is computed, as a sampler's is, so the lists it makes are counted
            if guess is None or step.uses_agent or any(load.calls for load in guess.roles.values()):
                return _to_make(step, key)
            held = await compute(step, scope, key, inputs, hashes, roles={})
            return held if held is not None else _to_make(step, key)
        return await compute(step, scope, key, inputs, hashes, roles=step.roles)

    async def compute(step: Any, scope: Any, key: str, inputs: dict[str, Any], hashes: list,
                      roles: dict[str, str]) -> Held | None:
        """The item made as the run makes it, with only ``roles`` to call (a step that calls no
        model costs nothing); None when it asked for a model all the same."""
        ctx = maker.context(step, scope, key, content_hash(hashes) if hashes else None)
        if roles != step.roles:  # a call raises instead of reaching a model
            ctx = replace(ctx, llm=StepLLM(llm, step.name, roles, key))
        began = time.perf_counter()
        try:
            result = step.plugin.run(ctx, **inputs)
            if inspect.isawaitable(result):
                result = await result
        except IntellagentError:
            if roles == step.roles:
                raise
            return None
        if step.name in free:
            found.computed[step.name] += 1
            found.seconds[step.name] += time.perf_counter() - began
        found.new[step.name] += 1
        out = result if isinstance(result, Output) else Output(value=result)
        value, _, value_hash = typed(step, out.value)
        return Held(value, value_hash, out.status, out.halts)

    def _to_make(step: Any, key: str, known: bool = True) -> Held:
        found.new[step.name] += 1
        if cache and known:  # an unfinished item's calls the cache answers: asked again, for free
            for role, (n, prompt, completion) in answers.get(key, {}).items():
                held = found.cached.get((step.name, role), (0, 0, 0))
                found.cached[step.name, role] = (held[0] + n, held[1] + prompt, held[2] + completion)
        if step.name in roots:
            found.unknown[step.name] += 1
        return Held(None, "new:" + key, "new")

    try:
        local = replace(plan, executor=LocalExecutor(LocalConfig()))
        await Scheduler(local, selected, store=store, run_id="", make=make, observer=_Quiet(),
                        limit=16).run()
    except BaseExceptionGroup as group:  # noqa: F821 - builtin in 3.11
        raise first_error(group) from None
    finally:
        await setup.close()
        await llm.aclose()
    return found


# -- what an earlier run measured ----------------------------------------------------------------

def earlier_figures(plan: Any, env: Any, store: Any) -> dict[str, Any]:
    """Per item of each step, what the latest finished run of ``plan``'s pipeline on ``env`` (the
    same files: another environment, or this one with other data or prompt, is another world) in
    ``store`` spent (calls, tokens and the mean seconds of a call by role, with the model and
    endpoint each role had; elements of each list; the calls in a chain; the seconds an item of
    a step calling no model took), whether it tested the same agent, and the seconds of its own
    it took (``own``: its start, its report and the items that report covers); empty when there
    is none."""
    run_id = store.latest_finished_run(plan.name, environment_hash=env.fingerprint())
    if run_id is None:
        return {}
    figures = store.run_figures(run_id)
    config = store.run_config(run_id)
    spec = config.get("spec") or {}
    try:
        settings = type(plan.spec.llm).model_validate(spec.get("llm") or {})
    except ValueError:  # another version's settings: no role's model is known to match
        settings = None
    agent = plan.spec.agent.model_dump(mode="json", by_alias=True) if plan.spec.agent is not None else None
    items, finished = figures["items"], figures["finished"]
    timing = config.get("timing") or {}
    no_model = {name: seconds / n for name, (n, seconds) in (timing.get("no_model") or {}).items() if n}
    steps: dict[str, Any] = {}
    for name, step in plan.steps.items():
        n = finished.get(name)  # per item of those it finished: a cut-short one measures less
        if not n:
            continue
        loads, seconds = figures["loads"].get(name, {}), figures["latency"].get(name, {})
        roles = {role: {"calls": c / n, "prompt_tokens": p / c if c else 0, "completion_tokens": o / c if c else 0,
                        "model": endpoint(settings.for_role(role)) if settings is not None else None,
                        "latency": seconds.get(role)}
                 for role, (c, p, o) in loads.items()}
        # the models of the roles it declares, those it never called included (measured at none)
        models = {r: endpoint(settings.for_role(r)) for r in step.roles} if settings is not None else {}
        found: dict[str, Any] = {"roles": roles, "models": models,
                                 "sequential": sum(r["calls"] for r in roles.values()),
                                 "seconds": figures["span"].get(name), "no_model": no_model.get(name),
                                 "spread": _spread(figures["item_calls"].get(name, []), n)}
        children = [s for s in plan.steps.values() if s.each == name]
        if step.output.many and children:
            made = max(items.get(c.name, 0) for c in children)
            found["outputs"] = made / n
            asked = _asked(step, spec, env, n, items)
            if asked:
                found["made_of_asked"] = (made, asked)
        elif children:  # the share of its items that went on (an invalid one halts its later steps)
            found["goes_on"] = min(1.0, max(items.get(c.name, 0) for c in children) / items[name])
        steps[name] = found
    found_run: dict[str, Any] = {"run_id": run_id, "steps": steps, "same_agent": spec.get("agent") == agent}
    if "start" in timing:  # recorded since the estimate counts them (an older run's: not)
        found_run["own"] = {"start": timing["start"], "report": timing["report"], "items": sum(items.values())}
    return found_run


def _asked(step: Any, spec: dict[str, Any], env: Any, n: int, items: dict[str, int]) -> float | None:
    """How many elements ``step``'s own estimate asks its ``n`` items of the earlier run for,
    under that run's options (``pairs: 1``; ``trials: 2`` per gathered input): what they made
    of it is the share a list keeps (pairs and tasks are of the accepted blueprints only). None
    where that estimate fixes no count, or the step was another plugin then."""
    then = (spec.get("steps") or {}).get(step.name) or {}
    if not hasattr(step.plugin, "estimate") or then.get("use") != step.spec.use:
        return None
    cls = step.component.value
    config = getattr(cls, "Config", None)
    try:
        asked = cls(config.model_validate(then.get("with") or {}) if config is not None else None).estimate(env)
    except ValueError:  # options another version took
        return None
    if asked is not None and asked.per_input is not None:
        return asked.per_input * sum(items.get(w.source, 0) for w in step.wires if w.mode == "gather")
    if asked is not None and asked.outputs is not None and asked.outputs_fixed:
        return asked.outputs * n
    return None


def _spread(calls: list[int], items: int) -> tuple[int, float] | None:
    """How many items were measured and the standard deviation of one item's calls (the items
    not in ``calls`` made none); None under two items."""
    if items < 2:
        return None
    mean = sum(calls) / items
    squares = sum((c - mean) ** 2 for c in calls) + (items - len(calls)) * mean ** 2
    return items, math.sqrt(squares / (items - 1))


def endpoint(model: Any) -> tuple[str, str | None, str | None]:
    """What a role's measured figures hold for: the same model at the same endpoint (a pilot on
    a local test server measures nothing of the provider's model of that name)."""
    return model.model, model.provider, str(model.base_url) if model.base_url is not None else None


# -- the estimate --------------------------------------------------------------------------------

def estimate_plan(plan: Any, env: Any, earlier: dict[str, Any] | None = None,
                  steps: list[str] | None = None, reuse: Reuse | None = None) -> Estimate:
    """The cost of running ``plan`` (its ``steps``, all by default) on ``env`` with the models and
    prices of its ``llm`` settings. ``earlier``: :func:`earlier_figures` of the workspace;
    ``reuse``: :func:`plan_reuse` over its store (None: every item is made)."""
    from intellagent.llm.prices import PriceTable

    settings = plan.spec.llm
    prices = PriceTable(settings.prices)
    earlier = earlier or {}
    names = steps if steps is not None else list(plan.steps)
    agent_roles = sorted(getattr(plan.agent.value, "roles", {}) or {}) if plan.agent is not None else []
    per_item: dict[str, ItemEstimate] = {}
    goes_on: dict[str, float] = {}  # measured: the share of a step's items whose later steps ran
    sources: dict[str, str] = {}
    seconds: list[float] = []  # a call's mean seconds, of the roles measured at their endpoint
    spreads: dict[str, tuple[int, float]] = {}  # steps whose calls were all measured: items, sd
    took_seconds: dict[str, float] = {}  # steps whose items' wall time was measured
    for name in names:
        step = plan.steps[name]
        own = (reuse.item_estimate(name) if reuse is not None else None) or \
            (step.plugin.estimate(env) if hasattr(step.plugin, "estimate") else None)
        guess = own or default_estimate(step, env)
        found = earlier.get("steps", {}).get(name)
        if found is not None and step.uses_agent and not earlier.get("same_agent"):
            found = None  # another agent talks otherwise: its dialogs measure nothing of this one's
        if found is not None and "goes_on" in found:
            goes_on[name] = found["goes_on"]
        if found is not None:
            # a list's length the step's options fix (``events: 30``) wins over the earlier run's
            fixed = own is not None and (own.outputs is not None and own.outputs_fixed
                                         or own.per_input is not None)
            outputs = guess.outputs if fixed else found.get("outputs", guess.outputs)
            # of a count the options fix, the share the earlier run made (the rest were dropped)
            made, asked = found.get("made_of_asked", (1, 1)) if fixed else (1, 1)
            kept = made / asked
            # role by role: measured where the role had the model it has now, else the guess
            same = {r: load for r, load in found["roles"].items()
                    if load.get("model") == endpoint(settings.for_role(r))}
            measured = {r: RoleLoad(calls=load["calls"], prompt_tokens=load["prompt_tokens"],
                                    completion_tokens=load["completion_tokens"]) for r, load in same.items()}
            measured |= {r: RoleLoad() for r in guess.roles if r not in found["roles"]
                         and found.get("models", {}).get(r, False) == endpoint(settings.for_role(r))}
            seconds += [load["latency"] for load in same.values() if load.get("latency")]
            took = measured or not guess.roles or ("outputs" in found and not fixed)
            if measured and measured.keys() >= guess.roles.keys() and found.get("spread"):
                spreads[name] = found["spread"]
            if found.get("seconds") and same.keys() == found["roles"].keys():  # every role where it is now
                took_seconds[name] = found["seconds"]
            guess = ItemEstimate(roles={**guess.roles, **measured},
                                 outputs=outputs * kept if outputs is not None and guess.per_input is None else outputs,
                                 outputs_fixed=fixed,
                                 per_input=guess.per_input * kept if guess.per_input is not None else None,
                                 sequential=found.get("sequential", guess.sequential)
                                 if measured.keys() >= guess.roles.keys() else guess.sequential)
            # named as the source only where it measured something of this run's
            sources[name] = f"run {earlier['run_id']}" if took \
                else ("the step's own estimate" if own is not None else "a default guess")
            if kept != 1:
                sources[name] += f"; it made {made} of the {asked:g} elements asked there"
        else:
            sources[name] = "the step's own estimate" if own is not None else "a default guess"
        per_item[name] = guess

    def fan(root: str) -> float:
        if not plan.steps[root].output.many:
            return 1.0
        guess = per_item.get(root)
        if guess is not None and guess.per_input is not None:
            # made of the lists it gathers: of their items to make (those made of the items the
            # store holds are held too, being made of the same inputs)
            return guess.per_input * sum(items.get(w.source, 0.0) for w in plan.steps[root].wires
                                         if w.mode == "gather")
        outputs = guess.outputs if guess is not None else None
        return outputs if outputs is not None else DEFAULT_OUTPUTS

    def through(name: str, root: str | None) -> float:
        """The share of the items under ``root`` that reach ``name``: the measured share of each
        step between them whose items went on."""
        share, step = 1.0, plan.steps[name].each
        while step is not None and step != root and step in plan.steps:
            share *= goes_on.get(step, 1.0)
            step = plan.steps[step].each
        return share

    items: dict[str, float] = {}
    share: dict[str, float] = {}  # of the items found to make, those likely made (the others wait in vain)
    for name in names:
        domain = plan.steps[name].domain
        if reuse is None:
            items[name] = math.prod(fan(root) for root in domain) * through(name, None)
            continue
        # the items found to make (those waiting on an item to make: if that one goes on), and
        # those under each fan-out whose elements are unknown
        parent, new, waiting = plan.steps[name].each, reuse.new[name], reuse.waiting[name]
        made = new - waiting + waiting * (goes_on.get(parent, 1.0) * share.get(parent, 1.0) if parent else 1.0)
        share[name] = made / new if new else 1.0
        items[name] = made + sum(
            reuse.unknown[root] * share.get(root, 1.0) * math.prod(fan(r) for r in domain[k:]) * through(name, root)
            for k, root in enumerate(domain))
    total_calls = prompt_total = completion_total = 0.0
    dollars: float | None = 0.0
    unpriced: set[str] = set()
    costs: list[StepCost] = []
    timed: list[tuple[float, float | None, float]] = []  # per step: items, measured seconds, calls in a row
    variance = 0.0  # of the total calls, from the steps measured whole
    for name in names:
        step, guess, n = plan.steps[name], per_item[name], items[name]
        calls = prompt = completion = 0.0
        answered = 0
        step_dollars: float | None = 0.0
        for role, load in guess.roles.items():
            roles = agent_roles if role == "agent" and step.uses_agent else [role]
            for r in roles:  # an agent without a model of ours (HTTP, Python): not our calls
                share = 1 / len(roles)
                c, p, o = n * load.calls * share, n * load.calls * load.prompt_tokens * share, \
                    n * load.calls * load.completion_tokens * share
                if reuse is not None and (name, r) in reuse.cached:  # answered by the cache
                    held = reuse.cached[name, r]
                    c, p, o = max(0.0, c - held[0]), max(0.0, p - held[1]), max(0.0, o - held[2])
                    answered += held[0]
                calls, prompt, completion = calls + c, prompt + p, completion + o
                model = settings.for_role(r).model
                price = prices.price(model)
                if price is None:
                    unpriced.add(model)
                    step_dollars = None
                elif step_dollars is not None:  # at the tier a call of the mean prompt reaches
                    rate_in, rate_out, _ = price.rates(int(load.prompt_tokens))
                    step_dollars += (p * rate_in + o * rate_out) / 1e6
        costs.append(StepCost(name=name, items=n, reused=reuse.reused[name] if reuse else 0, calls=calls,
                              prompt_tokens=prompt, completion_tokens=completion, dollars=step_dollars,
                              source=sources[name] + (f"; {answered} calls in the cache" if answered else "")))
        total_calls, prompt_total, completion_total = total_calls + calls, prompt_total + prompt, \
            completion_total + completion
        dollars = None if dollars is None or step_dollars is None else dollars + step_dollars
        if n:
            timed.append((n, took_seconds.get(name), guess.sequential))
        if name in spreads and n:
            # the new items are like the measured ones: the mean of k measured items is off by
            # sd / sqrt(k) an item, and n new items vary by sd each around it
            k, sd = spreads[name]
            variance += sd ** 2 * (n * n / k + n)
    latency = sum(seconds) / len(seconds) if seconds else None
    low, high = (latency * SPREAD[0], latency * SPREAD[1]) if latency else LATENCY
    # the items one after another in rounds of those a fan-out keeps in progress, or the calls
    # spread over the requests in flight, or the provider's limits per minute: whichever takes
    # longest
    floor = 0.0
    if settings.requests_per_minute:
        floor = max(floor, total_calls / settings.requests_per_minute * 60)
    if settings.tokens_per_minute:
        floor = max(floor, (prompt_total + completion_total) / settings.tokens_per_minute * 60)
    executor = getattr(plan, "executor", None)  # its processes each with their own model slots
    slots = executor.model_slots(settings.max_concurrency) if executor is not None else settings.max_concurrency
    spread = math.ceil(total_calls / slots)
    # a step's items take rounds of those in progress (one round: one item's time), an item its
    # measured seconds (where the earlier run had every role where it is now: an agent that is
    # not our model takes its own time between our calls) or its calls one after another
    in_flight = executor.items_at_once(settings.max_concurrency) if executor is not None \
        else items_in_flight(fan_out_limit(slots))
    wall = tuple(max(sum(math.ceil(n / in_flight) * (took * factor if took is not None else calls * call)
                         for n, took, calls in timed), spread * call, floor)
                 for factor, call in zip(SPREAD, (low, high)))
    # the steps that call no model take the process's own time, an item after another (a step
    # computing holds the event loop): the items the walk made as long as they took it, the
    # others as long as the earlier run's took
    free = 0.0
    for name in names:
        if plan.steps[name].roles or plan.steps[name].uses_agent:
            continue
        walked, seconds = (reuse.computed[name], reuse.seconds[name]) if reuse is not None else (0, 0.0)
        per_item = (earlier.get("steps", {}).get(name) or {}).get("no_model") or 0.0
        free += seconds + max(0.0, items[name] - walked) * per_item
    own, own_source = own_time(earlier, sum(c.items + c.reused for c in costs), free, report=steps is None)
    wall = tuple(own[i] + wall[i] for i in (0, 1))
    margin = 1.96 * math.sqrt(variance)
    return Estimate(own=own, own_source=own_source, steps=costs, calls=total_calls, prompt_tokens=prompt_total,
                    completion_tokens=completion_total, dollars=dollars, wall=wall,
                    calls_range=(max(0.0, total_calls - margin), total_calls + margin) if spreads else None,
                    measured={name: k for name, (k, _) in spreads.items()},
                    unpriced=sorted(unpriced), earlier_run=earlier.get("run_id"))
