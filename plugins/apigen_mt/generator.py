"""``blueprint``: generate one task blueprint from its context, then validate, review and refine.

Stage 1 (format, execution, policy; :mod:`validation`) and stage 2 (the committee;
:mod:`committee`) run on every version; a version that fails goes back to the generator with the
failures (stage 1) or the committee's consolidated feedback (stage 3, refinement), within
``fix_rounds`` and ``review_rounds`` revisions. Every round is kept in the result, so the report
and the metrics tell acceptance at the first try (no feedback loop) from acceptance after
revision, and count rejections by stage and reason.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, ClassVar

from pydantic import Field

from intellagent.bounds import MAX_CHARS, MAX_ROUNDS
from intellagent.model import StrictModel
from intellagent.prompts import PromptsFolder
from intellagent.estimate import tokens
from intellagent.steps import PASS_FAIL, UNFINISHED, Generator, ItemEstimate, Output, RoleLoad, Score, ScoreSpec, Statuses

from intellagent_plugins.apigen_mt.artefacts import (Attempt, Blueprint, BlueprintContext,
                                                     BlueprintResult, Call, Review)
from intellagent_plugins.apigen_mt.committee import ROLES, CommitteeConfig, decide
from intellagent_plugins.apigen_mt.prompts import prompts
from intellagent_plugins.apigen_mt.validation import Draft, problems_feedback, tool_schemas, validate

PROMPTS = ("generator.system.md", "generate.md", "revise.md", "reviewer.system.md", "review.md",
           "combine.md")

#: For ``--estimate``: a blueprint's drafts (its first and, one time in two, a revision), the
#: tokens a model writes for a draft and for a review, and the actions of a blueprint.
DRAFTS, DRAFT, REVIEW, ACTIONS = 1.5, 400, 150, 2


class BlueprintConfig(StrictModel):
    committee: CommitteeConfig = Field(default_factory=CommitteeConfig)
    fix_rounds: int = Field(default=2, ge=0, le=MAX_ROUNDS,
                            description="Revisions after a format, execution or "
                                                         "policy failure.")
    review_rounds: int = Field(default=2, ge=0, le=MAX_ROUNDS, description="Revisions after a "
                               "committee rejection (stage 3, refinement).")
    policy_chars: int = Field(default=20000, ge=500, le=MAX_CHARS,
                              description="The agent's policy in the "
                              "prompts, at most this long.")
    prompts: PromptsFolder = Field(default=None, description="Folder of prompt files replacing the "
                                "built-in ones of the same name.")



class Committee:
    """Stage 2 as a step uses it."""

    def __init__(self, config: BlueprintConfig, texts) -> None:
        self.config = config
        self.texts = texts

    async def review(self, ctx, blueprint: Blueprint, diff: str) -> tuple[list[Review] | None, str]:
        """Every member's review, or (None, why) when a member could not answer."""
        members = self.config.committee.members
        used = sorted({c.name for c in blueprint.actions})
        user = self.texts.render("review.md", blueprint=blueprint, diff=diff,
                                 tools=tool_schemas(ctx.env, used))
        policy = ctx.env.prompt[:self.config.policy_chars]

        async def one(i: int, role: str):
            system = self.texts.render("reviewer.system.md", member=i + 1, members=len(members),
                                       policy=policy)
            return await ctx.llm.structured([{"role": "system", "content": system},
                                             {"role": "user", "content": user}], Review, role=role,
                                            sample=f"member-{i}")

        outcomes = await asyncio.gather(*(one(i, r) for i, r in enumerate(members)))
        failed = [o for o in outcomes if not o.ok]
        if failed:
            return None, f"a committee member could not answer: {failed[0].error}"
        return [o.value for o in outcomes], ""


def _as_blueprint(draft: Draft, persona: str) -> Blueprint:
    """A draft as far as it can be read (for the record of a round that failed its format)."""
    calls = []
    for a in draft.actions:
        try:
            args = json.loads(a.arguments)
        except (json.JSONDecodeError, TypeError):
            args = {"(unparsed)": a.arguments}
        calls.append(Call(name=a.name, arguments=args if isinstance(args, dict) else {"(value)": args}))
    return Blueprint(thought=draft.thought, user_id=draft.user_id, instruction=draft.instruction,
                     actions=calls, outputs=list(draft.outputs), persona=persona)


def failure_status(error: str) -> str:
    """The status of an item whose committee could not answer: the failed call's own status
    (an answer that did not fit is ``invalid-output``, anything else ``infra-error``)."""
    return "invalid-output" if "invalid-output:" in error else "infra-error"


def rejection_note(result: BlueprintResult) -> str:
    """Why a blueprint was rejected, for the report: the stage, the reasons, the messages."""
    if result.status == "accepted" or not result.attempts:
        return ""
    last = result.attempts[-1]
    reasons = ", ".join(sorted({p.reason for p in last.problems if p.stage == last.stage}))
    return f"rejected at {last.stage} ({reasons}) after {len(result.attempts)} version(s): " + \
        "; ".join(p.message for p in last.problems)[:300]


def result_scores(result: BlueprintResult, name: str) -> list[Score]:
    """The item's scores: the outcome, acceptance at the first try, and one ``rejection`` per
    failed round (labelled with its stage and reasons)."""
    final = result.attempts[-1].stage if result.attempts and result.status == "rejected" else "accepted"
    scores = [Score(name=name, status="pass" if result.status == "accepted" else "fail",
                    value=len(result.attempts), note=result.attempts[-1].feedback if result.attempts else "",
                    labels={"kind": result.kind, "stage": final, "rounds": len(result.attempts)})]
    if name == "blueprint":
        scores.append(Score(name="blueprint-first", status="pass" if result.first_try else "fail"))
    for attempt in result.attempts:
        if attempt.problems:
            scores.append(Score(name="rejection", status="rejected", labels={
                "kind": result.kind, "stage": attempt.stage, "round": attempt.round,
                "reason": sorted({p.reason for p in attempt.problems if p.stage == attempt.stage})},
                note="; ".join(p.message for p in attempt.problems)[:500]))
    return scores


class ReviewedGenerator(Generator):
    """A generator whose tasks go through the committee and refinement (a blueprint, a combined
    task): its ``make(ctx, **inputs)`` gives the result, scored under ``score``."""

    Config = BlueprintConfig
    output = BlueprintResult
    score: ClassVar[str]
    statuses = PASS_FAIL
    empty_hint = ("a task must pass APIGen-MT's checks and its review committee, which a mock model's "
                  "fabricated tasks never do: run with a real model (--model gpt-4o-mini)")

    @property
    def scores(self) -> dict[str, ScoreSpec]:  # type: ignore[override]
        out = {self.score: ScoreSpec(statuses=PASS_FAIL, value=True, labels=["kind", "stage", "rounds"],
                                     description="accepted (pass) or rejected; the value counts its rounds"),
               "rejection": ScoreSpec(statuses=Statuses(other=["rejected"]),
                                      labels=["kind", "stage", "round", "reason"],
                                      description="one per rejected version")}
        if self.score == "blueprint":
            out["blueprint-first"] = ScoreSpec(statuses=PASS_FAIL, description="accepted at the first try")
        return out

    def __init__(self, config: BlueprintConfig) -> None:
        super().__init__(config)
        self.texts = prompts(config.prompts, *PROMPTS)
        self.committee = Committee(config, self.texts)

    def fingerprint(self) -> Any:
        return self.texts.fingerprint()

    def committee_estimate(self, env, blueprint: float) -> dict[str, RoleLoad]:
        """One committee round on a task of ``blueprint`` tokens, by role: each member's call
        (a role named twice is asked twice), with the policy and the used tools' schemas."""
        schemas = tool_schemas(env, None)
        used = sum(tokens(s) for s in schemas) / len(schemas) * ACTIONS if schemas else 0.0
        system = tokens(self.texts.render("reviewer.system.md", member=1, members=len(self.config.committee.members),
                                          policy=env.prompt[:self.config.policy_chars]))
        prompt = system + tokens(self.texts.source("review.md")) + blueprint + used
        members = self.config.committee.members
        return {role: RoleLoad(calls=members.count(role), prompt_tokens=prompt, completion_tokens=REVIEW)
                for role in dict.fromkeys(members)}

    async def review(self, ctx, attempt: Attempt) -> str | None:
        """The committee's round on an attempt that passed the checks: its reviews, votes,
        problems and feedback; the error when the committee could not answer."""
        members, why = await self.committee.review(ctx, attempt.blueprint, attempt.diff)
        if members is None:
            return why
        attempt.reviews = members
        attempt.votes, attempt.problems, attempt.feedback = decide(self.config.committee, members)
        return None

    async def run(self, ctx, **inputs: Any) -> Output[BlueprintResult]:
        result = await self.make(ctx, **inputs)
        if result.status in UNFINISHED:
            return Output(value=result, status=result.status, note=result.error or "")
        return Output(value=result, status="pass" if result.status == "accepted" else "fail",
                      note=rejection_note(result), scores=result_scores(result, self.score))


class GenerateBlueprint(ReviewedGenerator):
    """A blueprint from its context, through validation, committee review and refinement."""

    name = "blueprint"
    version = "1"
    inputs = {"context": BlueprintContext}
    roles = {"generator": "writes and revises task blueprints", **ROLES}
    score = "blueprint"

    def estimate(self, env) -> ItemEstimate:
        """A context the estimate does not know: as :meth:`estimate_item`'s with no records."""
        return self.estimate_item(env, BlueprintContext(id="estimate"))

    def estimate_item(self, env, context: BlueprintContext) -> ItemEstimate:  # type: ignore[override]
        """:data:`DRAFTS` drafts from this context's prompt (a revision resends the draft with
        the feedback), and one committee round on the blueprint that passes the checks."""
        first = tokens(self.messages(env, context), Draft.model_json_schema())
        revised = first + DRAFT + tokens(self.texts.source("revise.md")) + DRAFT
        generator = RoleLoad(calls=DRAFTS, prompt_tokens=(first + (DRAFTS - 1) * revised) / DRAFTS,
                             completion_tokens=DRAFT)
        roles = {"generator": generator, **self.committee_estimate(env, DRAFT)}
        return ItemEstimate(roles=roles, sequential=DRAFTS + 1)

    def messages(self, env, context: BlueprintContext) -> list[dict[str, Any]]:
        """The generator's first prompt."""
        system = self.texts.render("generator.system.md", policy=env.prompt[:self.config.policy_chars])
        return [{"role": "system", "content": system},
                {"role": "user", "content": self.texts.render(
                    "generate.md", context=context, tools=tool_schemas(env, None),
                    examples=[e.model_dump(exclude={"persona"}) for e in context.examples])}]

    async def make(self, ctx, context: BlueprintContext) -> BlueprintResult:
        messages = self.messages(ctx.env, context)
        result = BlueprintResult(id=context.id, status="rejected")
        fixes = reviews = 0
        while True:
            outcome = await ctx.llm.structured(messages, Draft, role="generator")
            if not outcome.ok:
                return result.model_copy(update={"status": outcome.status.value, "error": outcome.error})
            draft = outcome.value
            blueprint, problems, execution = validate(ctx.env, draft)
            attempt = Attempt(round=len(result.attempts), problems=problems, diff=execution.diff,
                              blueprint=(blueprint or _as_blueprint(draft, context.persona)))
            attempt.blueprint.persona = context.persona
            execution.close()
            if not problems:
                error = await self.review(ctx, attempt)
                if error is not None:
                    return result.model_copy(update={"status": failure_status(error), "error": error})
            else:
                attempt.feedback = problems_feedback(problems)
            result.attempts.append(attempt)
            if not attempt.problems:
                result.status, result.blueprint = "accepted", attempt.blueprint
                return result
            by_committee = attempt.stage == "committee"
            if (reviews if by_committee else fixes) >= (self.config.review_rounds if by_committee
                                                         else self.config.fix_rounds):
                return result
            if by_committee:
                reviews += 1
            else:
                fixes += 1
            messages = messages + [
                {"role": "assistant", "content": draft.model_dump_json()},
                {"role": "user", "content": self.texts.render(
                    "revise.md", previous=draft.model_dump(), feedback=attempt.feedback)}]
