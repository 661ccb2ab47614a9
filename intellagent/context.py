"""What a step sees while it computes one item: the environment, its declared model roles, a
random source derived from the item, a memo for partial results, and the agent under test."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar

from pydantic import BaseModel

from intellagent.environment import Environment
from intellagent.errors import IntellagentError
from intellagent.hashing import content_hash
from intellagent.llm import LLM
from intellagent.llm.types import ChatReply, Outcome, Status
from intellagent.events import Observe
from intellagent.offload import Offload
from intellagent.store import Store

M = TypeVar("M", bound=BaseModel)


class StepLLM:
    """The run's models as one step may use them: only the roles it declares, every call
    accounted to the step."""

    def __init__(self, llm: LLM, step: str, roles: dict[str, str], item: str | None = None,
                 parent: "StepLLM | None" = None, draw: str | None = None) -> None:
        self._llm = llm
        self.step = step
        self.roles = roles
        self.item = item
        self.draw = draw  # what the item is about (its inputs): another item, another draw
        self.parent = parent  # the step's own handle, when this one is its agent's
        self.refused_for_budget = False  # a call of this item was not made: the budget was spent

    def _check(self, role: str) -> None:
        if role not in self.roles:
            raise IntellagentError(f"calls model role '{role}', which it does not declare "
                                   f"(declared: {', '.join(self.roles) or 'none'})",
                                   item=f"step {self.step}")

    async def chat(self, messages: list[dict[str, Any]], *, role: str,
                   tools: list[dict[str, Any]] | None = None,
                   tool_choice: Any = None, sample: Any = None) -> Outcome[ChatReply]:
        """A chat completion for a declared role. ``sample`` (e.g. a candidate's number) makes
        this call another draw of a question this item asks more than once."""
        self._check(role)
        return self._note(await self._llm.chat(messages, role=role, stage=self.step, tools=tools,
                                               tool_choice=tool_choice, item=self.item,
                                               sample=self._sample(sample)))

    async def structured(self, messages: list[dict[str, Any]], response_model: type[M], *,
                         role: str, sample: Any = None) -> Outcome[M]:
        """An instance of ``response_model`` from a declared role (``sample`` as for ``chat``)."""
        self._check(role)
        return self._note(await self._llm.structured(messages, response_model, role=role,
                                                     stage=self.step, item=self.item,
                                                     sample=self._sample(sample)))

    def _sample(self, sample: Any) -> str | None:
        """Every call is a draw of its item's inputs: two items asking the same question (two
        trials of one task) get answers of their own, while the same inputs asked again (a resumed
        run, or a run that changed only another role's model) get the cached answers."""
        parts = [p for p in (self.draw, None if sample is None else str(sample)) if p]
        return "/".join(parts) or None

    def _note(self, outcome: Outcome) -> Outcome:
        if outcome.status is Status.budget_exhausted:
            self.refused_for_budget = True
            if self.parent is not None:
                self.parent.refused_for_budget = True
        return outcome

    def settings_for(self, role: str) -> Any:
        self._check(role)
        return self._llm.settings_for(role)

    @property
    def budget_exhausted(self) -> bool:
        return self._llm.budget_exhausted


@dataclass
class StepContext:
    """Given to :meth:`intellagent.steps.Step.run`. ``key`` is the item's content key (what
    the result is cached under); ``item`` its position key in the run (``E0004``)."""

    env: Environment
    llm: StepLLM
    seed: int
    key: str
    item: str
    run_id: str | None
    step: str
    offload: Offload | None = field(repr=False, default=None)  # threads for blocking calls
    observe: Observe | None = field(repr=False, default=None)  # told of agent turns, tool calls
    #: In a replay (``intellagent replay``), what this step recorded for this item in the replayed
    #: run (:class:`intellagent.replay.Recorded`); None otherwise.
    recorded: Any = field(repr=False, default=None)
    _store: Store = field(repr=False, default=None)  # type: ignore[assignment]
    _agent: Callable[..., Any] | None = field(repr=False, default=None)
    _mutants: list[Any] = field(repr=False, default_factory=list)  # a mutant run's, one a conversation
    _memo_scope: Any = field(repr=False, default=None)

    @property
    def step_plugin(self) -> str:
        """The plugin this step runs, by its own name (``weighted-walk``), for seeds and memos."""
        return self._memo_scope[0] if self._memo_scope else self.step

    def rng(self, *parts: Any) -> random.Random:
        """A random source for one decision, derived from the run seed, this item's content key
        and what it is for: the same inputs give the same choices in every process."""
        return random.Random(content_hash(self.seed, self.key, *parts))

    def seeded(self, *parts: Any) -> random.Random:
        """A random source from the run seed and ``parts`` alone, not the item's whole key: for
        a step whose early choices must not change when an option such as a count grows."""
        return random.Random(content_hash(self.seed, self.step_plugin, *parts))

    def agent(self, ground_truth: Any = None) -> Any:
        """A new agent under test for one conversation. ``ground_truth`` reaches only reference
        agents that declare ``needs_ground_truth``; agents under test are built without it."""
        if self._agent is None:
            raise IntellagentError("uses the agent under test but does not declare uses_agent",
                                   item=f"step {self.step}")
        return self._agent(ground_truth)

    def recall(self, *parts: Any) -> Any:
        """A partial result remembered across runs (e.g. one edge score of a graph), or None.
        It is keyed by this step's plugin and version, its roles' models and ``parts``."""
        stored = self._store.artefact("memo", content_hash(self._memo_scope, parts))
        return None if stored is None else json.loads(stored)

    def remember(self, *parts_and_value: Any) -> None:
        """``remember(*parts, value)``: keep a JSON-able partial result for :meth:`recall`."""
        *parts, value = parts_and_value
        self._store.put_artefact("memo", content_hash(self._memo_scope, parts), json.dumps(value),
                                 run_id=self.run_id)

    def database(self, rows: Any = ()) -> Any:
        """A fresh copy of the environment's seed database with ``rows`` (``Row``s) put on
        top; None when the environment has no database."""
        return self.env.database_with(rows)

    def lent_database(self, rows: Any = ()) -> Any:
        """``database(rows)`` lent for a ``with`` block, its writes undone at the end (see
        ``Environment.lent_database``): for a database the item does not keep."""
        return self.env.lent_database(rows)
