"""Mutants: faults the harness applies around any agent under test, to test the test suite.

A mutant (registered with ``register_mutants``) wraps each conversation's agent, whatever it is
(a model, an HTTP endpoint, a Python callable, one that runs its own tools): it may change the
agent's turns (:meth:`Mutant.turn`) and the tool calls the harness runs for it
(:meth:`Mutant.arguments`, :meth:`Mutant.scratch`, :meth:`Mutant.result`). The agent itself is
never touched, so a suite that does not notice the fault would not notice an agent broken that
way either. ``intellagent mutate`` runs the same items with each mutant and counts the items a
mutant turns from passing into failing (:mod:`intellagent.mutation`).
"""

from __future__ import annotations

import random
from typing import Any, ClassVar

from intellagent.agent import AgentTurn
from intellagent.environment import Database, Environment
from intellagent.environment.tools import Tool, ToolResult

#: The warning an item carries when its mutant raised: the item failed by the mutant's own bug,
#: which is no fault the suite caught (:mod:`intellagent.mutation` leaves such items out).
MUTANT_FAILED = "the mutant raised: "


class Mutant:
    """Base class of mutants. One instance serves one conversation; ``rng`` is derived from the
    run seed and the item, so a mutant's choices are the same in every run of that item.
    ``db`` is the conversation's database once the harness runs its tools (None before, and for
    steps that only ask the agent for a turn)."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    version: ClassVar[str] = "1"
    failed: str | None = None  # what the mutant raised in this conversation (set by the harness)

    def __init__(self, env: Environment, rng: random.Random) -> None:
        self.env = env
        self.rng = rng
        self.db: Database | None = None

    async def turn(self, agent: Any, messages: list[dict[str, Any]],
                   tools: list[dict[str, Any]]) -> AgentTurn:
        """The agent's turn as the conversation gets it: by default, the agent's own."""
        return await agent.step(messages, tools)

    def arguments(self, tool: Tool, arguments: dict[str, Any]) -> dict[str, Any]:
        """The arguments a call of ``tool`` runs with (the agent's, by default)."""
        return arguments

    def scratch(self, tool: Tool) -> bool:
        """Run this call on a throwaway copy of the conversation's database (its writes are
        lost) instead of the database itself."""
        return False

    def result(self, tool: Tool, arguments: dict[str, Any], result: ToolResult) -> ToolResult:
        """What the agent gets back from the call (what the tool answered, by default)."""
        return result


def mutant_raised(mutant: Any, where: str, exc: BaseException, name: str = "") -> str:
    """The error of a turn whose mutant raised (in ``where``), remembered on the mutant."""
    name = name or getattr(mutant, "name", "") or type(mutant).__name__
    mutant.failed = f"the mutant {name} raised {type(exc).__name__}: {exc} (in {where})"
    return mutant.failed


class _AgentSide:
    """The agent as a mutant's :meth:`Mutant.turn` calls it: what the agent itself raises is
    told apart from what the mutant raises."""

    def __init__(self, agent: Any) -> None:
        self.agent = agent
        self.raised: BaseException | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.agent, name)

    async def step(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> AgentTurn:
        try:
            return await self.agent.step(messages, tools)
        except BaseException as exc:
            self.raised = exc
            raise


class MutatedAgent:
    """An agent with a mutant's fault around it. The live session hands the mutant the
    conversation's toolbox (:meth:`bind`), whose calls then go through the mutant."""

    def __init__(self, agent: Any, mutant: Mutant) -> None:
        self.agent = agent
        self.mutant = mutant

    def __getattr__(self, name: str) -> Any:
        return getattr(self.agent, name)

    def bind(self, toolbox: Any) -> None:
        toolbox.mutant = self.mutant
        self.mutant.db = toolbox.db

    async def step(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> AgentTurn:
        agent = _AgentSide(self.agent)
        try:
            return await self.mutant.turn(agent, messages, tools)
        except Exception as exc:
            if exc is agent.raised:  # the agent's own: its agent-error, as without a mutant
                raise
            return AgentTurn(error=mutant_raised(self.mutant, "turn", exc))
