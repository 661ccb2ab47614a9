"""The LLM layer: every model call of every stage goes through :class:`LLM`."""

from intellagent.llm.client import LLM
from intellagent.llm.types import (ChatReply, ChatRequest, Outcome, ResponseModel, Status,
                                   ToolCall, Usage)

__all__ = ["LLM", "ChatReply", "ChatRequest", "Outcome", "ResponseModel", "Status", "ToolCall",
           "Usage"]
