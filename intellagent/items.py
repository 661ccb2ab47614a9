"""One item of one step: its identity, its reuse, its claim and its computation.

Every step item is stored under a content hash of: the step's plugin and version, its options,
the hashes of the inputs it received, the run seed, the environment's content, the model
settings of every role the step declares (and of the agent's, for steps that talk to it). An item
already in the store is reused; anything that would change it changes its key. An item that
costs model calls is computed under a claim in the store, so another process on the same store
waits for it instead of paying for it too. Unfinished items (infra errors, budget stops) are
recorded but never reused; a degraded item (made without a model call that failed) is reused only
by the run that made it (its later steps, its other processes) and made again by the next.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
from typing import Any, Callable

from intellagent import bounds
from intellagent.agent import AgentSetup, BrokenAgent, GuardedAgent
from intellagent.context import StepContext, StepLLM
from intellagent.environment import Environment
from intellagent.errors import IntellagentError
from intellagent.hashing import content_hash, text_hash
from intellagent.llm import LLM
from intellagent.mutants import MUTANT_FAILED, Mutant, MutatedAgent, mutant_raised
from intellagent.offload import Offload
from intellagent.plan import Plan, PlannedStep
from intellagent.replay import Recording
from intellagent.results import adapter, annotation_of
from intellagent.scheduling import Held, Scope
from intellagent.steps import DEGRADED, UNFINISHED, Output, Score

CLAIM_TTL = 60.0  # seconds a claim lasts unless renewed (its process renews it every 20 s)
CLAIM_POLL = 0.2  # seconds between looks at an item another process is computing


def undeclared(step: PlannedStep, scores: list[Score]) -> str | None:
    """A score the step gives that it does not declare (by name, or by status), or None: metrics
    and ``validate`` read the declarations, so a step cannot give more than it says."""
    declared = step.scores
    for score in scores:
        spec = declared.get(score.name)
        if spec is None:
            return (f"'{step.use}' gives a score '{score.name}' it does not declare (declared: "
                    f"{', '.join(declared) or 'none'}; declare it in the step's `scores`)")
        if score.status is not None and score.status not in UNFINISHED and (
                spec.statuses is None or score.status not in spec.statuses.all()):
            known = ", ".join(spec.statuses.all()) if spec.statuses else "none"
            return (f"'{step.use}' gives score '{score.name}' the status '{score.status}', which it "
                    f"does not declare (declared: {known})")
    return None


def typed(step: PlannedStep, value: Any) -> tuple[Any, str, str]:
    """``value`` as ``step`` declares its output (exactly: a consumer gets what the wiring
    promised), its JSON and that JSON's hash, as the store keeps them."""
    annotation = annotation_of(step.output)
    try:
        value = adapter(annotation).validate_python(value) if value is not None else None
        payload = adapter(annotation).dump_json(value).decode() if value is not None else "null"
    except Exception as exc:
        raise IntellagentError(f"'{step.use}' returned {type(value).__name__}, not its "
                               f"declared {step.output}: {str(exc).splitlines()[0]}",
                               item=f"step {step.name}") from None
    return value, payload, text_hash(payload)


class ItemMaker:
    """Makes (or finds) the items of one run's steps. ``owner`` names this process's claims;
    ``on_error(step, exc)`` is told of a step that raised before the error goes on."""

    def __init__(self, plan: Plan, env: Environment, *, store: Any, llm: LLM, seed: int,
                 run_id: str, owner: str,
                 on_error: Callable[[PlannedStep, BaseException], None],
                 agent: AgentSetup | None = None, lineage: str = "",
                 offload: Offload | None = None,
                 observe: Callable[[PlannedStep, str, Any], None] | None = None,
                 recording: Recording | None = None) -> None:
        self.plan = plan
        self.env = env
        self.store = store
        self.llm = llm
        self.seed = seed
        self.run_id = run_id
        self.owner = owner
        self.on_error = on_error
        self.agent = agent or AgentSetup()
        self.lineage = lineage  # the run a black-box agent's dialogs are reused within
        self.offload = offload
        self.observe = observe  # told of agent turns and tool calls inside an item
        self.recording = recording  # the run being replayed: its outputs of the agent's steps
        self._recorded: dict[str, Any] = {}  # item key → the recorded item it replays
        # a replay's steps before the agent's (the events it replays) are the recorded run's,
        # --no-cache or not: made again by a model, they would be other events
        self._as_recorded = set() if recording is None else {
            name for step in plan.steps.values() if step.uses_agent
            for name in plan.upstream(step.name) if not plan.steps[name].uses_agent}
        self.made = 0  # items this process computed
        self._static: dict[str, str] = {}

    # -- identity ------------------------------------------------------------------------

    def agent_fingerprint(self) -> Any:
        """What the agent is: its plugin and options, its models, and its identity; a black box
        (no identity) is what it was within this run and the runs resuming it, nothing more."""
        agent = self.plan.agent
        if agent is None:
            return None
        roles = getattr(agent.value, "roles", {}) or {}
        identity = self.agent.identity if self.agent.identity is not None else ["black-box", self.lineage]
        found = [agent.name, self.plan.agent_config.model_dump(mode="json") if self.plan.agent_config else None,
                 {r: self.llm.settings_for(r).fingerprint() for r in sorted(roles)}, identity]
        mutant = self.plan.mutant
        if mutant is not None:  # a mutant's dialogs are never the agent's own, nor another mutant's
            found.append(["mutant", mutant.name, getattr(mutant.value, "version", "1")])
        return found

    def static_key(self, step: PlannedStep) -> str:
        """The part of a step's item keys that every item shares."""
        if step.name not in self._static:
            config = step.config.model_dump(mode="json") if step.config is not None else None
            fingerprint = getattr(step.plugin, "fingerprint", None)
            self._static[step.name] = content_hash(
                step.use, step.version, config, fingerprint() if fingerprint else None, self.seed,
                self.env.fingerprint(),
                {r: self.llm.settings_for(r).fingerprint() for r in sorted(step.roles)},
                self.agent_fingerprint() if step.uses_agent else None)
        return self._static[step.name]

    # -- making --------------------------------------------------------------------------

    async def make(self, step: PlannedStep, scope: Scope, inputs: dict[str, Any], hashes: list) -> Held:
        """The item of ``step`` for these inputs: reused from the store, or computed."""
        key = content_hash(self.static_key(step), hashes)
        recorded = self.recording.find(step.name, scope.key) \
            if self.recording is not None and step.uses_agent else None
        if recorded is not None:  # a replay of that recording: never a live item, nor another replay
            key = content_hash(key, self.recording.fingerprint, recorded.value_hash)
            self._recorded[key] = recorded
        # --no-cache: every model call and every agent turn again (a step that calls neither is
        # the same computation on the same inputs: its stored item stands)
        reusable = self.llm.cache_enabled or not (step.roles or step.uses_agent) or step.name in self._as_recorded
        held = self.stored(step, key, this_run_only=not reusable)
        if held is None:
            draw = content_hash(hashes) if hashes else None
            held = await (self._claimed(step, scope, key, inputs, draw, reusable)
                          if step.roles or step.uses_agent
                          else self._compute(step, scope, key, inputs, draw))
        self._recorded.pop(key, None)
        self.store.record_run_item(self.run_id, step.name, scope.key, scope.pos, key, held.status)
        return held

    def stored(self, step: PlannedStep, key: str, this_run_only: bool = False) -> Held | None:
        """The finished item ``key`` from the store (an unfinished one is made again, and so is
        a degraded one another run made; ``this_run_only``: one another process of this very run
        made)."""
        row = self.store.item(key)
        if row is None or row.status in UNFINISHED or (
                (this_run_only or row.status == DEGRADED) and row.run_id != self.run_id):
            return None
        return Held(adapter(annotation_of(step.output)).validate_json(row.payload), row.value_hash,
                    row.status, row.halt)

    async def _claimed(self, step: PlannedStep, scope: Scope, key: str, inputs: dict,
                       draw: str | None, reusable: bool = True) -> Held:
        """Compute an item that costs model calls under a claim in the store, so another process
        on the same store waits for it instead of paying for it too."""
        while True:
            if self.store.claim(key, self.owner, CLAIM_TTL):
                try:  # finished by another while we waited?
                    held = self.stored(step, key, this_run_only=not reusable)
                    return held if held is not None else await self._compute(step, scope, key, inputs, draw)
                finally:
                    self.store.release(key, self.owner)
            # what this process finished (and the claims it gave up) must be in the store before
            # it waits: the process holding ``key`` may be waiting for one of them
            self.store.flush()
            await asyncio.sleep(CLAIM_POLL)
            held = self.stored(step, key, this_run_only=not reusable)
            if held is not None:
                return held

    async def keep_claims(self) -> None:
        """Renew this process's claims (and the executor's leases) until cancelled."""
        while True:
            await asyncio.sleep(CLAIM_TTL / 3)
            self.store.renew(self.owner, CLAIM_TTL)
            await self.plan.executor.renew()

    async def _compute(self, step: PlannedStep, scope: Scope, key: str, inputs: dict,
                       draw: str | None = None) -> Held:
        refused = False
        if self.llm.budget_exhausted:
            out: Output = Output(value=None, status="budget-exhausted",
                                 note=self.llm.budget_message())
        else:
            ctx = self.context(step, scope, key, draw)
            try:
                result = step.plugin.run(ctx, **inputs)
                if inspect.isawaitable(result):
                    result = await result
                out = result if isinstance(result, Output) else Output(value=result)
            except IntellagentError as exc:
                if not ctx.llm.refused_for_budget:
                    if exc.item is None and exc.file is None:
                        exc.item = f"step {step.name}"
                    self.on_error(step, exc)
                    raise
                # the step gave up because the budget refused its calls: a budget stop, not bad input
                out = Output(value=None, status="budget-exhausted", note=self.llm.budget_message())
            except Exception as exc:
                self.on_error(step, exc)
                raise
            refused = ctx.llm.refused_for_budget
            failed = sorted({m.failed for m in ctx._mutants if m.failed})
            if failed:  # the mutant's own bug, not a fault of the agent's: said on the item
                out = out.model_copy(update={"warnings": [*out.warnings, *(MUTANT_FAILED + f for f in failed)]})
        if refused and out.status == "infra-error":  # not a fault: the budget stopped a call
            out = out.model_copy(update={"status": "budget-exhausted", "note": self.llm.budget_message()})
        problem = undeclared(step, out.scores)
        if problem:
            raise IntellagentError(problem, item=f"step {step.name}")
        if step.output.many and isinstance(out.value, (list, tuple)) and len(out.value) > bounds.MAX_ITEMS:
            raise IntellagentError(f"'{step.use}' gave {len(out.value):,} items; a step may make at "
                                   f"most {bounds.MAX_ITEMS:,} (docs/input-and-bounds.md)", item=f"step {step.name}")
        value, payload, value_hash = typed(step, out.value)
        self.made += 1
        self.store.put_item(key=key, step=step.use, status=out.status, halt=out.halts,
                            note=out.note, payload=payload, value_hash=value_hash, run_id=self.run_id,
                            replace=not self.llm.cache_enabled,
                            warnings=json.dumps(out.warnings),
                            scores="[" + ",".join(s.model_dump_json() for s in out.scores) + "]")
        return Held(value, value_hash, out.status, out.halts, made=True)

    def context(self, step: PlannedStep, scope: Scope, key: str, draw: str | None = None) -> StepContext:
        """What ``step`` sees while it computes the item ``key``."""
        observe = self.observe
        ctx = StepContext(env=self.env, llm=StepLLM(self.llm, step.name, step.roles, key, draw=draw),
                          seed=self.seed, offload=self.offload,
                          observe=(lambda event: observe(step, scope.key, event)) if observe else None,
                          key=key, item=scope.key, run_id=self.run_id, step=step.name,
                          # the plugin's own name, not its registered one: a plugin moved to another
                          # name space keeps its draws and its memos
                          _store=self.store, _memo_scope=[step.plugin.name, step.version, {
                              r: self.llm.settings_for(r).fingerprint() for r in sorted(step.roles)}])
        recorded = self._recorded.get(key)
        if recorded is not None:
            ctx.recorded = self.recording.recorded(step, recorded)
        if step.uses_agent and self.plan.agent is not None:
            agent_cls, config = self.plan.agent.value, self.plan.agent_config
            agent_ctx = dataclasses.replace(ctx, llm=StepLLM(self.llm, step.name,
                                                             getattr(agent_cls, "roles", {}) or {}, key,
                                                             parent=ctx.llm, draw=draw))

            mutant = self.plan.mutant
            mutants = ctx._mutants  # not ctx itself: ctx holds make, and a cycle waits for the collector

            def make(ground_truth: Any = None) -> Any:
                known = ground_truth if getattr(agent_cls, "needs_ground_truth", False) else None
                try:
                    agent = agent_cls(config, agent_ctx, known)
                    agent.setup = self.agent
                except IntellagentError:
                    raise
                except Exception as exc:  # a bug in the agent's plugin: this dialog's agent-error
                    return BrokenAgent(exc)
                if mutant is not None:
                    # the harness's fault around the agent, its choices drawn from the item; what
                    # the mutant raises fails the turn and is remembered (no fault the suite caught)
                    try:
                        made = mutant.value(self.env, agent_ctx.rng("mutant", mutant.name))
                    except Exception as exc:
                        made = Mutant(self.env, agent_ctx.rng("mutant", mutant.name))  # carries the failure
                        mutants.append(made)
                        name = getattr(mutant.value, "name", "") or mutant.name
                        return BrokenAgent(exc, mutant_raised(made, "its construction", exc, name))
                    mutants.append(made)
                    agent = MutatedAgent(agent, made)
                return GuardedAgent(agent)

            ctx._agent = make
        return ctx
