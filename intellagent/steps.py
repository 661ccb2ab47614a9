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

from pydantic import BaseModel, Field

from intellagent.model import StrictModel

STEP_KINDS = ("extractor", "sampler", "generator", "simulator", "critic")
STAGE_KINDS = STEP_KINDS + ("reporter",)

#: Statuses of an item that was not finished: never cached, retried by the next run.
UNFINISHED = ("infra-error", "budget-exhausted")

T = TypeVar("T")


class NoOptions(StrictModel):
    """A plugin that takes no options still refuses unknown ones."""


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
    ``budget-exhausted``) always halt and are never cached. ``scores`` feed the metrics.
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
    ``each`` item of a list output runs once per element.
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

    def __init__(self, config: StrictModel) -> None:
        self.config = config

    def fingerprint(self) -> Any:
        """What else shapes this step's results beyond its options (e.g. the text of prompt files
        a user may edit); part of its items' cache key. None by default."""
        return None

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
