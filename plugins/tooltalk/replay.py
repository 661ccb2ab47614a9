"""The turn-by-turn replay of a ToolTalk conversation against an agent.

Before each assistant turn the world is reset and every earlier ground-truth call replayed, so a
mistake never carries over. The agent sees the ground-truth history as OpenAI chat messages (the
user's and assistant's texts, earlier ground-truth calls as tool calls with their results) and
makes calls, each executed and answered with ``{"response", "exception"}``, until it replies
with text. Its calls are kept; the ground truth replaces them before the next turn.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from intellagent.agent import Agent
from intellagent_plugins.tooltalk.artefacts import ApiCall, Conversation, Replay, TurnReplay
from intellagent_plugins.tooltalk.executor import World

ToolChoice = Literal["all", "plugins", "used"]


def user_data(metadata: dict[str, Any]) -> str:
    """What ToolTalk tells the agent about the user, after the environment's prompt."""
    return ("Here is some user data:\n"
            f"location: {metadata.get('location')}\n"
            f"timestamp: {metadata.get('timestamp')}\n"
            f"username (if logged in): {metadata.get('username')}")


def result_text(call: ApiCall) -> str:
    return json.dumps({"response": call.response, "exception": call.exception}, ensure_ascii=False)


def shown_arguments(call: ApiCall, world: World) -> dict[str, Any]:
    """A ground-truth call's arguments as the agent sees them: without the session token, which
    the harness supplies."""
    parameters = dict(call.request.parameters or {})
    meta = world.meta.get(call.request.api_name)
    if meta is not None and meta.auth:
        parameters.pop("session_token", None)
    return parameters


def truth_messages(call: ApiCall, call_id: str, world: World) -> list[dict[str, Any]]:
    arguments = json.dumps(shown_arguments(call, world), ensure_ascii=False)
    return [{"role": "assistant", "content": None, "tool_calls": [
                {"id": call_id, "type": "function",
                 "function": {"name": call.request.api_name, "arguments": arguments}}]},
            {"role": "tool", "tool_call_id": call_id, "content": result_text(call)}]


def tool_names(env: Any, meta: dict[str, Any], conversation: Conversation, choice: ToolChoice) -> list[str]:
    """The tools offered: all 28, those of the conversation's plugins, or those it uses
    (ToolTalk's ``--api_mode all|suite|exact``)."""
    if choice == "used":
        return [n for n in conversation.apis_used if n in env.tools]
    if choice == "plugins":
        return [n for n in env.tools if meta[n].plugin in conversation.suites_used]
    return list(env.tools)


def tool_schemas(world: World, conversation: Conversation, choice: ToolChoice) -> list[dict[str, Any]]:
    return [world.env.tools[n].openai_schema() for n in tool_names(world.env, world.meta, conversation, choice)]


def parse_arguments(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


async def replay(conversation: Conversation, world: World, agent: Agent, *, prompt: str,
                 tools: ToolChoice = "all", max_calls: int = 20) -> tuple[Replay, str | None]:
    """The agent's calls and replies, turn by turn; and the error of its model infrastructure
    when that failed (the replay is then unfinished, not the agent's fault), else None."""
    schemas = tool_schemas(world, conversation, tools)
    history: list[dict[str, Any]] = [{"role": "system",
                                      "content": f"{prompt.rstrip()}\n\n{user_data(conversation.metadata)}"}]
    turns: list[TurnReplay] = []
    for position, turn in enumerate(conversation.conversation):
        if turn.role == "user":
            history.append({"role": "user", "content": turn.text or ""})
            continue
        record = TurnReplay(index=position)
        db = world.fresh(before_turn=position)
        messages = list(history)
        try:
            while True:
                step = await agent.step(list(messages), schemas)
                if step.error:
                    if step.infra:
                        return Replay(id=conversation.id, name=conversation.name, set=conversation.set,
                                      turns=turns), step.error
                    record.error = step.error
                    break
                if not step.tool_calls:
                    record.text = step.content or ""
                    break
                messages.append(step.as_message())
                for call in step.tool_calls:
                    if len(record.predictions) >= max_calls:  # the rest of the turn is not run
                        record.stopped = True
                        break
                    executed = world.execute(db, call.name, parse_arguments(call.arguments))
                    record.predictions.append(executed)
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": result_text(executed)})
                if record.stopped:
                    break
        finally:
            db.close()
        turns.append(record)
        for i, call in enumerate(turn.apis or []):
            history += truth_messages(call, f"truth_{position}_{i}", world)
        history.append({"role": "assistant", "content": turn.text or ""})
    return Replay(id=conversation.id, name=conversation.name, set=conversation.set, turns=turns), None
