"""The step protocol: what a pipeline step plugin declares and returns.

A step plugin is a class registered through ``register_stages``. It declares its stage ``kind``
(the vocabulary of the design: extractor, sampler, generator, simulator, critic), its ``name``,
its options model (``Config``, ``extra="forbid"``), its typed ``inputs`` and ``output``, the LLM
``roles`` it calls (with a one-line description each) and whether it talks to the agent under
test. The runner passes exactly the declared inputs to :meth:`Step.run`, caches the result under
a content hash of everything that shapes it, and resumes from the store. A step never calls
another step or the store.
"""

from __future__ import annotations

from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, Field, model_validator

from intellagent.model import StrictModel

STEP_KINDS = ("extractor", "sampler", "generator", "simulator", "critic")

#: Statuses of an item that was not finished: never cached, retried by the next run (a model's
#: output that did not fit is asked again with another seed).
UNFINISHED = ("infra-error", "invalid-output", "budget-exhausted")

#: The status of an item made without all it needed (a model call it made failed for good, so
#: a part is missing or stands in): its value goes on to the later steps of the run
#: that made it, and no other run reuses it (the next one makes it again). Counted apart.
DEGRADED = "degraded"

#: Statuses of an item that a later run makes again rather than reuse.
REMADE = (*UNFINISHED, DEGRADED)

T = TypeVar("T")


class NoOptions(StrictModel):
    """A plugin that takes no options still refuses unknown ones."""


class Statuses(StrictModel):
    """What the statuses of a step's items or of a score mean: ``passed`` and ``failed`` count in
    a rate (the thing tested did the job, or did not); ``other`` are neither (not exercised, an
    invalid scenario) and are counted apart. The unfinished statuses (``infra-error``,
    ``invalid-output``, ``budget-exhausted``) and ``degraded`` are always possible and never
    count."""

    passed: list[str] = Field(default_factory=list)
    failed: list[str] = Field(default_factory=list)
    other: list[str] = Field(default_factory=list)
    unjudged: list[str] = Field(default_factory=list, description="Of ``other``, those given without "
                                "any judgement of the thing (the simulation broke first, so no judge "
                                "looked): `intellagent calibrate` leaves them out of agreement, kappa, "
                                "precision and recall, as they say nothing of the judge.")

    @model_validator(mode="after")
    def _unjudged_are_other(self) -> "Statuses":
        stray = [s for s in self.unjudged if s not in self.other]
        if stray:
            raise ValueError(f"unjudged statuses must be among other: {', '.join(stray)}")
        return self

    def all(self) -> list[str]:
        return [*self.passed, *self.failed, *self.other]


#: The statuses of a step that makes things (``ok``), and of a pass/fail judgement.
MADE = Statuses(passed=["ok"])
PASS_FAIL = Statuses(passed=["pass"], failed=["fail"])


class ScoreSpec(StrictModel):
    """A score a step declares (as Inspect's ``@scorer(metrics=...)``): its statuses (None for a
    score that is only a value), whether it carries a ``value``, and the labels it is grouped
    by. Metrics read the statuses from here; ``validate`` refuses a metric naming a score or a
    status no step declares."""

    statuses: Statuses | None = None
    value: bool = False
    labels: list[str] = Field(default_factory=list)
    description: str = ""
    subject: str | None = Field(default=None, description="The label naming what the score "
                                "judges within its item, when an item has one such score per "
                                "thing judged (one per rule under test): people's labels for "
                                "`intellagent calibrate` name it in a column of that name.")


def merge_scores(a: ScoreSpec, b: ScoreSpec) -> ScoreSpec:
    """One score declared by two steps: the statuses of both (a status passed by one and failed
    by the other is the first's)."""
    if a.statuses is None or b.statuses is None:
        statuses = a.statuses or b.statuses
    else:
        taken = set(a.statuses.all())
        statuses = Statuses(passed=a.statuses.passed + [s for s in b.statuses.passed if s not in taken],
                            failed=a.statuses.failed + [s for s in b.statuses.failed if s not in taken],
                            other=a.statuses.other + [s for s in b.statuses.other if s not in taken],
                            unjudged=a.statuses.unjudged + [s for s in b.statuses.unjudged if s not in taken])
    return ScoreSpec(statuses=statuses, value=a.value or b.value,
                     labels=a.labels + [label for label in b.labels if label not in a.labels],
                     description=a.description or b.description, subject=a.subject or b.subject)


class RoleLoad(BaseModel):
    """What one item asks of one model role: calls, and tokens per call."""

    calls: float = 0.0
    prompt_tokens: float = 0.0
    completion_tokens: float = 0.0


class ItemEstimate(BaseModel):
    """What one item of a step costs, for ``--estimate``: its calls per role (``agent``: the
    agent under test's role, when it has one), the elements of its list (a list output), and
    how many of its calls come one after another (for the wall time)."""

    roles: dict[str, RoleLoad] = Field(default_factory=dict)
    outputs: float | None = None
    #: ``outputs`` is what the step's options ask for (``events: 30``), which an earlier run's
    #: count does not replace; False: a guess (tests cut from a conversation) that it does
    outputs_fixed: bool = True
    #: Elements of its list per element of the lists it gathers (say, one per input × its trials),
    #: for a step whose list is made of its inputs': the estimate multiplies it by their items
    per_input: float | None = None
    sequential: float = 0.0

    @classmethod
    def mean(cls, estimates: list["ItemEstimate"]) -> "ItemEstimate | None":
        """What one of ``estimates``' items costs on average (tokens per call weighted by the
        calls), None without any."""
        if not estimates:
            return None
        roles: dict[str, RoleLoad] = {}
        for role in {r for e in estimates for r in e.roles}:
            loads = [e.roles[role] for e in estimates if role in e.roles]
            calls = sum(x.calls for x in loads)
            roles[role] = RoleLoad(calls=calls / len(estimates),
                                   prompt_tokens=sum(x.calls * x.prompt_tokens for x in loads) / calls if calls else 0.0,
                                   completion_tokens=sum(x.calls * x.completion_tokens for x in loads) / calls
                                   if calls else 0.0)
        outputs = [e for e in estimates if e.outputs is not None]
        return cls(roles=roles, outputs=sum(e.outputs for e in outputs) / len(outputs) if outputs else None,
                   outputs_fixed=all(e.outputs_fixed for e in outputs),
                   per_input=next((e.per_input for e in estimates if e.per_input is not None), None),
                   sequential=sum(e.sequential for e in estimates) / len(estimates))


class Score(BaseModel):
    """One judgement of an item, for metric plugins to reduce.

    ``status`` is a label such as ``pass``/``fail``/``infra-error``; ``value`` a number (a count,
    a similarity); ``labels`` say what to group by (``{"complexity": 5, "category": [...]}``: a
    list value counts the score in each of its groups).
    """

    name: str
    status: str | None = None
    value: float | None = None
    labels: dict[str, Any] = Field(default_factory=dict)
    note: str = Field(default="", description="Why (a judge's reason), for reports.")


class Output(BaseModel, Generic[T]):
    """What a step returns when it has more to say than the value itself.

    ``status`` is the item's status at this step (``ok`` by default); ``halt`` stops the item's
    later steps (an invalid scenario is not simulated); unfinished statuses (``infra-error``,
    ``invalid-output``, ``budget-exhausted``) always halt and are never cached. ``degraded``: the
    value is usable but a model call it needed failed (a part is missing): later steps of this run
    get it, the next run makes it again. ``scores`` feed the metrics.
    """

    value: T
    status: str = "ok"
    halt: bool = False
    scores: list[Score] = Field(default_factory=list)
    note: str = Field(default="", description="Why, for a status other than ok.")
    warnings: list[str] = Field(default_factory=list, description="What a person should look at "
                                "although the item went through (a part skipped, a suspicious "
                                "answer); the report counts and shows them.")

    @property
    def halts(self) -> bool:
        return self.halt or self.status in UNFINISHED


class Step:
    """Base class of step plugins. Subclasses set the class attributes and implement ``run``.

    ``inputs`` maps input names to types: a pydantic model ``T``, ``list[T]``, or ``T | None`` for
    an input the pipeline may leave unwired. ``output`` is ``T`` or ``list[T]``; a step that runs
    ``each`` item of a list output runs once per element. ``statuses`` says what its items'
    statuses mean (progress counts the ones not passed), ``scores`` the scores it gives.
    """

    kind: ClassVar[str]
    name: ClassVar[str]
    version: ClassVar[str] = "1"
    description: ClassVar[str] = ""
    Config: ClassVar[type[StrictModel]] = NoOptions
    inputs: ClassVar[dict[str, Any]] = {}
    output: ClassVar[Any] = None
    roles: ClassVar[dict[str, str]] = {}
    uses_agent: ClassVar[bool] = False
    #: It can replay what it recorded for an item against another agent (``ctx.recorded``).
    replays: ClassVar[bool] = False
    #: The statuses its items end with (besides the unfinished ones), and what each means.
    statuses: ClassVar[Statuses] = MADE
    #: The scores it gives, by name. A score it gives and does not declare is an error.
    scores: ClassVar[dict[str, ScoreSpec]] = {}
    #: How to get a useful run when few or none of its items are usable (say, the model it needs
    #: to make them); shown beside the shortfall in the summary and the report.
    empty_hint: ClassVar[str] = ""

    def __init__(self, config: StrictModel) -> None:
        self.config = config

    def fingerprint(self) -> Any:
        """What else shapes this step's results beyond its options (e.g. the text of prompt files
        a user may edit); part of its items' cache key. None by default."""
        return None

    def prompt_files(self) -> list[Any]:
        """The :class:`~intellagent.prompts.PromptFiles` this step renders (by default those it
        holds as attributes): a file in a prompts folder that no step reading it renders is
        refused when the plan is made. Override it where a step keeps them elsewhere."""
        from intellagent.prompts import held_by

        return held_by(self)

    def estimate(self, env: Any) -> ItemEstimate | None:
        """What one item costs, for ``run --estimate`` (None: one call per role with the
        environment's prompt; a finished run of the pipeline in the workspace corrects it)."""
        return None

    def estimate_item(self, env: Any, **inputs: Any) -> ItemEstimate | None:
        """What the item of these inputs costs, for ``run --estimate`` where its walk of the plan
        knows them (the elements of a sampler's list, say: the sets and the limit a run picks);
        None: :meth:`estimate`'s figure for every item. An estimate that asks no call (its
        inputs carry what the step would ask a model for) has the walk make the item, as it
        makes a sampler's, so the lists after it are counted rather than guessed."""
        return None

    def label_values(self, env: Any) -> dict[str, list[Any]]:
        """Score labels whose every value this step fixes before the run (from its options, the
        environment or the data it reads), each with those values: the scores it gives, or the
        later steps give on what it made, carry no other. A gate naming another group of a metric
        grouped by such a label is refused before the run. None fixed by default."""
        return {}

    def check(self, env: Any) -> str | None:
        """A problem with this step's options in ``env`` (say, a tool the environment does not
        have), or None. Checked before a run's first item and by ``intellagent validate ENV
        --pipeline P``, so options that cannot work cost no model call."""
        return None

    async def run(self, ctx: Any, **inputs: Any) -> Any:
        """Compute one item from exactly the declared inputs; return the value or an
        :class:`Output`. Raise :class:`~intellagent.errors.IntellagentError` for bad input that
        should stop the run with one clear line."""
        raise NotImplementedError


# Named base classes per kind, for readability of plugin code.
class Extractor(Step):
    kind = "extractor"


class Sampler(Step):
    kind = "sampler"


class Generator(Step):
    kind = "generator"


class Simulator(Step):
    kind = "simulator"


class Critic(Step):
    kind = "critic"
