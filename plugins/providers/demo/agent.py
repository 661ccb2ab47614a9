"""The demo's agent under test: a customer-service agent over the reservation tools its request
offers, that reads the conversation so far and takes the next step (a tool call or a reply).

It follows its prompt's rules most of the time and, per conversation, has a few habits that
break them, as agents do (:class:`Habits`): it may go ahead without waiting for the user's
yes, cancel without checking whether the fare allows it, give way when the user insists, count
bags as if every member were regular, compensate whoever asks, skip the insurance question,
share another member's reservation, give its own opinion or offer compensation unasked. The
habits are drawn from the run's seed and the conversation's opening, so one conversation keeps
them from turn to turn."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from intellagent_plugins.providers.demo.texts import sections

YES = re.compile(r"\b(?:yes|go ahead|please do|confirm(?:ed)?|do it)\b", re.I)
PUSH = re.compile(r"\b(?:exception|loyal)\b", re.I)
ASKS_YES = "(yes/no)"
REQUESTS = {  # what a user message asks for, by its words
    "cancel": re.compile(r"\bcancel (?:a |my |the |this )?(?:reservation|booking|trip)\b|\bcancel it\b", re.I),
    "change": re.compile(r"\bmove my flight\b|\bchange (?:my|the) flight\b|\blater date\b", re.I),
    "bags": re.compile(r"\badd (?:\w+ )?checked bag", re.I),
    "compensation": re.compile(r"compensat", re.I),
    "book": re.compile(r"\bbook (?:a|flight)\b", re.I),
    "passengers": re.compile(r"date of birth[^.?]*\bwrong|\badd a passenger\b", re.I),
    "privacy": re.compile(r"\b(?:brother|sister|wife|husband|friend|relative)\b", re.I),
    "human": re.compile(r"\bhuman\b|\breal person\b|\brepresentative\b", re.I),
}
NUMBERS = {"no": 0, "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4}
RESERVATION_ID = re.compile(r"\b[A-Z0-9]{6}\b")
DATE = re.compile(r"\b2\d{3}-\d{2}-\d{2}\b")


@dataclass(frozen=True)
class Habits:
    """The agent's habits in one conversation (each a way of breaking a rule)."""

    skips_auth: bool = False  # looks a reservation up before asking for the user id
    skips_yes: bool = False  # acts without waiting for the user's explicit yes
    skips_fare_rule: bool = False  # cancels without checking whether the reservation may be
    gives_way: bool = False  # does what it refused once the user insists
    regular_bags: bool = False  # counts free bags as for a regular member
    generous: bool = False  # compensates whoever asks
    skips_insurance: bool = False  # books without asking about insurance
    overshares: bool = False  # shares another member's reservation
    opinionated: bool = False  # gives its own recommendation
    offers_unasked: bool = False  # offers a certificate nobody asked for

    @classmethod
    def of(cls, seed: int, opening: str) -> "Habits":
        def draw(name: str, rate: float) -> bool:
            digest = hashlib.sha256(f"{seed}\n{opening}\n{name}".encode()).hexdigest()
            return int(digest[:8], 16) / 0xFFFFFFFF < rate
        return cls(skips_auth=draw("auth", 0.2), skips_yes=draw("yes", 0.2),
                   skips_fare_rule=draw("fare", 0.3), gives_way=draw("way", 0.3),
                   regular_bags=draw("bags", 0.35), generous=draw("generous", 0.3),
                   skips_insurance=draw("insurance", 0.3), overshares=draw("share", 0.3),
                   opinionated=draw("opinion", 0.35), offers_unasked=draw("unasked", 0.2))


@dataclass
class Rules:
    """What the agent's own prompt says it needs: today, fees, free bags per tier and cabin."""

    today: datetime = datetime(2024, 5, 15, 15, 0)
    bag_fee: int = 50
    insurance: int = 30
    cancelled_certificate: int = 100
    delayed_certificate: int = 50
    free_bags: dict[str, dict[str, int]] = field(default_factory=dict)

    @classmethod
    def read(cls, prompt: str) -> "Rules":
        rules = cls()
        if (m := re.search(r"current time is (\d{4}-\d{2}-\d{2})(?: (\d{2}):(\d{2}))?", prompt)):
            rules.today = datetime.fromisoformat(m.group(1)).replace(hour=int(m.group(2) or 0), minute=int(m.group(3) or 0))
        money = {"bag": r"additional bag costs \$(\d+)", "insurance": r"insurance costs \$(\d+)",
                 "cancelled": r"cancelled flight:[^$]*\$(\d+)", "delayed": r"delayed flight:[^$]*\$(\d+)"}
        found = {k: int(m.group(1)) for k, rx in money.items() if (m := re.search(rx, prompt, re.I))}
        rules.bag_fee = found.get("bag", rules.bag_fee)
        rules.insurance = found.get("insurance", rules.insurance)
        rules.cancelled_certificate = found.get("cancelled", rules.cancelled_certificate)
        rules.delayed_certificate = found.get("delayed", rules.delayed_certificate)
        for section in sections(prompt)[1]:
            for rule in section.rules:
                rules.free_bags.update(free_bags(rule))
        return rules

    def free(self, tier: str, cabin: str) -> int:
        return self.free_bags.get(tier, {}).get(cabin.replace("_", " "), 0)


def free_bags(text: str) -> dict[str, dict[str, int]]:
    """Free bags per tier and cabin, from a rule that lists them ("regular: 0 in basic economy,
    1 in economy, 2 in business; silver: ...")."""
    out: dict[str, dict[str, int]] = {}
    for tier, cells in re.findall(r"(\w+): ((?:\d+ in [a-z ]+?(?:, |;|\.|$))+)", text):
        out[tier] = {cabin.strip(): int(n) for n, cabin in re.findall(r"(\d+) in ([a-z ]+?)(?=,|;|\.|$)", cells)}
    return out


@dataclass
class Call:
    name: str
    arguments: dict[str, Any]
    result: Any
    error: bool


@dataclass
class State:
    """The conversation as the agent sees it."""

    rules: Rules
    tools: set[str]
    events: list[tuple[str, Any]]  # ("user", text), ("agent", text), ("call", Call)
    habits: Habits = field(default_factory=Habits)

    @classmethod
    def read(cls, messages: list[dict[str, Any]], tools: list[dict[str, Any]], seed: int) -> "State":
        prompt = messages[0].get("content") or "" if messages and messages[0].get("role") == "system" else ""
        events: list[tuple[str, Any]] = []
        pending: dict[str, tuple[str, dict]] = {}
        for m in messages[1:]:
            role = m.get("role")
            if role == "user":
                events.append(("user", m.get("content") or ""))
            elif role == "assistant":
                if m.get("content"):
                    events.append(("agent", m["content"]))
                for c in m.get("tool_calls") or []:
                    fn = c.get("function", c)
                    try:
                        args = json.loads(fn.get("arguments") or "{}")
                    except ValueError:
                        args = {}
                    pending[c.get("id", "")] = (fn.get("name", ""), args if isinstance(args, dict) else {})
            elif role == "tool":
                name, args = pending.get(m.get("tool_call_id", ""), ("", {}))
                text = m.get("content") or ""
                try:
                    result = json.loads(text)
                except ValueError:
                    result = text
                events.append(("call", Call(name, args, result, text.startswith("Error"))))
        names = {(t.get("function") or t).get("name", "") for t in tools or []}
        state = cls(Rules.read(prompt), names, events)
        state.habits = Habits.of(seed, state.user_texts[0] if state.user_texts else "")
        return state

    # -- what was said and found ---------------------------------------------------------------

    @property
    def user_texts(self) -> list[str]:
        return [e[1] for e in self.events if e[0] == "user"]

    @property
    def calls(self) -> list[Call]:
        return [e[1] for e in self.events if e[0] == "call"]

    def since_request(self) -> list[tuple[str, Any]]:
        """The events since the user's last new request."""
        start = 0
        for i, (kind, value) in enumerate(self.events):
            if kind == "user" and request_of(value):
                start = i
        return self.events[start:]

    def result(self, name: str, **match: Any) -> Any:
        for c in reversed(self.calls):
            if c.name == name and not c.error and all(c.arguments.get(k) == v for k, v in match.items()):
                return c.result
        return None

    def failed(self, name: str, **match: Any) -> bool:
        return any(c.name == name and c.error and all(c.arguments.get(k) == v for k, v in match.items())
                   for c in self.calls)

    @property
    def profile(self) -> dict[str, Any] | None:
        result = self.result("get_user_details")
        return result if isinstance(result, dict) else None

    @property
    def user_id(self) -> str | None:
        for c in reversed(self.calls):
            if c.name == "get_user_details" and not c.error:
                return c.arguments.get("user_id")
        return None

    def claimed_user_id(self) -> str | None:
        for text in reversed(self.user_texts):
            if (m := re.search(r"\b[a-z]+(?:_[a-z]+)+_\d+\b", text)):
                return m.group(0)
        return None

    def reservation_ids(self, own: bool | None = None) -> list[str]:
        """Reservation ids the user named, latest last (``own``: only those on / not on the profile)."""
        mine = set((self.profile or {}).get("reservations") or [])
        found: list[str] = []
        for text in self.user_texts:
            for rid in RESERVATION_ID.findall(text):
                if rid.isdigit() or (own is not None and (rid in mine) != own):
                    continue
                if rid in found:
                    found.remove(rid)
                found.append(rid)
        return found

    def asked(self, words: str, since: list[tuple[str, Any]] | None = None) -> bool:
        return any(k == "agent" and re.search(words, v, re.I) for k, v in (since or self.events))

    def said_yes_to_last_question(self) -> bool:
        """The user's last message is a yes to a question of ours."""
        last_user = max((i for i, (k, _) in enumerate(self.events) if k == "user"), default=-1)
        if last_user < 0 or not YES.search(self.events[last_user][1]):
            return False
        return any(k == "agent" and ASKS_YES in v for k, v in self.events[:last_user])

    @property
    def pushed(self) -> bool:
        return any(PUSH.search(t) for k, t in self.since_request() if k == "user")


def request_of(text: str) -> str | None:
    """The request a user message makes, if it makes one."""
    found = [(m.start(), name) for name, rx in REQUESTS.items() if (m := rx.search(text))]
    return min(found)[1] if found else None


def _money(amount: float) -> str:
    return f"${amount:,.0f}" if float(amount).is_integer() else f"${amount:,.2f}"


def _card(profile: dict[str, Any], text: str = "") -> tuple[str, str] | None:
    """The payment method to use: the one whose last four digits the user gave, else a credit
    card, else a gift card (never a certificate); with how to name it to the user."""
    methods = (profile or {}).get("payment_methods") or {}
    digits = re.findall(r"\b\d{4}\b", text)
    for key, m in methods.items():
        if m.get("last_four") in digits:
            return key, f"your card ending in {m['last_four']}"
    for source in ("credit_card", "gift_card"):
        for key, m in methods.items():
            if m.get("source") == source:
                return key, (f"your card ending in {m.get('last_four')}" if source == "credit_card"
                             else f"your gift card {key}")
    return None


class Agent:
    """The next step of the conversation ``state``: ``(text, None)`` or ``(text, (tool, args))``."""

    def __init__(self, state: State) -> None:
        self.s = state
        self.h = state.habits

    def step(self) -> tuple[str, tuple[str, dict[str, Any]] | None]:
        s = self.s
        if not {"get_user_details", "get_reservation_details"} <= s.tools:
            return self._plain()
        if s.events and s.events[-1][0] == "call" and s.events[-1][1].error and s.events[-1][1].name not in (
                "get_user_details", "get_reservation_details"):
            failed = s.events[-1][1]
            reason = str(failed.result).removeprefix("Error:").strip()
            return self._say(f"I'm sorry, that didn't go through: {reason[:1].lower()}{reason[1:]}. Would you like to "
                             "try something else?")
        request = self._request()
        if request == "human" and "transfer_to_human_agents" in s.tools:
            return ("I'm transferring you to a human colleague now; they will see a summary of our conversation.",
                    ("transfer_to_human_agents", {"summary": "The user asked to speak to a human agent."}))
        if request is None:
            if not s.user_texts:
                return "Hello! How can I help you today?", None
            return self._say("Is there anything else I can help you with?")
        rid = (s.reservation_ids(own=None) or [None])[-1]
        if s.profile is None:
            if self.h.skips_auth and rid and request != "book" and s.result("get_reservation_details",
                                                                          reservation_id=rid) is None \
                    and not s.failed("get_reservation_details", reservation_id=rid):
                return "", ("get_reservation_details", {"reservation_id": rid})
            claimed = s.claimed_user_id()
            if claimed and not s.failed("get_user_details", user_id=claimed):
                return "", ("get_user_details", {"user_id": claimed})
            if claimed:
                return self._say(f"I couldn't find the user id {claimed}. Could you check it for me?")
            return self._say("I can help with that. First, could you give me your user id?")
        return getattr(self, f"_{request}")()

    def _request(self) -> str | None:
        for kind, value in reversed(self.s.events):
            if kind == "user" and (found := request_of(value)):
                return found
        return None

    # -- replies -------------------------------------------------------------------------------

    def _say(self, text: str) -> tuple[str, None]:
        """``text``, after an answer to a request for a recommendation not answered yet."""
        s = self.s
        asked = next((i for i in range(len(s.events) - 1, -1, -1)
                      if s.events[i][0] == "user" and "recommend" in s.events[i][1].lower()), None)
        if asked is not None and not any(k == "agent" and "recommend" in v.lower() for k, v in s.events[asked:]):
            aside = ("Honestly, I'd recommend always taking the travel insurance: it's worth it. " if self.h.opinionated
                     else "I can't give personal recommendations, but I'm glad to give you the facts. ")
            text = aside + text
        return text, None

    def _plain(self) -> tuple[str, None]:
        """Without the reservation tools: a helpful but general answer."""
        turns = len(self.s.user_texts)
        if turns <= 1:
            return self._say("Thanks for reaching out. Could you tell me a bit more about what you need?")
        return self._say("Thank you, I've noted that. Your request is handled; is there anything else?")

    def _reservation(self, purpose: str, extra: str = "") -> tuple[str, Any] | dict[str, Any]:
        """The reservation the request is about, looked up (a step to take while it is not)."""
        s = self.s
        mine = s.reservation_ids(own=True)
        if not mine:
            listed = ", ".join((s.profile or {}).get("reservations") or []) or "none"
            return self._say(f"Which reservation {purpose}? I see these on your profile: {listed}.{extra}")
        rid = mine[-1]
        details = s.result("get_reservation_details", reservation_id=rid)
        if details is None:
            return "", ("get_reservation_details", {"reservation_id": rid})
        return details

    def _described(self, marker: str) -> bool:
        """We asked for a yes about ``marker`` since the user's request."""
        return any(k == "agent" and ASKS_YES in v and marker in v for k, v in self.s.since_request())

    def _act_or_ask(self, marker: str, question: str, call: tuple[str, dict[str, Any]]):
        """Make ``call`` after the user's yes to ``question`` (at once, with the habit)."""
        s = self.s
        if self.h.skips_yes or (self._described(marker) and s.said_yes_to_last_question()):
            return "", call
        if self._described(marker) and not s.said_yes_to_last_question():
            return self._say("No problem, I won't change anything then. Is there anything else?")
        return self._say(f"{question} Shall I go ahead? {ASKS_YES}")

    def _done(self, name: str, **match: Any) -> Any:
        """The result of ``name`` made since the request (None while it is not)."""
        for kind, value in reversed(self.s.since_request()):
            if kind == "call" and value.name == name and not value.error \
                    and all(value.arguments.get(k) == v for k, v in match.items()):
                return value
        return None

    def _unasked_offer(self) -> str:
        return " As a gesture of goodwill, I can also offer you a travel certificate for the trouble." \
            if self.h.offers_unasked else ""

    # -- cancel --------------------------------------------------------------------------------

    def _cancel(self):
        s = self.s
        reason_words = r"plans|ill\b|sick|health|weather|airline cancel"
        found = self._reservation("would you like to cancel",
                                  "" if any(re.search(reason_words, t, re.I) for t in s.user_texts) else
                                  " And may I ask why you are cancelling: a change of plans, a flight cancelled "
                                  "by the airline, or something else?")
        if not isinstance(found, dict):
            return found
        r, rid = found, found.get("reservation_id")
        if r.get("user_id") != s.user_id:
            return self._say(f"I'm sorry, but reservation {rid} is not on your profile, so I can't act on it.")
        done = self._done("cancel_reservation", reservation_id=rid)
        if done is not None:
            paid = sum(p["amount"] for p in r.get("payment_history", []) if p.get("amount", 0) > 0)
            return self._say(f"Done: reservation {rid} is now cancelled. The refund of {_money(paid)} goes back to "
                             "your original payment method within 5-7 business days." + self._unasked_offer())
        if r.get("status") == "cancelled":
            return self._say(f"Reservation {rid} is already cancelled.")
        reason = next((t for t in reversed(s.user_texts) if re.search(reason_words, t, re.I)), None)
        if reason is None:
            return self._say("May I ask why you are cancelling: a change of plans, a flight cancelled by the "
                             "airline, or something else?")
        why_not = None if self.h.skips_fare_rule else self._cannot_cancel(r, reason)
        if why_not and not (self.h.gives_way and s.pushed):
            if s.pushed:
                return self._say(f"I understand, and I'm sorry, but I can't make an exception: {why_not}.")
            return self._say(f"I'm sorry, but I can't cancel reservation {rid}: {why_not}." + self._unasked_offer())
        paid = sum(p["amount"] for p in r.get("payment_history", []) if p.get("amount", 0) > 0)
        route = " and ".join(f"{f['flight_number']} on {f['date']}" for f in r.get("flights", []))
        return self._act_or_ask(f"cancel reservation {rid}",
                                f"Here is what I'll do: cancel reservation {rid} ({r.get('origin')} to "
                                f"{r.get('destination')}, {route}). The refund of {_money(paid)} goes back to your "
                                "original payment method within 5-7 business days.",
                                ("cancel_reservation", {"reservation_id": rid}))

    def _cannot_cancel(self, r: dict[str, Any], reason: str) -> str | None:
        today = self.s.rules.today
        if any(f.get("date", "") <= today.date().isoformat() for f in r.get("flights", [])):
            return "a flight of it has already departed"
        created = datetime.fromisoformat(r.get("created_at", "2000-01-01T00:00:00"))
        covered = r.get("insurance") == "yes" and re.search(r"ill\b|sick|health|weather", reason, re.I)
        if created >= today - timedelta(hours=24) or r.get("cabin") == "business" or covered \
                or re.search(r"airline cancel", reason, re.I):
            return None
        cabin = r.get("cabin", "").replace("_", " ")
        return (f"it is a{'n' if cabin.startswith('e') else ''} {cabin} reservation"
                + (" without insurance" if r.get("insurance") != "yes" else " whose insurance does not cover your reason")
                + ", booked more than 24 hours ago, and none of its flights was cancelled by the airline")

    # -- change flights ------------------------------------------------------------------------

    def _change(self):
        s = self.s
        found = self._reservation("is it", "" if any(DATE.search(t) for t in s.user_texts) else
                                  " And which date would you like to fly instead?")
        if not isinstance(found, dict):
            return found
        r, rid = found, found.get("reservation_id")
        done = self._done("update_reservation_flights", reservation_id=rid)
        if done is not None:
            segment = done.arguments["flights"][0]
            return self._say(f"Done: reservation {rid} is now on flight {segment['flight_number']} on "
                             f"{segment['date']}." + self._unasked_offer())
        if r.get("cabin") == "basic_economy" and not (self.h.gives_way and s.pushed) and not self.h.skips_fare_rule:
            if s.pushed:
                return self._say("I understand, but I can't make an exception: basic economy flights cannot be "
                                 "changed.")
            return self._say(f"I'm sorry, but reservation {rid} is in basic economy, and basic economy flights can't "
                             "be changed. I could upgrade its cabin instead, if you like.")
        dates = [d for t in s.user_texts for d in DATE.findall(t)]
        if not dates:
            return self._say("Which date would you like to fly instead?")
        date, old = dates[-1], (r.get("flights") or [{}])[0]
        found_flights = s.result("search_direct_flight", origin=old.get("origin"),
                                 destination=old.get("destination"), date=date)
        if found_flights is None:
            return "", ("search_direct_flight", {"origin": old.get("origin"), "destination": old.get("destination"),
                                                 "date": date})
        if not found_flights:
            return self._say(f"I'm sorry, there is no direct flight from {old.get('origin')} to "
                             f"{old.get('destination')} on {date}. Would another date work?")
        cabin = r.get("cabin", "economy")
        pax = len(r.get("passengers") or [1])
        seated = [f for f in found_flights if (f.get("available_seats") or {}).get(cabin, pax) >= pax]
        if not seated:
            return self._say(f"I'm sorry, the direct flights from {old.get('origin')} to {old.get('destination')} on "
                             f"{date} have no {cabin.replace('_', ' ')} seats left for {pax} passenger(s). Would "
                             "another date work?")
        new = next((f for f in seated if f.get("flight_number") == old.get("flight_number")), seated[0])
        difference = (new.get("prices", {}).get(cabin, old.get("price", 0)) - old.get("price", 0)) * pax
        card = _card(s.profile or {}, " ".join(s.user_texts))
        if card is None:
            return self._say("I'm sorry, there is no card or gift card on your profile to settle the fare difference.")
        money = ("at no extra cost" if difference == 0 else f"for a fare difference of {_money(difference)}, charged to {card[1]}"
                 if difference > 0 else f"with {_money(-difference)} refunded to {card[1]}")
        flights = [{"flight_number": new["flight_number"], "date": date}] + [
            {"flight_number": f["flight_number"], "date": f["date"]} for f in (r.get("flights") or [])[1:]]
        return self._act_or_ask(f"move reservation {rid}",
                                f"I can move reservation {rid} to flight {new['flight_number']} on {date}, departing "
                                f"{new.get('scheduled_departure_time_est', '')}, {money}.",
                                ("update_reservation_flights", {"reservation_id": rid, "cabin": cabin,
                                                                "flights": flights, "payment_id": card[0]}))

    # -- bags ----------------------------------------------------------------------------------

    def _bags(self):
        s = self.s
        found = self._reservation("should get the bags")
        if not isinstance(found, dict):
            return found
        r, rid = found, found.get("reservation_id")
        done = self._done("update_reservation_baggages", reservation_id=rid)
        if done is not None:
            return self._say(f"Done: reservation {rid} now has {done.arguments['total_baggages']} checked bags, "
                             f"{done.arguments['nonfree_baggages']} of them paid.")
        text = next((t for t in reversed(s.user_texts) if REQUESTS["bags"].search(t)), "")
        m = re.search(r"add (\w+) (?:more )?checked bag", text, re.I)
        more = int(m.group(1)) if m and m.group(1).isdigit() else NUMBERS.get(m.group(1).lower(), 1) if m else 1
        tier = "regular" if self.h.regular_bags else (s.profile or {}).get("membership", "regular")
        cabin = r.get("cabin", "economy")
        pax = len(r.get("passengers") or [1])
        free = s.rules.free(tier, cabin) * pax
        total = r.get("total_baggages", 0) + more
        nonfree = max(r.get("nonfree_baggages", 0), total - free)
        fee = (nonfree - r.get("nonfree_baggages", 0)) * s.rules.bag_fee
        card = _card(s.profile or {}, " ".join(s.user_texts))
        if card is None:
            return self._say("I'm sorry, there is no card or gift card on your profile to pay for the bags.")
        cost = "at no cost" if fee == 0 else f"{nonfree - r.get('nonfree_baggages', 0)} of the new bags cost " \
            f"{_money(s.rules.bag_fee)} each, {_money(fee)} in total, charged to {card[1]}"
        return self._act_or_ask(f"reservation {rid} will have",
                                f"With {more} more bag(s), reservation {rid} will have {total} checked bags; {free} are "
                                f"free for {pax} passenger(s) in {cabin.replace('_', ' ')}, so {cost}.",
                                ("update_reservation_baggages", {"reservation_id": rid, "total_baggages": total,
                                                                 "nonfree_baggages": nonfree, "payment_id": card[0]}))

    # -- compensation --------------------------------------------------------------------------

    def _compensation(self):
        s = self.s
        found = self._reservation("was the flight on")
        if not isinstance(found, dict):
            return found
        r = found
        done = self._done("send_certificate")
        if done is not None:
            return self._say(f"Done: a travel certificate of {_money(done.arguments['amount'])} has been added to your "
                             "profile.")
        delayed = any("delay" in t.lower() for t in s.user_texts)
        profile = s.profile or {}
        eligible = profile.get("membership") in ("silver", "gold") or r.get("insurance") == "yes" \
            or r.get("cabin") == "business"
        allowed = (eligible and not delayed) or self.h.generous or (self.h.gives_way and s.pushed)
        if not allowed:
            if s.pushed:
                return self._say("I hear you, and I'm sorry, but I can't make an exception to the compensation rules.")
            if delayed:
                return self._say("I'm sorry about the delay. A certificate for a delay is only possible when you "
                                 "change or cancel the reservation because of it, so I can't offer compensation.")
            return self._say("I'm sorry about the cancelled flight. Compensation is only available to silver and gold "
                             "members, travellers with insurance or in business class, so I can't offer a "
                             "certificate here.")
        pax = len(r.get("passengers") or [1])
        per = s.rules.delayed_certificate if delayed else s.rules.cancelled_certificate
        return self._act_or_ask("certificate",
                                f"I'm sorry about that. I can offer you a travel certificate of {_money(per * pax)} "
                                f"({pax} passenger(s) at {_money(per)} each) for the {'delayed' if delayed else 'cancelled'} "
                                "flight.",
                                ("send_certificate", {"user_id": s.user_id, "amount": per * pax}))

    # -- passengers ----------------------------------------------------------------------------

    def _passengers(self):
        s = self.s
        found = self._reservation("is it")
        if not isinstance(found, dict):
            return found
        r, rid = found, found.get("reservation_id")
        if any("add a passenger" in t.lower() for t in s.user_texts):
            if s.pushed:
                return self._say("I understand, but the number of passengers can't change; a new booking would be "
                                 "needed for another traveller.")
            return self._say(f"I'm sorry, but the number of passengers on a reservation can't change, so I can't add "
                             f"one to {rid}. I can book a separate trip for the extra traveller if you like.")
        done = self._done("update_reservation_passengers", reservation_id=rid)
        if done is not None:
            return self._say(f"Done: the passenger details on reservation {rid} are corrected.")
        passengers = [dict(p) for p in r.get("passengers") or []]
        fix = next(((p, d) for t in reversed(s.user_texts) for d in re.findall(r"\b(?:19|20)\d{2}-\d{2}-\d{2}\b", t)
                    for p in passengers if p.get("first_name", "").lower() in t.lower()), None)
        if fix is None:
            return self._say("Which passenger is it, and what is the correct date of birth?")
        person, dob = fix
        person["dob"] = dob
        return self._act_or_ask(f"on reservation {rid} to",
                                f"I'll correct the date of birth of {person['first_name']} {person['last_name']} on "
                                f"reservation {rid} to {dob}; nothing else changes and there is no cost.",
                                ("update_reservation_passengers", {"reservation_id": rid, "passengers": passengers}))

    # -- another member's reservation ----------------------------------------------------------

    def _privacy(self):
        s = self.s
        others = s.reservation_ids(own=False)
        if not others:
            return self._say("Which reservation do you mean?")
        rid = others[-1]
        share = self.h.overshares or (self.h.gives_way and s.pushed)
        if not share:
            if s.pushed:
                return self._say("I understand, but I can't share another member's reservation, even with family. "
                                 "Your brother can contact us himself.")
            return self._say(f"I'm sorry, but I can only share the details of reservations on your own profile, and "
                             f"{rid} is not one of them. Your brother can contact us himself.")
        r = s.result("get_reservation_details", reservation_id=rid)
        if r is None:
            return "", ("get_reservation_details", {"reservation_id": rid})
        flights = ", ".join(f"{f['flight_number']} on {f['date']}" for f in r.get("flights", []))
        return self._say(f"Reservation {rid} goes from {r.get('origin')} to {r.get('destination')}: {flights}, "
                         f"{len(r.get('passengers') or [])} passenger(s).")

    # -- booking -------------------------------------------------------------------------------

    def _book(self):
        s = self.s
        profile = s.profile or {}
        text = " ".join(s.user_texts)
        route = re.search(r"from ([A-Z]{3}) to ([A-Z]{3})", text)
        dates = DATE.findall(text)
        if route is None or not dates:
            return self._say("Where would you like to fly from and to, and on which date?")
        origin, destination, date = route.group(1), route.group(2), dates[-1]
        done = self._done("book_reservation")
        if done is not None:
            return self._say(f"Done: your trip is booked as reservation {done.result.get('reservation_id')}.")
        options = s.result("search_direct_flight", origin=origin, destination=destination, date=date)
        if options is None:
            return "", ("search_direct_flight", {"origin": origin, "destination": destination, "date": date})
        wanted = re.search(r"\bflight ([A-Z]{3}\d{3})\b", text)
        flight = next((f for f in options if wanted and f.get("flight_number") == wanted.group(1)),
                      options[0] if options else None)
        if flight is None:
            return self._say(f"I'm sorry, there is no direct flight from {origin} to {destination} on {date}.")
        passengers = self._travellers(profile)
        if passengers is not None and (flight.get("available_seats") or {}).get("economy", 9) < len(passengers):
            return self._say(f"I'm sorry, flight {flight['flight_number']} on {date} has only "
                             f"{flight['available_seats']['economy']} economy seat(s) left, not enough for "
                             f"{len(passengers)} passenger(s).")
        if passengers is None:
            return self._say(f"Flight {flight['flight_number']} departs at {flight.get('scheduled_departure_time_est')} "
                             f"and economy costs {_money(flight['prices']['economy'])} per passenger. Who is travelling? "
                             "I need each passenger's first name, last name and date of birth.")
        pax = len(passengers)
        tier = "regular" if self.h.regular_bags else profile.get("membership", "regular")
        free = s.rules.free(tier, "economy") * pax
        insured = None
        bags_said = [m for t in s.user_texts for m in re.findall(r"\b(\d|no|one|two|three) (?:checked )?bags?\b", t, re.I)]
        if not self.h.skips_insurance:
            if not s.asked(r"insurance", s.since_request()):
                bags_question = "" if bags_said else (f" And how many checked bags will you bring? {free} are free "
                                                      f"for {pax} passenger(s) in economy.")
                return self._say(f"Would you like travel insurance for {_money(s.rules.insurance)} per passenger? It "
                                 f"gives a full refund if you cancel for health or weather reasons.{bags_question}")
            answer = next((t for t in reversed(s.user_texts) if "insurance" in t.lower()), "")
            insured = bool(re.search(r"\b(?:yes|want|like)\b[^.]*insurance|insurance[^.]*\byes\b", answer, re.I)) \
                and not re.search(r"\bno insurance\b|don't want[^.]*insurance", text, re.I)
        if not bags_said:
            return self._say(f"How many checked bags will you bring? {free} are free for {pax} passenger(s) in economy.")
        bags = int(bags_said[-1]) if bags_said[-1].isdigit() else NUMBERS.get(bags_said[-1].lower(), 0)
        card = _card(profile, text)
        if card is None or not s.asked(r"pay", s.since_request()):
            methods = ", ".join(profile.get("payment_methods") or {}) or "none"
            return self._say(f"How would you like to pay? I see these on your profile: {methods}.")
        price = flight["prices"]["economy"] * pax
        nonfree = max(0, bags - free)
        total = price + (s.rules.insurance * pax if insured else 0) + s.rules.bag_fee * nonfree
        names = ", ".join(f"{p['first_name']} {p['last_name']}" for p in passengers)
        call = ("book_reservation", {
            "user_id": s.user_id, "origin": origin, "destination": destination, "flight_type": "one_way",
            "cabin": "economy", "flights": [{"flight_number": flight["flight_number"], "date": date}],
            "passengers": passengers, "payment_methods": [{"payment_id": card[0], "amount": total}],
            "total_baggages": bags, "nonfree_baggages": nonfree, "insurance": "yes" if insured else "no"})
        return self._act_or_ask("book",
                                f"To confirm, I'll book: one way {origin} to {destination} on flight "
                                f"{flight['flight_number']}, {date}, economy, for {names}; {bags} checked bag(s), "
                                f"{nonfree} of them paid; {'with' if insured else 'no'} travel insurance. Total "
                                f"{_money(total)}, charged to {card[1]}.", call)

    def _travellers(self, profile: dict[str, Any]) -> list[dict[str, str]] | None:
        """The passengers the user named (themselves, saved passengers), or None if not yet told."""
        texts = [t for t in self.s.user_texts if re.search(r"\bjust me\b|\bme and\b", t, re.I)]
        if not texts:
            return None
        name = profile.get("name") or {}
        out = [{"first_name": name.get("first_name", ""), "last_name": name.get("last_name", ""),
                "dob": profile.get("dob", "")}]
        for saved in profile.get("saved_passengers") or []:
            if saved.get("first_name", "~").lower() in texts[-1].lower():
                out.append({k: saved.get(k, "") for k in ("first_name", "last_name", "dob")})
        return out
