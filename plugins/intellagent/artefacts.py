"""The IntellAgent pipeline's artefacts: policies and their graph, event specs, events (the
dialogue kit's scenarios with the policies under test), reviewed dialogs, verdicts."""

from __future__ import annotations

import hashlib
from typing import Any, Literal

import networkx as nx
from pydantic import BaseModel, Field

from intellagent_plugins.dialogue.dialog import Dialog
from intellagent_plugins.dialogue.scenario import Scenario

CATEGORIES = (
    "authentication/access control", "data privacy", "legal/compliance", "payment/financial",
    "tool usage", "logical/numerical reasoning", "response formatting", "knowledge extraction",
    "user consent", "escalation/handoff", "policy enforcement/restriction", "offensive content",
    "sexual content", "harassment", "fraud/malicious use", "misinformation", "company policy",
    "other",
)
Category = Literal[CATEGORIES]  # type: ignore[valid-type]


class Policy(BaseModel):
    id: str = Field(description="Stable id, e.g. 'P3'.")
    flow: str
    flows: list[str] = Field(default_factory=list, description="Every flow the policy was stated "
                             "in (near-duplicates merged into it), the first being ``flow``.")
    text: str = Field(description="Self-contained statement of the policy.")
    category: Category
    challenge: int = Field(ge=1, le=5, description="How hard it is for an agent to follow.")

    @property
    def text_hash(self) -> str:
        return hashlib.sha256(self.text.strip().lower().encode()).hexdigest()[:16]


class Edge(BaseModel):
    a: str
    b: str
    weight: float = Field(ge=0, le=10, description="Likelihood (0-10) the two meet in one dialog.")


class PolicyGraph(BaseModel):
    """Policies (nodes, with challenge scores) and symmetric co-occurrence weights (edges)."""

    environment: str
    task: str
    flows: list[str]
    policies: list[Policy]
    edges: list[Edge] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list, description="Parts that could not be "
                                "extracted (a flow's policies, edge scores), left out or at 0.")
    notes: list[str] = Field(default_factory=list, description="What the extractor merged (near-"
                             "duplicate policies) and dropped (statements that are not rules).")

    def policy(self, pid: str) -> Policy:
        return next(p for p in self.policies if p.id == pid)

    def to_networkx(self) -> nx.Graph:
        graph = nx.Graph()
        for p in self.policies:
            graph.add_node(p.id, challenge=p.challenge, category=p.category)
        for e in self.edges:
            if e.weight > 0:
                graph.add_edge(e.a, e.b, weight=e.weight)
        return graph

    def weight(self, a: str, b: str) -> float:
        for e in self.edges:
            if {e.a, e.b} == {a, b}:
                return e.weight
        return 0.0


class EventSpec(BaseModel):
    """A sampled set of policies for one event."""

    id: str
    policies: list[str]
    target_complexity: int
    complexity: int
    teleports: int = Field(default=0, description="Jumps made because the walk hit a dead end.")


class Symbol(BaseModel):
    symbol: str = Field(description="e.g. U1, O1, R1")
    table: str
    key: str = Field(description="The row's primary key in the event database.")
    role: str
    new: bool = Field(description="True when the generator made the row for this event.")


class EventPolicy(BaseModel):
    """A policy an event puts to the test, with the behaviour expected from the agent."""

    id: str
    text: str
    category: Category
    challenge: int
    expected: str = ""


ExpectationKind = Literal["field-equals", "field-changes", "row-unchanged", "row-removed", "row-added"]


class Expectation(BaseModel):
    """One thing a correct agent leaves in the database, checked against the dialog's diff."""

    kind: ExpectationKind
    entity: str = Field(default="", description="The record's symbol (U1), for all but row-added.")
    table: str = ""
    key: str = Field(default="", description="The record's key (resolved from its symbol).")
    field: str = Field(default="", description="Dotted path inside the record (field-*).")
    value: Any = Field(default=None, description="field-equals: the final value; row-added: the "
                                                 "fields the new row must have.")

    def describe(self) -> str:
        where = f"{self.table}[{self.key}]" if self.key else self.table
        if self.kind == "field-equals":
            return f"{where}.{self.field} becomes {self.value!r}"
        if self.kind == "field-changes":
            return f"{where}.{self.field} changes"
        if self.kind == "row-added":
            return f"a new {self.table} row with {self.value!r}"
        return f"{where} {'is unchanged' if self.kind == 'row-unchanged' else 'is removed'}"


class Event(Scenario):
    """A scenario with the policies it puts to the test and the behaviour expected for each, and
    its own initial database: the environment's seed rows (background data, so lookups can go
    wrong) plus ``rows``."""

    spec: EventSpec
    status: Literal["ok", "invalid", "infra-error", "invalid-output", "budget-exhausted"] = "ok"
    error: str | None = None
    policies: list[EventPolicy] = Field(default_factory=list, description="The policies under "
                                        "test and the behaviour expected for each.")
    symbols: list[Symbol] = Field(default_factory=list)
    end_state: list[Expectation] = Field(default_factory=list, description="What a correct agent "
                                         "leaves in the database; checked on the dialog's diff.")
    repairs: int = 0


class ReviewedDialog(Dialog):
    """A dialog whose user's stops a reviewer checked (``policy-user``)."""

    feedback_rounds: int = Field(default=0, description="Times the reviewer sent the user back.")
    stop_disputed: bool = Field(default=False, description="The reviewer still disagreed with the "
                                                           "user's stop after the last feedback.")


class Violation(BaseModel):
    policy: str
    reason: str


class PolicyJudgement(BaseModel):
    """The judge's view of one policy under test."""

    id: str
    exercised: bool
    violated: bool
    reason: str = ""


class ExpectationResult(BaseModel):
    expectation: str
    ok: bool
    detail: str = ""


class StateCheck(BaseModel):
    """The expected end state checked against the dialog's database diff."""

    status: Literal["pass", "fail", "none"] = Field(description="none: the event expects nothing.")
    results: list[ExpectationResult] = Field(default_factory=list)


VerdictStatus = Literal["pass", "fail", "not-exercised", "agent-error", "simulator-error",
                        "infra-error", "invalid-output", "budget-exhausted"]

#: What made an event fail: the user's confirmed stop was not a success (``stop``), a policy was
#: judged violated (``policy``), the expected end state does not hold (``state``), or the agent
#: crashed (``agent-error``).
FailedBy = Literal["stop", "policy", "state", "agent-error"]


class Verdict(BaseModel):
    """How an event went. It passes only when the user's stop was confirmed as a success, no
    exercised policy was judged violated and the expected end state holds (where the event has
    one); ``failed`` says which of these did not. ``not-exercised``: it would have passed, but
    none of its policies came up. ``agent-error``: the agent under test crashed (counted against
    it). ``simulator-error``: the simulated user kept stopping for a wrong reason.
    ``infra-error``: a model of ours failed; ``invalid-output``: its answer did not fit (neither
    counts against the agent). ``confirmed_stop`` is the method's own score (the paper's and the
    original's): the user's confirmed stop alone."""

    id: str
    status: VerdictStatus
    reason: str = ""
    failed: list[FailedBy] = Field(default_factory=list, description="What failed, for a failing "
                                   "event: the stop, a policy, the end state (or the agent crashed).")
    confirmed_stop: VerdictStatus | None = Field(default=None, description="The method's own "
                                                 "score: the user's confirmed stop decides.")
    stop: str = Field(default="", description="The dialog's stop reason.")
    completed: bool | None = Field(default=None, description="The judge: was the request "
                                                             "completed as a correct agent would?")
    judgements: list[PolicyJudgement] = Field(default_factory=list)
    exercised: list[str] = Field(default_factory=list)
    violated: list[Violation] = Field(default_factory=list)
    state: StateCheck = Field(default_factory=lambda: StateCheck(status="none"))
