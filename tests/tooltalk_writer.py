"""A stand-in for the writer models of ``tooltalk-generate`` (``mock/function``): it reads the
prompts our steps send and answers as a careful writer would for the Alarm, Reminder and Weather
tools, using only what the prompt shows (the user's records, the place, the weather data).
Its first draft of an alarm writes the time wrongly, so a repair is needed."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta


def _between(text: str, start: str, end: str) -> str:
    return text.split(start, 1)[1].split(end, 1)[0].strip()


def _call(tool: str, prompt: str, repaired: bool) -> dict | None:
    records = _between(prompt, "(use these ids and texts where the conversation refers to them):",
                       "Other users:")
    mine = json.loads(records) if records.startswith("{") else {}
    location = _between(prompt, "Location: ", ". Now:")
    now = datetime.strptime(_between(prompt, "Now: ", " (dates"), "%Y-%m-%d %H:%M:%S")
    if tool == "AddAlarm":
        return {"time": "07:30:00" if repaired else "7:30 am"}
    if tool in ("FindAlarms", "GetReminders"):
        return {}
    if tool == "DeleteAlarm":
        alarms = mine.get("alarms") or [{"alarm_id": "0000-0000"}]
        return {"alarm_id": alarms[0]["alarm_id"]}
    if tool in ("CompleteReminder", "DeleteReminder"):
        pending = [r for r in mine.get("reminders", []) if r["status"] == "pending"] or [{"reminder_id": "00-0000"}]
        return {"reminder_id": pending[0]["reminder_id"]}
    if tool == "AddReminder":
        return {"task": "Buy milk", "due_date": (now + timedelta(days=1)).strftime("%Y-%m-%d %H:%M:%S")}
    if tool in ("CurrentWeather", "ForecastWeather"):
        return {"location": location}
    if tool == "HistoricWeather":
        place, months = re.search(r"Monthly history: ([^(]+) \(([^,)]+)", prompt).groups()
        return {"location": place.strip(), "month": months.strip().title()}
    return None


def reply(request, response_model):
    prompt = request.messages[0]["content"]
    last = request.messages[-1]["content"]
    name = response_model.__name__ if response_model else ""
    if name == "ScenarioDrafts":
        tool = re.search(r"must use the tool \*\*(\w+)\*\*", prompt).group(1)
        return {"scenarios": [{"text": f"The user needs the assistant to use {tool}.", "tools": [tool]}]}
    if name == "Replies":
        count = int(re.search(r"Give exactly (\d+) replies", last).group(1))
        results = re.findall(r"→ (.*)", last)
        return {"replies": [f"Done: {results[i] if i < len(results) else 'ok'}" for i in range(count)]}
    if name == "ConversationDraft":
        tool = re.search(r"must call \*\*(\w+)\*\*", prompt).group(1)
        arguments = _call(tool, prompt, repaired=len(request.messages) > 1)
        calls = [] if arguments is None else [{"tool": tool, "arguments": arguments}]
        return {"exchanges": [{"user": f"Could you help me with {tool}?", "calls": calls,
                               "assistant": "Let me do that."},
                              {"user": "Thanks!", "calls": [], "assistant": "You're welcome."}]}
    raise AssertionError(f"unexpected request for {name or 'chat'}")


SEEN: list = []


def recording_model(request, response_model):
    """An agent's model that only says "Noted." and keeps every request it got."""
    SEEN.append(request)
    return "Noted."


def flaky_reply(request, response_model):
    """``reply``, except that while ``TOOLTALK_WRITER_DOWN`` is set the replies' rewrite gets a
    server error (a fault of our endpoint, not of the writer)."""
    import os

    from intellagent.llm.errors import ServerError

    if os.environ.get("TOOLTALK_WRITER_DOWN") and response_model is not None \
            and response_model.__name__ == "Replies":
        raise ServerError("HTTP 500: the server had an error")
    return reply(request, response_model)
