"""Reverse task recombination: accepted blueprints of the same user joined into longer tasks.

``recombination-pairs`` (sampler, over every accepted blueprint) pairs blueprints of the same
user; ``recombine`` (generator, per pair) concatenates their actions (a read of the second part
is dropped when the same call was made before and returns the same in the combined run: a read
whose answer the first part changed is made again), aggregates their outputs, re-runs the policy
checks on the combined actions (two parts that conflict, such as cancelling and then returning
the same order, are rejected here), checks that the combined actions still execute, that each
part's expected outputs still come from what its own actions return in the combined run, and
that the combined task still changes something or expects an output; then has the generator
write one combined instruction, and re-validates from stage 2: the committee, with refinement of
the instruction on its feedback.

Outputs aggregate per part: an output is what the agent says when that part of the conversation
is done. The first part's reads happen before the second part's writes, so they say what they
said alone ("pending", then the order is cancelled: still a valid output). The second part's
reads now follow the first part's writes: an output one of them said alone but no longer says
("pending" read after a cancellation) is a conflict, and the pair is rejected.
"""

from __future__ import annotations

from collections import defaultdict

from pydantic import BaseModel, Field

from intellagent.bounds import MAX_ITEMS, MAX_TURNS
from intellagent.environment import run_actions
from intellagent.model import StrictModel
from intellagent.estimate import tokens
from intellagent.steps import ItemEstimate, RoleLoad, Sampler

from intellagent_plugins.apigen_mt.artefacts import Attempt, Blueprint, BlueprintResult, Call, Pair, Problem
from intellagent_plugins.apigen_mt.committee import ROLES
from intellagent_plugins.apigen_mt.generator import DRAFT, ReviewedGenerator, failure_status
from intellagent_plugins.apigen_mt.validation import (check_outputs, check_policy, check_testable, execute,
                                                     problems_feedback)


class PairsConfig(StrictModel):
    pairs: int = Field(default=5, ge=0, le=MAX_ITEMS, description="Combined tasks to attempt, at most.")
    max_actions: int = Field(default=12, ge=2, le=MAX_TURNS, description="Longest combined action list.")


class RecombinationPairs(Sampler):
    """Pairs of accepted blueprints of the same user (every user's pairs in turn, seeded)."""

    name = "recombination-pairs"
    Config = PairsConfig
    inputs = {"blueprints": list[BlueprintResult]}
    output = list[Pair]

    def estimate(self, env) -> ItemEstimate:
        """``pairs`` (fewer where the accepted blueprints of one user make fewer)."""
        return ItemEstimate(outputs=self.config.pairs)

    def run(self, ctx, blueprints: list[BlueprintResult]) -> list[Pair]:
        by_user: dict[str, list[BlueprintResult]] = defaultdict(list)
        for b in sorted(blueprints, key=lambda b: b.id):
            if b.status == "accepted" and b.blueprint is not None and b.blueprint.user_id:
                by_user[b.blueprint.user_id].append(b)
        rng = ctx.rng("pairs")
        candidates = []
        for user in sorted(by_user):
            group = by_user[user]
            options = [(a, b) for i, a in enumerate(group) for b in group[i + 1:]
                       if len(a.blueprint.actions) + len(b.blueprint.actions) <= self.config.max_actions
                       and a.blueprint.actions != b.blueprint.actions]  # the same task twice is no pair
            rng.shuffle(options)
            candidates.append(options)
        pairs: list[Pair] = []
        while len(pairs) < self.config.pairs and any(candidates):  # one pair per user in turn
            for options in candidates:
                if options and len(pairs) < self.config.pairs:
                    a, b = options.pop()
                    pairs.append(Pair(id=f"C{len(pairs):03d}", user_id=a.blueprint.user_id, first=a, second=b))
        return pairs


class CombinedInstruction(BaseModel):
    thought: str = Field(description="How the two requests fit in one conversation.")
    instruction: str = Field(description="The combined instruction, second person.")


def combine(env, first: Blueprint, second: Blueprint) -> tuple[Blueprint, list[list[int]]]:
    """The two parts as one blueprint, and for each part the positions of the combined actions
    whose results stand for its own (a dropped read is stood for by the identical earlier one)."""
    calls = list(first.actions) + list(second.actions)
    trace = run_actions(env.tools, env.seed_database(), [(c.name, c.arguments) for c in calls],
                        {"user_id": first.user_id}, stop_on_error=False)
    kept: list[Call] = []
    where: list[int] = []  # position in ``kept`` of each of ``calls``
    for i, (call, action) in enumerate(zip(calls, trace.actions)):
        if i >= len(first.actions) and not action.writes and not action.error:
            same = next((where[j] for j in range(i) if calls[j] == call and not trace.actions[j].error
                         and trace.actions[j].output == action.output), None)
            if same is not None:
                where.append(same)
                continue
        where.append(len(kept))
        kept.append(call)
    trace.close()
    merged = Blueprint(thought=f"{first.thought} Then: {second.thought}", user_id=first.user_id,
                       instruction="", actions=kept, outputs=list(dict.fromkeys(first.outputs + second.outputs)),
                       persona=first.persona or second.persona)
    return merged, [where[:len(first.actions)], where[len(first.actions):]]


def stale_outputs(pair: Pair, parts: list[list[int]], results: list[str]) -> list[Problem]:
    """Each part's outputs against what its own actions return in the combined run."""
    problems = []
    for part, positions in zip((pair.first, pair.second), parts):
        for p in check_outputs(part.blueprint, [results[k] for k in positions if k < len(results)]):
            problems.append(Problem(stage="conflict", reason="unsupported-output", message=f"{part.id}: "
                                    f"{p.message} of its actions in the combined run (an earlier "
                                    f"action changed what they return)"))
    return problems


class Recombine(ReviewedGenerator):
    """One longer task from a pair: combined actions checked, one instruction, stage 2 again."""

    name = "recombine"
    inputs = {"pair": Pair}
    roles = {"generator": "writes the combined instruction", **ROLES}
    score = "combined"

    def estimate(self, env) -> ItemEstimate:
        """A pair whose actions run together: one combined instruction, and the committee's
        round on it."""
        written = tokens(self.texts.source("combine.md")) + 2 * DRAFT
        roles = {"generator": RoleLoad(calls=1, prompt_tokens=written, completion_tokens=DRAFT / 4),
                 **self.committee_estimate(env, 2 * DRAFT)}
        return ItemEstimate(roles=roles, sequential=2)

    async def make(self, ctx, pair: Pair) -> BlueprintResult:
        merged, parts = combine(ctx.env, pair.first.blueprint, pair.second.blueprint)
        result = BlueprintResult(id=pair.id, kind="combined", status="rejected",
                                 parts=[pair.first.id, pair.second.id])
        execution = execute(ctx.env, merged, stop_on_error=False)
        problems = [p.model_copy(update={"stage": "conflict"}) for p in
                    (check_policy(ctx.env, execution.trace) if execution.trace else [])]
        problems = problems or execution.problems
        if not problems:
            problems = stale_outputs(pair, parts, execution.results) or [
                p.model_copy(update={"stage": "conflict"}) for p in check_testable(merged, execution.trace)]
        diff = execution.diff
        execution.close()
        if problems:
            result.attempts.append(Attempt(round=0, blueprint=merged, problems=problems, diff=diff,
                                           feedback=problems_feedback(problems)))
            return result
        previous, feedback = "", ""
        for round in range(self.config.review_rounds + 1):
            outcome = await ctx.llm.structured([{"role": "user", "content": self.texts.render(
                "combine.md", first=pair.first.blueprint, second=pair.second.blueprint,
                actions=merged.actions, previous=previous, feedback=feedback)}],
                CombinedInstruction, role="generator")
            if not outcome.ok:
                return result.model_copy(update={"status": outcome.status.value, "error": outcome.error})
            blueprint = merged.model_copy(update={"instruction": outcome.value.instruction.strip()})
            attempt = Attempt(round=round, blueprint=blueprint, diff=diff)
            if not blueprint.instruction:
                attempt.problems = [Problem(stage="format", reason="missing-part", message="the instruction is empty")]
                attempt.feedback = "The instruction is empty."
            else:
                error = await self.review(ctx, attempt)
                if error is not None:
                    return result.model_copy(update={"status": failure_status(error), "error": error})
            result.attempts.append(attempt)
            if not attempt.problems:
                result.status, result.blueprint = "accepted", blueprint
                return result
            previous, feedback = blueprint.instruction, attempt.feedback
        return result
