"""What flows between ALMITA's steps: intents, procedures with their APIs, flowgraphs,
conversation graphs, sampled paths, written conversations, tests, the agent's predicted action
and the verdict on it.

Every artefact carries the identity of what it came from (``procedure`` is ``intent/P1``, a
conversation ``intent/P1/C03``), taken from content, never from the run's item keys, so a cached
item is right in any run that reuses it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

# --- intents and procedures ----------------------------------------------------------------


class Api(BaseModel):
    """An API a procedure needs: what the agent under test gets as a tool (its spec only)."""

    name: str
    description: str
    parameters: dict[str, Any] = Field(description="JSON Schema of the arguments (type: object).")
    output: str = Field(default="", description="What a call returns.")

    def tool(self) -> dict[str, Any]:
        """The API as an OpenAI chat-completions function."""
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                  "parameters": self.parameters}}


class Procedure(BaseModel):
    """Precise, conditional steps an agent must follow for one intent. ``apis`` is None until
    the APIs are known (given with the procedure, or extracted by the ``apis`` step)."""

    id: str = Field(description="P1, P2, … within its intent.")
    intent: str = Field(description="The intent's id (a slug).")
    intent_name: str
    text: str
    apis: list[Api] | None = None
    source: str | None = Field(default=None, description="The file it was read from, if given.")

    @property
    def key(self) -> str:
        return f"{self.intent}/{self.id}"


class Intent(BaseModel):
    """A reason a customer gets in touch ("order not received"), with its procedures when they
    were given rather than generated."""

    id: str = Field(description="A slug of the name: the run's item key.")
    name: str
    description: str = ""
    procedures: list[Procedure] = Field(default_factory=list)


class Rejection(BaseModel):
    """Why a generated artefact was discarded: the rule it broke and the detail."""

    rule: str
    detail: str

    def note(self) -> str:
        return f"rule {self.rule}: {self.detail}"


class CheckedProcedure(BaseModel):
    """A procedure after the API check: kept with its APIs, or rejected with the rule."""

    procedure: Procedure
    rejection: Rejection | None = None


# --- graphs -----------------------------------------------------------------------------------


class FlowNode(BaseModel):
    id: str
    type: str = Field(description="start_message, message, api or end_message.")
    text: str = Field(description="The agent's message, or what the API call does.")
    api: str | None = Field(default=None, description="For an api node: the API's name.")


class GraphEdge(BaseModel):
    source: str
    target: str
    text: str = Field(default="", description="Out of a message node: the user's message; out of an "
                                              "api node: one possible output of the call.")


class Flowgraph(BaseModel):
    """The procedure as a graph of agent messages and API calls, user messages and API outputs on
    the edges. ``rejection`` says which rule discarded it."""

    procedure: Procedure
    nodes: list[FlowNode]
    edges: list[GraphEdge]
    rejection: Rejection | None = None


class ConversationNode(BaseModel):
    id: str
    role: str = Field(description="assistant, user or api.")
    text: str
    api: str | None = Field(default=None, description="For an api node: the API's name.")
    noise: Literal["off-topic", "attack"] | None = Field(default=None, description="Inserted by the "
                                                         "noise step (the user's message and the "
                                                         "agent's refusal).")


class ConversationGraph(BaseModel):
    """Every conversation the procedure allows: assistant, user and api nodes, API outputs on the
    edges out of api nodes; the root is the agent's opening message, leaves are assistant nodes."""

    procedure: Procedure
    nodes: list[ConversationNode]
    edges: list[GraphEdge]
    rejection: Rejection | None = None
    noise_inserted: int = 0


# --- paths, conversations, tests -----------------------------------------------------------


class PathStep(BaseModel):
    node: str
    role: str
    text: str
    api: str | None = None
    output: str | None = Field(default=None, description="For an api node: the output on the edge "
                                                         "the path took.")
    noise: str | None = None


class ConversationPath(BaseModel):
    """One walk from the root to a leaf of a conversation graph."""

    id: str = Field(description="C01, C02, … within its procedure.")
    procedure: Procedure
    steps: list[PathStep]

    @property
    def conversation(self) -> str:
        return f"{self.procedure.key}/{self.id}"


class Message(BaseModel):
    """One message of a written conversation: the agent's reply, the user's message, or an API
    call with concrete arguments and the output it gave."""

    role: Literal["assistant", "user", "api"]
    text: str = ""
    api: str | None = None
    arguments: dict[str, Any] | None = None
    output: str | None = None
    noise: str | None = None


class Conversation(BaseModel):
    id: str = Field(description="intent/P1/C03: unique in the run.")
    procedure: Procedure
    messages: list[Message]
    rejection: Rejection | None = None


class Action(BaseModel):
    """What the agent does next: reply with text, or call an API with arguments."""

    kind: Literal["reply", "api", "none"]
    text: str = ""
    api: str | None = None
    arguments: dict[str, Any] | None = None


class TestCase(BaseModel):
    """A conversation cut after a user message or an API output: the context, and the agent's
    expected next action."""

    __test__ = False  # not a pytest class

    id: str = Field(description="T01, T02, … within its conversation.")
    conversation: str
    intent: str
    procedure: str
    context: list[dict[str, Any]] = Field(description="The messages so far (OpenAI chat format, "
                                                      "API calls as tool calls with their outputs).")
    expected: Action
    after_noise: bool = Field(default=False, description="The last user message is inserted noise.")
    conversation_tests: int | None = Field(default=None, ge=1, description="How many tests its "
                                           "conversation has (None in items made before it was recorded).")


class Prediction(BaseModel):
    """The agent's next action for one test (recorded, never executed)."""

    action: Action
    calls: int = Field(default=0, description="Tool calls the agent made in that turn (the first "
                                              "one is its action).")
    error: str | None = Field(default=None, description="The agent failed (agent-error).")


class TestVerdict(BaseModel):
    """The prediction against the expected action, flag by flag."""

    __test__ = False

    test: str
    conversation: str
    conversation_tests: int | None = Field(default=None, description="How many tests the conversation "
                                           "has: it counts for conversation correctness only when "
                                           "every one of them was scored.")
    intent: str
    expected: Literal["reply", "api", "none"]
    predicted: Literal["reply", "api", "none"]
    similarity: float | None = Field(default=None, description="Of the two replies, by the scorer.")
    threshold: float | None = None
    reply_recall: bool = False
    correct_reply: bool = False
    api_recall: bool = False
    correct_api: bool = False
    correct_parameters: bool = False
    correct: bool = False
    why: str = ""
    expected_action: Action | None = None
    predicted_action: Action | None = None
