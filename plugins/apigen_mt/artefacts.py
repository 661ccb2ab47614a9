"""APIGen-MT's artefacts: the API dependency graph, the context a blueprint is generated from,
blueprints with the record of every validation round, recombination pairs, trajectories."""

from __future__ import annotations

import json
from typing import Any, Literal

import networkx as nx
from pydantic import BaseModel, Field

from intellagent_plugins.dialogue.dialog import Dialog
from intellagent_plugins.tau_bench.artefacts import TaskEvent, TaskSpec, TauTask

Stage = Literal["format", "execution", "policy", "committee", "conflict"]
METRICS = ("correctness", "completeness", "satisfaction", "creativity")


class ToolNode(BaseModel):
    name: str
    writes: bool = Field(description="The tool changes the database (a write tool).")
    terminal: bool = False
    inputs: list[str] = Field(default_factory=list, description="Its parameter names.")


class ApiEdge(BaseModel):
    """B's input ``via`` can come from A's output."""

    a: str
    b: str
    via: list[str]


class Rule(BaseModel):
    """A rule of the domain's policy: an executable check (``check`` is its id) or a section of
    the agent's policy text."""

    id: str
    text: str
    check: bool = False


class ApiGraph(BaseModel):
    """Tools as nodes (read or write), an edge A → B when B's inputs can come from A's outputs
    and the policy allows B after A; and the domain's rules for the policy sampler."""

    environment: str
    tools: list[ToolNode]
    edges: list[ApiEdge] = Field(default_factory=list)
    rules: list[Rule] = Field(default_factory=list)
    subject: str | None = Field(default=None, description="The table whose rows are the users "
                                "tasks are for (the one most other tables refer to).")

    def to_networkx(self) -> nx.DiGraph:
        graph = nx.DiGraph()
        for tool in self.tools:
            graph.add_node(tool.name, writes=tool.writes)
        for edge in self.edges:
            graph.add_edge(edge.a, edge.b, via=edge.via)
        return graph

    @property
    def write_tools(self) -> list[str]:
        return [t.name for t in self.tools if t.writes]


class Call(BaseModel):
    """One ground-truth action: a tool and its arguments."""

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class Blueprint(BaseModel):
    """A task blueprint: thought, instruction q, ground-truth actions a_gt, expected outputs o_gt,
    and whom it is for."""

    thought: str = ""
    user_id: str = ""
    instruction: str = ""
    actions: list[Call] = Field(default_factory=list)
    outputs: list[str] = Field(default_factory=list)
    persona: str = ""


class BlueprintContext(BaseModel):
    """What one blueprint is generated from: the samplers' picks for this iteration."""

    id: str
    user_id: str = ""
    walk: list[str] = Field(default_factory=list, description="The API graph walk (tool names).")
    write_tools: list[str] = Field(default_factory=list, description="API sampler: write tools to include.")
    rules: list[Rule] = Field(default_factory=list, description="Policy sampler: rules that apply.")
    data: dict[str, dict[str, Any]] = Field(default_factory=dict, description="Domain-data sampler: "
                                            "records by table and key.")
    persona: str = Field(default="", description="Persona sampler.")
    examples: list[Blueprint] = Field(default_factory=list, description="Example sampler.")
    samplers: dict[str, bool] = Field(default_factory=dict, description="Which samplers this "
                                      "iteration used (their frequencies vary).")


class Judgement(BaseModel):
    score: Literal[0, 1]
    reason: str = ""


class Review(BaseModel):
    """One committee member's review: 0/1 with a reason per metric."""

    correctness: Judgement = Field(description="The actions do what the instruction asks, "
                                   "correctly, and follow the policy.")
    completeness: Judgement = Field(description="The instruction gives every detail the actions "
                                    "need, and the actions cover the whole request.")
    satisfaction: Judgement = Field(description="A user with this instruction would be satisfied "
                                    "by these actions and outputs.")
    creativity: Judgement = Field(description="The task is realistic and not trivial.")


class Problem(BaseModel):
    stage: Stage
    reason: str = Field(description="A category: missing-part, invalid-json, unknown-tool, "
                        "bad-arguments, refused, unsupported-output, tests-nothing, a rule id, "
                        "a committee metric.")
    message: str


class Attempt(BaseModel):
    """One round: the blueprint as it stood, what rejected it (nothing when accepted), the
    committee's reviews and the state diff its actions made."""

    round: int
    blueprint: Blueprint
    problems: list[Problem] = Field(default_factory=list)
    reviews: list[Review] = Field(default_factory=list)
    votes: dict[str, int] = Field(default_factory=dict, description="Majority outcome per metric (0/1).")
    diff: str = ""
    feedback: str = ""

    @property
    def stage(self) -> str | None:
        return self.problems[0].stage if self.problems else None


class BlueprintResult(BaseModel):
    """A blueprint through validation, review and refinement: accepted or rejected, every round
    kept."""

    id: str
    kind: Literal["single", "combined"] = "single"
    status: Literal["accepted", "rejected", "infra-error", "invalid-output", "budget-exhausted"]
    blueprint: Blueprint | None = None
    attempts: list[Attempt] = Field(default_factory=list)
    parts: list[str] = Field(default_factory=list, description="Combined: the blueprints joined.")
    error: str | None = None

    @property
    def first_try(self) -> bool:
        return self.status == "accepted" and len(self.attempts) == 1


class Pair(BaseModel):
    """Two accepted blueprints of the same user, to join into one longer task."""

    id: str
    user_id: str
    first: BlueprintResult
    second: BlueprintResult


class BlueprintTask(TauTask):
    """A τ-bench task made from an accepted blueprint: which one, and whether it joins two."""

    blueprint: str
    kind: Literal["single", "combined"] = "single"
    persona: str = ""


class BlueprintTaskSpec(TaskSpec):
    task: BlueprintTask


class BlueprintTaskEvent(TaskEvent):
    blueprint: str
    kind: Literal["single", "combined"] = "single"


class Trajectory(Dialog):
    """A simulated dialog with the agent's exact messages and tools, for training export."""

    messages: list[dict[str, Any]] = Field(default_factory=list)
    tools: list[dict[str, Any]] = Field(default_factory=list)
    candidates: int = Field(default=1, description="User replies sampled per turn.")

    def signature(self) -> str:
        """What makes two trajectories the same: the messages after the system prompt."""
        import hashlib

        text = json.dumps(self.messages[1:], sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(text.encode()).hexdigest()[:16]
