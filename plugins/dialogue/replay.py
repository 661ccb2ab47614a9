"""A recorded dialog played again against another agent (``intellagent replay``): the recorded
user's turns are sent as they were while the new agent answers as the recorded one did (the same
tool calls, by name and arguments, in order; its text by the run's text matcher); at the first
reply that differs the simulated user takes over, with its persona and the scenario, from the
dialog as it stands. The user's stops and a reviewer's feedback are replayed too while the agent
follows, so a replay the agent follows to the end makes no model call of the user's."""

from __future__ import annotations

import json
from typing import Any, Callable

from intellagent.session import Reply
from intellagent_plugins.dialogue.dialog import Dialog, Replayed, Turn

USER_STOPS = ("success", "failure", "give-up")


def _arguments(text: str) -> Any:
    try:
        return json.loads(text) if text.strip() else {}
    except json.JSONDecodeError:
        return text


def difference(recorded: Turn, reply: Reply, recorded_error: bool,
               same_text: Callable[[str, str], bool]) -> str | None:
    """Why ``reply`` is not the recorded agent's turn, or None when it is."""
    if bool(reply.error) != recorded_error:
        return f"the agent failed: {reply.error}" if reply.error else "the recorded agent failed here"
    made = [(c.name, _arguments(c.arguments)) for c in reply.tool_calls]
    expected = [(c.name, _arguments(c.arguments)) for c in recorded.tool_calls]
    if made != expected:
        for i, (new, old) in enumerate(zip(made, expected)):
            if new != old:
                return f"tool call {i + 1} differs: {new[0]}({json.dumps(new[1], default=str)}) instead of " \
                       f"{old[0]}({json.dumps(old[1], default=str)})"
        return f"{len(made)} tool call(s) instead of {len(expected)}"
    if not recorded_error and not same_text(reply.content or "", recorded.content or ""):
        return f"the reply differs: {(reply.content or '')[:200]!r} instead of {(recorded.content or '')[:200]!r}"
    return None


class Script:
    """One recorded dialog being replayed: where it stands, and whether the agent still follows."""

    def __init__(self, recorded: Dialog, run: str, same_text: Callable[[str, str], bool]) -> None:
        self.recorded = recorded
        self.turns = recorded.turns
        self.same_text = same_text
        self.at = 0  # the next recorded turn
        self.agent_turns = 0
        self.departed: int | None = None
        self.why = ""
        self.run = run
        answers = [i for i, t in enumerate(self.turns) if t.role == "assistant"]
        # the recorded agent's last turn was its failure when the dialog ended with one
        self.failed_turn = answers[-1] if answers and recorded.stop_reason == "agent-error" else None

    @property
    def following(self) -> bool:
        return self.departed is None

    def _depart(self, why: str) -> None:
        self.departed, self.why = self.agent_turns + 1, why

    def user_turn(self) -> Turn | None:
        """The recorded user's next turn while the agent follows; None once it has departed (or
        the recording has no more to say: the user takes over from there)."""
        if not self.following:
            return None
        if self.at < len(self.turns) and self.turns[self.at].role == "user":
            self.at += 1
            return self.turns[self.at - 1]
        self._depart(f"the recording ends here (it stopped with {self.recorded.stop_reason})")
        return None

    def stop(self) -> tuple[str, str]:
        """The stop and its reason of the recorded user's closing turn."""
        last = self.at >= len(self.turns)
        if last and self.recorded.stop_reason in USER_STOPS:
            return self.recorded.stop_reason, self.recorded.stop_explanation
        return "give-up", ""  # a stop the reviewer sent back: its kind was not recorded

    def review(self) -> tuple[bool, str | None]:
        """The recorded review of the user's stop: (known, feedback). Unknown when the recording
        ended there for another reason (the reviewer's own failure): review it again."""
        if self.at < len(self.turns) and self.turns[self.at].role == "critic":
            self.at += 1
            return True, self.turns[self.at - 1].content or ""
        if self.at >= len(self.turns) and self.recorded.stop_reason in USER_STOPS:
            return True, None
        return False, None

    def agent_reply(self, reply: Reply) -> None:
        """Compare the new agent's reply with the recorded one; the first that differs is where
        the agent departs."""
        if not self.following:
            return
        if self.at >= len(self.turns) or self.turns[self.at].role != "assistant":
            self._depart("the recording has no reply here")
            return
        why = difference(self.turns[self.at], reply, self.at == self.failed_turn, self.same_text)
        self.at += 1
        if why is not None:
            self._depart(why)
        else:
            self.agent_turns += 1

    def finish(self, dialog: Dialog) -> None:
        """The dialog's record of the replay; a dialog followed to its recorded end keeps what the
        recorded user side decided (a subclass's fields too: review rounds, a disputed stop). One
        that stopped with recorded turns still to come (max turns, a hung tool, an infra error)
        departed there: it did not follow the recording to the end."""
        if self.following and self.at < len(self.turns):
            self._depart(f"stopped before the recording's end: {dialog.stop_reason}"
                         + (f" ({dialog.error})" if dialog.error else ""))
        dialog.replay = Replayed(run=self.run, departed=self.departed, why=self.why)
        if self.following:
            kit = set(Dialog.model_fields)
            for name in type(dialog).model_fields:
                if name not in kit and name in type(self.recorded).model_fields:
                    setattr(dialog, name, getattr(self.recorded, name))
