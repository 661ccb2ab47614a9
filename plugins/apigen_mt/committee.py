"""Stage 2 of blueprint validation: a committee of LLM judges.

Each member (a model role, or another sample of the same one) scores the task 0/1 on
correctness, completeness, satisfaction and creativity, with a reason, seeing the instruction,
the actions, the outputs, the tools used and the diff patch. A metric passes by strict majority
(a tie fails). The task is accepted when the required metrics pass and at least ``threshold``
metrics pass; otherwise the reasons of the members who scored a failing metric 0 are its
consolidated feedback.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from intellagent.model import StrictModel

from intellagent_plugins.apigen_mt.artefacts import METRICS, Problem, Review


ROLES = {"reviewer": "a member of the review committee that scores each blueprint",
         "reviewer-2": "a second committee model (when members name it)",
         "reviewer-3": "a third committee model (when members name it)"}


class CommitteeConfig(StrictModel):
    members: list[str] = Field(default_factory=lambda: ["reviewer", "reviewer", "reviewer"],
                               min_length=1, description="The model role of each member; a role "
                               "named twice is sampled twice (reviewer, reviewer-2, reviewer-3 "
                               "may be three models).")
    threshold: int = Field(default=3, ge=1, le=4, description="Metrics that must pass by majority.")
    required: list[str] = Field(default_factory=lambda: ["correctness", "completeness"],
                                description="Metrics that must pass whatever the count.")

    @field_validator("members")
    @classmethod
    def _known_roles(cls, value: list[str]) -> list[str]:
        unknown = [m for m in value if m not in ROLES]
        if unknown:
            raise ValueError(f"'{unknown[0]}' is not a committee role ({', '.join(ROLES)})")
        return value

    @field_validator("required")
    @classmethod
    def _known_metrics(cls, value: list[str]) -> list[str]:
        unknown = [m for m in value if m not in METRICS]
        if unknown:
            raise ValueError(f"'{unknown[0]}' is not a committee metric ({', '.join(METRICS)})")
        return value




def vote(reviews: list[Review]) -> dict[str, int]:
    """Majority per metric: 1 when more than half of the members scored it 1."""
    return {m: int(sum(getattr(r, m).score for r in reviews) * 2 > len(reviews)) for m in METRICS}


def decide(config: CommitteeConfig, reviews: list[Review]) -> tuple[dict[str, int], list[Problem], str]:
    """(votes, problems, consolidated feedback); no problems means accepted."""
    votes = vote(reviews)
    failing = [m for m in METRICS if not votes[m]]
    accepted = sum(votes.values()) >= config.threshold and all(votes[m] for m in config.required)
    if accepted:
        return votes, [], ""
    problems, lines = [], []
    for m in failing:
        reasons = [getattr(r, m).reason.strip() for r in reviews if getattr(r, m).score == 0]
        reasons = [r for r in dict.fromkeys(reasons) if r]
        problems.append(Problem(stage="committee", reason=m, message=f"{m}: " + ("; ".join(reasons) or "scored 0")))
        lines.append(f"- {m}: " + (" / ".join(reasons) or "scored 0 by the majority"))
    return votes, problems, "The review committee rejected the task:\n" + "\n".join(lines)
