"""ToolTalk's executor over the ``tooltalk`` environment: one conversation's world, reset and
rebuilt from the ground truth before each assistant turn, and tool calls executed as ToolTalk
executes them (the session token supplied for tools that act for the user, a second login
refused, unknown tools and unreadable arguments reported as the call's exception)."""

from __future__ import annotations

import json
from datetime import datetime
from functools import cached_property
from typing import Any

from intellagent.environment import Database, Environment
from intellagent.errors import IntellagentError
from intellagent_plugins.tooltalk.artefacts import ApiCall, Conversation, Request
from intellagent_plugins.tooltalk.environment.tools import NOT_LOGGED_IN, STAMP, session
from intellagent_plugins.tooltalk.equivalence import ToolMeta, mismatch

UNREADABLE = "Failed to parse API call"
LOGINS = ("UserLogin", "RegisterUser")


def signature_error(name: str, spec: Any, arguments: dict[str, Any], auth: bool) -> str | None:
    """The text Python gives when a method ``name.call(session_token, <parameters>)`` is called
    with ``arguments``: ToolTalk runs each tool that way, so a call with an unknown or a missing
    argument fails with that text there. An unknown name is reported first (Python checks the
    keywords before the missing ones); a tool that does not act for the user takes no token."""
    known = set(spec.properties) | ({"session_token"} if auth else set())
    unknown = next((key for key in arguments if key not in known), None)
    if unknown is not None:
        return f"{name}.call() got an unexpected keyword argument '{unknown}'"
    missing = [f"'{p}'" for p in spec.properties if p in spec.required and p not in arguments]
    if not missing:
        return None
    listed = missing[0] if len(missing) == 1 else f"{missing[0]} and {missing[1]}" if len(missing) == 2 \
        else f"{', '.join(missing[:-1])}, and {missing[-1]}"
    plural = "s" if len(missing) > 1 else ""
    return f"{name}.call() missing {len(missing)} required positional argument{plural}: {listed}"


def tool_meta(env: Environment) -> dict[str, ToolMeta]:
    """Every tool's ToolTalk declarations; one clear line if a tool lacks or garbles them."""
    metas = {}
    for name, tool in env.tools.items():
        try:
            metas[name] = ToolMeta.model_validate(tool.spec.meta)
        except ValueError as exc:
            first = str(exc).splitlines()
            raise IntellagentError(f"tool {name}: meta is not ToolTalk's ({' '.join(first[1:3]).strip()})",
                                   item=f"environment {env.name}") from None
    return metas


class World:
    """The tooltalk environment's world for one conversation."""

    def __init__(self, env: Environment, conversation: Conversation) -> None:
        self.env = env
        self.conversation = conversation
        self.meta = tool_meta(env)

    @cached_property
    def _start(self) -> Database:
        """The seed with the conversation's clock, and its user's session and verification code."""
        db = self.env.seed_database()
        user, metadata = self.conversation.user, self.conversation.metadata
        with db.transaction():
            db.put("world", "now", {"name": "now", "value": metadata["timestamp"]})
            token = user.get("session_token")
            db.put("world", "session", {"name": "session", "value": token})
            changes = {k: user[k] for k in ("session_token", "verification_code") if k in user}
            if changes:
                account = db.get("accounts", user["username"])
                if account is None:
                    raise IntellagentError(f"user {user['username']!r} has no account",
                                           item=f"conversation {self.conversation.name}")
                db.put("accounts", user["username"], {**account, **changes})
        return db

    def fresh(self, before_turn: int | None = None) -> Database:
        """The world at the start of the conversation, with every ground-truth call of the turns
        before position ``before_turn`` replayed (all of them when None)."""
        db = self._start.copy()
        for index, call in self.conversation.calls():
            if before_turn is not None and index >= before_turn:
                break
            self.execute(db, call.request.api_name, dict(call.request.parameters or {}))
        return db

    def problem(self) -> str | None:
        """Why the conversation's ground truth is not replayable on these tools, or None: a clock
        not in ToolTalk's format, a call of a tool that does not exist, or a call whose recorded
        response or exception the tools do not give back (under the tool's own equivalence
        rule, the one an oracle is held to). A perfect agent could not pass such a conversation,
        so scoring it would count bad data against the agent."""
        c = self.conversation
        stamp = c.metadata.get("timestamp")
        try:
            datetime.strptime(stamp, STAMP)
        except (TypeError, ValueError):
            return f"metadata.timestamp {stamp!r} is not YYYY-MM-DD HH:MM:SS"
        for position, (turn, call) in enumerate(c.calls()):
            if call.request.api_name not in self.env.tools:
                return (f"ground-truth call #{position} (turn {turn}) names no tool "
                        f"{call.request.api_name!r} of environment {self.env.name}")
        db = self._start.copy()
        try:
            for position, (turn, call) in enumerate(c.calls()):
                name, parameters = call.request.api_name, call.request.parameters
                got = self.execute(db, name, None if parameters is None else dict(parameters))
                why = mismatch(got, call, self.meta[name].equivalence,
                               lambda a, b: 1.0 if a == b else 0.0)
                if why:
                    return f"ground-truth call #{position} ({name}, turn {turn}) does not replay as recorded: {why}"
        finally:
            db.close()
        return None

    def execute(self, db: Database, api_name: str, parameters: dict[str, Any] | None) -> ApiCall:
        """Run one call; the request is recorded as ToolTalk records it (with the session token
        it supplied)."""
        if parameters is None:
            return ApiCall(request=Request(api_name=api_name, parameters=None), exception=UNREADABLE)
        if api_name not in self.env.tools:
            return ApiCall(request=Request(api_name=api_name, parameters=parameters),
                           exception=f"API {api_name} not found")
        token = session(db)
        arguments = dict(parameters)
        if self.meta[api_name].auth:
            if token is None:
                return ApiCall(request=Request(api_name=api_name, parameters=parameters),
                               exception=NOT_LOGGED_IN)
            arguments.pop("session_token", None)
            parameters = {**parameters, "session_token": token}
        request = Request(api_name=api_name, parameters=parameters)
        if api_name in LOGINS and token is not None:
            user = next((a["username"] for a in db.all("accounts") if a["session_token"] == token), None)
            return ApiCall(request=request, exception="Only one user can be logged in at a time. "
                                                      f"Current user is {user}.")
        tool = self.env.tools[api_name]
        wrong = signature_error(api_name, tool.spec, arguments, self.meta[api_name].auth)
        if wrong:
            return ApiCall(request=request, exception=wrong)
        result = tool.call(db, arguments)
        if result.error:
            return ApiCall(request=request, exception=result.output.removeprefix("Error: "))
        return ApiCall(request=request, response=json.loads(result.output) if result.output else None)

    def close(self) -> None:
        if "_start" in self.__dict__:
            self._start.close()
