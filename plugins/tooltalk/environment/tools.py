"""ToolTalk's 28 tools over the environment's database, written for IntellAgent from their
documented behaviour: the same checks in the same order, the same messages and the same id
formats, so a call gives the response or the error ToolTalk's own tool gives.

Everything ToolTalk keeps outside its tools lives in the ``world`` table, so each tool is a
function of the database alone and the environment works in any pipeline:

- ``world['now']``: the clock (``YYYY-MM-DD HH:MM:SS``);
- ``world['session']``: the session token of the logged-in user, or none. Tools that act for a
  user refuse with "User is not logged in" without one; logging in or registering while a user
  is logged in is refused; logging out or deleting the account ends the session. (ToolTalk's
  executor does this around its tools and injects the token; here the agent never sees it.)
- ``world['draws:<Tool>']``: how many ids the tool has drawn. Each tool draws from its own
  ``random.Random(489)`` restarted with the world, which makes ids and tokens reproducible.

Like ToolTalk's tools, every failure is an error the agent sees (a bad date format gives
Python's own message), never a crash.
"""

from __future__ import annotations

import copy
import functools
import random
import re
from datetime import date, datetime, timedelta
from typing import Any, Callable

from intellagent.environment import Database, ToolError

STAMP = "%Y-%m-%d %H:%M:%S"
CLOCK = "%H:%M:%S"
EVENT_TYPES = ("meeting", "event")
NOT_LOGGED_IN = "User is not logged in"


def reference_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Any exception a tool raises becomes the error the agent sees, with Python's message (as
    ToolTalk reports every exception of a tool as the call's exception)."""

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ToolError:
            raise
        except Exception as exc:  # noqa: BLE001 - the method reports them all as the call's error
            raise ToolError(str(exc)) from exc

    return call


# -- the shared world --------------------------------------------------------------------------

def _world(db: Database, name: str) -> Any:
    record = db.get("world", name)
    return None if record is None else record["value"]


def _set_world(db: Database, name: str, value: Any) -> None:
    db.put("world", name, {"name": name, "value": value})


def now(db: Database) -> datetime:
    stamp = _world(db, "now")
    if stamp is None:
        raise ToolError("the clock is not set (world['now'])")
    return datetime.strptime(stamp, STAMP)


def session(db: Database) -> str | None:
    return _world(db, "session")


def _draw(db: Database, tool: str, make: Callable[[random.Random], str]) -> str:
    """The tool's next id: its own random source, continued across its calls in this world."""
    done = _world(db, f"draws:{tool}") or 0
    r = random.Random(489)
    for _ in range(done):
        make(r)
    value = make(r)
    _set_world(db, f"draws:{tool}", done + 1)
    return value


def _token(r: random.Random) -> str:
    return f"{r.randint(0, 0xffffffff):08x}-{r.randint(0, 0xffff):04x}-{r.randint(0, 0xffff):04x}"


def _logged_in(db: Database) -> str:
    token = session(db)
    if token is None:
        raise ToolError(NOT_LOGGED_IN)
    return token


def _user(db: Database, token: str) -> dict[str, Any]:
    for record in db.all("accounts"):
        if token == record["session_token"]:
            return record
    raise ToolError("Invalid session_token.")


def _one_session(db: Database) -> None:
    token = session(db)
    if token is not None:
        raise ToolError("Only one user can be logged in at a time. Current user is "
                        f"{_user(db, token)['username']}.")


def _records(db: Database, table: str, column: str, username: str) -> dict[str, Any] | None:
    row = db.get(table, username)
    return None if row is None else row[column]


def _keep(db: Database, table: str, column: str, username: str, records: dict[str, Any]) -> None:
    db.put(table, username, {"username": username, column: records})


def _email_ok(email: str) -> bool:
    return re.match(r"^[\w\-\d\.]+@[\w\-\d\.]+$", email) is not None


def _phone_ok(phone: str) -> bool:
    return re.match(r"^\d{3}-\d{3}-\d{4}$", phone) is not None


def _profile(username: str, record: dict[str, Any]) -> dict[str, Any]:
    return {"username": username, "email": record["email"], "phone": record["phone"],
            "name": record["name"]}


# -- AccountTools ----------------------------------------------------------------------------

@reference_errors
def change_password(db, old_password, new_password):
    user = _user(db, _logged_in(db))
    if user["password"] != old_password:
        raise ToolError("The old password is incorrect.")
    db.put("accounts", user["username"], dict(user, password=new_password))
    return {"status": "success"}


@reference_errors
def delete_account(db, password):
    user = _user(db, _logged_in(db))
    if user["password"] != password:
        raise ToolError("The password is incorrect.")
    db.delete("accounts", user["username"])
    _set_world(db, "session", None)
    return {"status": "success"}


@reference_errors
def get_account_information(db):
    user = _user(db, _logged_in(db))
    return {"user": _profile(user["username"], user)}


@reference_errors
def logout_user(db):
    user = _user(db, _logged_in(db))
    db.put("accounts", user["username"], dict(user, session_token=None))
    _set_world(db, "session", None)
    return {"status": "success"}


@reference_errors
def query_user(db, username=None, email=None):
    _user(db, _logged_in(db))
    if username is None and email is None:
        raise ToolError("You need to provide at least one of username and email.")
    if username is None:
        return {"users": [_profile(u["username"], u) for u in db.all("accounts") if u["email"] == email]}
    found = db.get("accounts", username)
    return {"users": [] if found is None else [_profile(username, found)]}


@reference_errors
def register_user(db, username, password, email, name=None, phone=None):
    _one_session(db)
    if db.has("accounts", username):
        raise ToolError("The username already exists.")
    if not _email_ok(email):
        raise ToolError("The email format is invalid.")
    if phone is not None and not _phone_ok(phone):
        raise ToolError("The phone number format is invalid.")
    token = _draw(db, "RegisterUser", _token)
    db.insert("accounts", {"username": username, "password": password, "session_token": token,
                           "email": email, "phone": phone, "name": name})
    _set_world(db, "session", token)
    return {"session_token": token,
            "user": {"username": username, "email": email, "phone": phone, "name": name}}


@reference_errors
def reset_password(db, username, verification_code, new_password):
    user = db.get("accounts", username)
    if user is None:
        raise ToolError("The username does not exist.")
    if user.get("verification_code") is None or user["verification_code"] != verification_code:
        raise ToolError("The verification code is incorrect.")
    db.put("accounts", username, dict(user, password=new_password))
    return {"status": "success"}


@reference_errors
def send_verification_code(db, username, email):
    user = db.get("accounts", username)
    if user is None:
        raise ToolError("The username does not exist.")
    if user["email"] != email:
        raise ToolError("The email is incorrect.")
    code = _draw(db, "SendVerificationCode", lambda r: f"{r.randint(0, 999999):06d}")
    db.put("accounts", username, dict(user, verification_code=code))
    return {"status": "success"}


@reference_errors
def update_account_information(db, password, new_email=None, new_phone_number=None, new_name=None):
    user = _user(db, _logged_in(db))
    if user["password"] != password:
        raise ToolError("The password is incorrect.")
    if new_email is None and new_phone_number is None:
        raise ToolError("You need to provide at least one of new_email and new_phone_number.")
    user = dict(user)
    if new_email is not None:
        if not _email_ok(new_email):
            raise ToolError("The email is invalid.")
        user["email"] = new_email
    if new_phone_number is not None:
        if not _phone_ok(new_phone_number):
            raise ToolError("The phone number is invalid.")
        user["phone"] = new_phone_number
    if new_name is not None:
        user["name"] = new_name
    db.put("accounts", user["username"], user)
    return {"status": "success"}


@reference_errors
def user_login(db, username, password):
    _one_session(db)
    user = db.get("accounts", username)
    if user is None:
        raise ToolError("The username does not exist.")
    if user["password"] != password:
        raise ToolError("The password is incorrect.")
    if user["session_token"] is not None:
        raise ToolError("The user is already logged in.")
    token = _draw(db, "UserLogin", _token)
    db.put("accounts", username, dict(user, session_token=token))
    _set_world(db, "session", token)
    return {"session_token": token}


# -- Alarm -------------------------------------------------------------------------------------

def _alarm_id(r: random.Random) -> str:
    return f"{r.randint(0, 0xffff):04x}-{r.randint(0, 0xffff):04x}"


@reference_errors
def add_alarm(db, time):
    token = _logged_in(db)
    datetime.strptime(time, CLOCK)
    username = _user(db, token)["username"]
    alarms = _records(db, "alarms", "alarms", username) or {}
    alarm_id = _draw(db, "AddAlarm", _alarm_id)
    alarms[alarm_id] = {"alarm_id": alarm_id, "time": time}
    _keep(db, "alarms", "alarms", username, alarms)
    return {"alarm_id": alarm_id}


@reference_errors
def delete_alarm(db, alarm_id):
    username = _user(db, _logged_in(db))["username"]
    alarms = _records(db, "alarms", "alarms", username)
    if alarms is None or alarm_id not in alarms:
        raise ToolError(f"Alarm {alarm_id} not found.")
    del alarms[alarm_id]
    _keep(db, "alarms", "alarms", username, alarms)
    return {"status": "success"}


@reference_errors
def find_alarms(db, start_range=None, end_range=None):
    username = _user(db, _logged_in(db))["username"]
    alarms = _records(db, "alarms", "alarms", username)
    if alarms is None:
        return {"alarms": []}
    start = datetime.strptime(start_range, CLOCK) if start_range is not None else None
    end = datetime.strptime(end_range, CLOCK) if end_range is not None else None
    if start is not None and end is not None and start > end:
        raise ToolError("Start range must be earlier than end range.")
    found = []
    for alarm in alarms.values():
        at = datetime.strptime(alarm["time"], CLOCK)
        if (start is None or at >= start) and (end is None or at <= end):
            found.append(copy.deepcopy(alarm))
    return {"alarms": found}


# -- Calendar ----------------------------------------------------------------------------------

def _event_id(r: random.Random) -> str:
    return f"{r.randint(0, 0xffffffff):08x}-{r.randint(0, 0xffff):04x}"


@reference_errors
def create_event(db, name, event_type, start_time, end_time, description=None, location=None,
                 attendees=None):
    token = _logged_in(db)
    if event_type not in EVENT_TYPES:
        raise ToolError(f"Event type {event_type} not supported.")
    if event_type == "meeting" and not attendees:
        raise ToolError("Meeting must have attendees.")
    username = _user(db, token)["username"]
    start, end = datetime.strptime(start_time, STAMP), datetime.strptime(end_time, STAMP)
    if start > end:
        raise ToolError("Start time must be before end time.")
    clock = now(db)
    if start < clock or end < clock:
        raise ToolError("Start time and end time must be in the future.")
    if attendees is not None and username not in attendees:
        attendees = attendees + [username]
    event_id = _draw(db, "CreateEvent", _event_id)
    events = _records(db, "calendars", "events", username) or {}
    events[event_id] = {"event_id": event_id, "name": name, "event_type": event_type,
                        "description": description, "start_time": start_time, "end_time": end_time,
                        "location": location, "attendees": attendees}
    _keep(db, "calendars", "events", username, events)
    return {"event_id": event_id}


@reference_errors
def delete_event(db, event_id):
    username = _user(db, _logged_in(db))["username"]
    events = _records(db, "calendars", "events", username)
    if events is None or event_id not in events:
        raise ToolError(f"Event {event_id} not found.")
    del events[event_id]
    _keep(db, "calendars", "events", username, events)
    return {"status": "success"}


@reference_errors
def modify_event(db, event_id, new_name=None, new_start_time=None, new_end_time=None,
                 new_description=None, new_location=None, new_attendees=None):
    username = _user(db, _logged_in(db))["username"]
    events = _records(db, "calendars", "events", username)
    if events is None or event_id not in events:
        raise ToolError(f"Event {event_id} not found.")
    event = events[event_id]
    if new_name is not None:
        event["name"] = new_name
    if new_start_time is not None:
        if new_end_time is None:
            raise ToolError("new_end_time must be provided if new_start_time is provided.")
        start, end = datetime.strptime(new_start_time, STAMP), datetime.strptime(new_end_time, STAMP)
        if start > end:
            raise ToolError("Start time must be before end time.")
        clock = now(db)
        if start < clock or end < clock:
            raise ToolError("Start time and end time must be in the future.")
        event["start_time"] = new_start_time
    if new_end_time is not None:
        if new_start_time is None:
            raise ToolError("new_start_time must be provided if new_end_time is provided.")
        event["end_time"] = new_end_time
    if new_description is not None:
        event["description"] = new_description
    if new_location is not None:
        event["location"] = new_location
    if new_attendees is not None:
        event["attendees"] = new_attendees if username in new_attendees else new_attendees + [username]
    _keep(db, "calendars", "events", username, events)
    return {"status": "success"}


@reference_errors
def query_calendar(db, start_time, end_time):
    username = _user(db, _logged_in(db))["username"]
    events = _records(db, "calendars", "events", username)
    if events is None:
        raise ToolError(f"User {username} has no events.")
    start, end = datetime.strptime(start_time, STAMP), datetime.strptime(end_time, STAMP)
    if start > end:
        raise ToolError("Start time must be before end time.")
    found = []
    for event in events.values():
        a, b = datetime.strptime(event["start_time"], STAMP), datetime.strptime(event["end_time"], STAMP)
        if start <= a <= end or start <= b <= end or (a <= start and b >= end):
            found.append(copy.deepcopy(event))
    return {"events": found}


# -- Email and Messages -----------------------------------------------------------------------

def _search(records: list[dict[str, Any]], when: str, has_keyword: Callable[[dict, str], bool],
            query, match_type, sender, start_date, end_date, clock: datetime) -> list[dict[str, Any]]:
    """The five most recent records (up to ``clock``) matching every given filter."""
    if query is None and sender is None and start_date is None and end_date is None:
        raise ToolError("At least one of query, sender, start_date, end_date must be provided.")
    if match_type not in ("any", "all"):
        raise ToolError('match_type must be either "any" or "all".')
    start = datetime.strptime(start_date, STAMP) if start_date is not None else None
    end = datetime.strptime(end_date, STAMP) if end_date is not None else None
    if start is not None and end is not None and start > end:
        raise ToolError("Start date must be earlier than end date.")
    keywords = query.lower().split() if query else None
    found = []
    for record in records:
        at = datetime.strptime(record[when], STAMP)
        if clock < at or (sender is not None and sender != record["sender"]):
            continue
        if (start is not None and start > at) or (end is not None and end < at):
            continue
        if keywords is not None:
            hits = [has_keyword(record, k) for k in keywords]
            if not (any(hits) if match_type == "any" else all(hits)):
                continue
        found.append(record)
    found.sort(key=lambda r: datetime.strptime(r[when], STAMP), reverse=True)
    return copy.deepcopy(found[:5])


@reference_errors
def search_inbox(db, query=None, match_type="any", sender=None, start_date=None, end_date=None):
    username = _user(db, _logged_in(db))["username"]
    emails = _records(db, "inboxes", "emails", username)
    if not emails:
        return {"emails": []}
    return {"emails": _search(list(emails.values()), "date",
                              lambda r, k: k in r["body"].lower() or k in r["subject"].lower(),
                              query, match_type, sender, start_date, end_date, now(db))}


@reference_errors
def send_email(db, to, subject, body):
    _user(db, _logged_in(db))
    for address in to:
        if not _email_ok(address):
            raise ToolError(f"{address} is not a valid email address.")
    email_id = _draw(db, "SendEmail", lambda r: f"{r.randint(0, 0xff):02x}-{r.randint(0, 0xffff):04x}-"
                                                f"{r.randint(0, 0xffffffff):08x}")
    return {"email_id": email_id}


@reference_errors
def search_messages(db, query=None, match_type="any", sender=None, start_date=None, end_date=None):
    username = _user(db, _logged_in(db))["username"]
    messages = _records(db, "message_boxes", "messages", username)
    if messages is None:
        return {"messages": []}
    return {"messages": _search(list(messages.values()), "timestamp",
                                lambda r, k: k in r["message"].lower(),
                                query, match_type, sender, start_date, end_date, now(db))}


@reference_errors
def send_message(db, receiver, message):
    _user(db, _logged_in(db))
    if message == "":
        raise ToolError("Message cannot be empty.")
    message_id = _draw(db, "SendMessage",
                       lambda r: f"{r.randint(0, 0xffffffff):08x}-{r.randint(0, 0xffffffff):08x}")
    return {"message_id": message_id}


# -- Reminder --------------------------------------------------------------------------------

@reference_errors
def add_reminder(db, task, due_date=None):
    username = _user(db, _logged_in(db))["username"]
    reminders = _records(db, "reminder_lists", "reminders", username) or {}
    if due_date is not None:
        try:
            datetime.strptime(due_date, STAMP)
        except ValueError:
            raise ToolError(f"Invalid due_date: {due_date}") from None
    reminder_id = _draw(db, "AddReminder", lambda r: f"{r.randint(0, 0xff):02x}-{r.randint(0, 0xffff):04x}")
    reminders[reminder_id] = {"reminder_id": reminder_id, "task": task, "due_date": due_date,
                              "status": "pending"}
    _keep(db, "reminder_lists", "reminders", username, reminders)
    return {"reminder_id": reminder_id}


def _reminder_list(db: Database, username: str) -> dict[str, Any]:
    reminders = _records(db, "reminder_lists", "reminders", username)
    if reminders is None:
        raise KeyError(username)  # the user has no list at all: ToolTalk reports the bare key
    return reminders


@reference_errors
def complete_reminder(db, reminder_id):
    username = _user(db, _logged_in(db))["username"]
    reminders = _reminder_list(db, username)
    if reminder_id not in reminders:
        raise ToolError(f"Reminder {reminder_id} not found in database")
    if reminders[reminder_id]["status"] == "complete":
        raise ToolError(f"Reminder {reminder_id} already completed")
    reminders[reminder_id]["status"] = "complete"
    _keep(db, "reminder_lists", "reminders", username, reminders)
    return {"status": "success"}


@reference_errors
def delete_reminder(db, reminder_id):
    username = _user(db, _logged_in(db))["username"]
    reminders = _reminder_list(db, username)
    if reminder_id not in reminders:
        raise ToolError(f"Reminder {reminder_id} not found in database")
    del reminders[reminder_id]
    _keep(db, "reminder_lists", "reminders", username, reminders)
    return {"status": "success"}


@reference_errors
def get_reminders(db):
    username = _user(db, _logged_in(db))["username"]
    reminders = _records(db, "reminder_lists", "reminders", username)
    return {"reminders": copy.deepcopy(list(reminders.values())) if reminders is not None else []}


# -- Weather ---------------------------------------------------------------------------------

def _days(db: Database, location: str) -> dict[date, Any]:
    row = db.get("weather", location)
    if row is None:
        raise ToolError(f"Location {location} not found in database")
    return {datetime.strptime(day, "%Y-%m-%d").date(): record for day, record in row["days"].items()}


@reference_errors
def current_weather(db, location):
    location = location.lower().strip()
    return {"weather": _days(db, location)[now(db).date()]}


@reference_errors
def forecast_weather(db, location):
    location = location.lower().strip()
    days, today = _days(db, location), now(db).date()
    return {"forecast": [days[today + timedelta(days=i + 1)] for i in range(3)]}


@reference_errors
def historic_weather(db, location, month):
    location = location.lower().strip()
    row = db.get("historic_weather", location)
    if row is None:
        raise ToolError(f"Location {location} not found in database")
    month = month.lower()
    if month not in row["months"]:
        raise ToolError(f"Historic weather data for {location} missing for month {month}")
    return {"weather": row["months"][month]}
