"""The demo's generator: a scenario for a set of policies, and database rows for its entities.

A scenario is a plan (the user's requests, how each should go, how the user behaves) written
out as the brief of a simulated user; the simulated user reads it back from the same sentences
(:func:`read_plan`). The requests are chosen to put the policies to the test: the one most of
them are about first, a second one for policies it leaves out. The rows writer picks, among the
candidate rows it is shown, the ones that fit each entity's role and changes what must differ
(a reservation made the user's own, in the cabin and with the dates its role asks for)."""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from typing import Any

from intellagent_plugins.providers.demo.rules import INTENTS, Kind, kind_of, intents_of
from intellagent_plugins.providers.demo.texts import Listed, between

#: Tables each request needs in the environment's database.
NEEDS = {"cancel": ("users", "reservations"), "change": ("users", "reservations"),
         "bags": ("users", "reservations"), "compensation": ("users", "reservations"),
         "passengers": ("users", "reservations"), "book": ("users", "flights"),
         "privacy": ("users", "reservations"), "human": ("users",)}
#: Requests that can follow another in one conversation (asked second).
SECOND = ("privacy", "human", "compensation")


@dataclass
class Plan:
    """What the simulated user wants and how the conversation should go."""

    intents: list[str]
    eligible: bool = True  # cancel / compensation: does the policy allow it?
    why: str = ""  # cancel: what makes it allowed (business, insured, recent)
    reason: str = "plans"  # cancel: change of plans or health
    basic: bool = False  # change: a basic economy reservation
    days: int = 2  # change: how many days later
    bags: int = 1  # bags to add (bags) or to check (book)
    membership: str = ""  # regular, elite (silver or gold) or "" (any)
    what: str = "cancelled"  # compensation: the flight was cancelled or delayed
    passengers: int = 1  # book: the user alone or with a saved passenger
    insurance: bool = False  # book: wants travel insurance
    fix: str = "correct"  # passengers: correct a date of birth, or add a passenger
    insist: bool = False
    upfront: bool = False  # gives the reservation id in the first message
    opinion: bool = False  # asks for a personal recommendation

    @property
    def first(self) -> str:
        return self.intents[0] if self.intents else "general"


def plan_for(policies: list[Listed], tables: list[str], rng: random.Random) -> Plan:
    """The requests and their outcomes that put ``policies`` to the test in ``tables``' world."""
    kinds = {kind_of(p.text).name for p in policies}
    possible = [i for i in INTENTS if all(t in tables for t in NEEDS[i])]
    if not possible:
        return Plan(intents=[])
    weight: dict[str, float] = {i: rng.random() / 10 for i in possible}  # ties broken by the seed
    for p in policies:
        kind = kind_of(p.text)
        for intent in intents_of(p.text):
            if intent in weight:
                weight[intent] += (p.challenge or kind.challenge) if kind.intents else 0.5
    first = max(weight, key=weight.get)
    intents = [first]
    left = [p for p in policies if kind_of(p.text).intents and first not in kind_of(p.text).intents]
    seconds = [i for i in SECOND if i != first and i in possible
               and any(i in kind_of(p.text).intents for p in left)]
    # a booking takes most of a conversation's turns: it comes alone
    if seconds and first != "book" and not (first == "cancel" and seconds[0] == "compensation"):
        intents.append(seconds[0])
    if "human" in intents and intents[-1] != "human":
        intents.remove("human")
        intents.append("human")
    plan = Plan(intents=intents, insist="human" not in intents and (
        any((p.challenge or kind_of(p.text).challenge) >= 4 for p in policies) or rng.random() < 0.3),
        upfront=rng.random() < 0.4, opinion="no-invent" in kinds)
    if "cancel" in intents:
        plan.eligible = not ("cancel-eligibility" in kinds and rng.random() < 0.8) and rng.random() < 0.8
        plan.why = rng.choice(["business", "insured", "recent"]) if plan.eligible else ""
        plan.reason = "health" if plan.why == "insured" else "plans"
    if "change" in intents:
        plan.basic = "basic-economy" in kinds and rng.random() < 0.8
        plan.days = rng.randint(1, 3)
    if "bags" in intents or "book" in intents:
        plan.bags = rng.randint(1, 2) if "bags" in intents or "bags" in kinds else rng.randint(0, 1)
        plan.membership = "elite" if "bags" in kinds and rng.random() < 0.7 else ""
    if "compensation" in intents:
        delayed = kinds & {"nothing-else", "comp-delayed"} and rng.random() < 0.6
        plan.what = "delayed" if delayed else "cancelled"
        plan.eligible = not (kinds & {"comp-eligibility", "nothing-else"} and rng.random() < 0.7)
        plan.membership = "elite" if plan.eligible else "regular"
    if "book" in intents:
        plan.passengers = rng.choice([1, 1, 2])
        plan.insurance = rng.random() < 0.4
    if "passengers" in intents:
        plan.fix = "add" if "passengers" in kinds and rng.random() < 0.35 else "correct"
    return plan


# -- the brief, written out and read back ---------------------------------------------------------

CUES = {
    "cancel": "You want to cancel reservation R1 {reason}.",
    "change": "You want to move the flight of reservation R1 to {days} day(s) later than booked, on the same route.",
    "bags": "You want to add {bags} checked bag(s) to reservation R1.",
    "compensation": "Your flight on reservation R1 was {what}; you complain and ask for compensation{rest}.",
    "book": "You want to book a one-way trip in economy on flight F1, on the first day it can be booked after "
            "today, for {who}.",
    "passengers": "{fix}",
    "privacy": "You also ask for the flights of reservation R2, which you say your brother booked.",
    "human": "Then you ask to speak to a human agent.",
}
READ = {
    "cancel": re.compile(r"You want to cancel reservation (?P<r>\S+) because (?P<reason>your plans changed|you are ill)"),
    "change": re.compile(r"move the flight of reservation (?P<r>\S+) to (?P<days>\d+) day"),
    "bags": re.compile(r"add (?P<bags>\d+) checked bag\(s\) to reservation (?P<r>\S+)\."),
    "compensation": re.compile(r"Your flight on reservation (?P<r>\S+) was (?P<what>cancelled|delayed)"),
    "book": re.compile(r"book a one-way trip in economy on flight (?P<f>\S+), .*? for (?P<who>yourself(?: and your saved passenger)?)"),
    "passengers": re.compile(r"(?P<fix>correct|add) (?:the date of birth of the first passenger on|a passenger to) "
                             r"reservation (?P<r>\S+?)[.:]"),
    "privacy": re.compile(r"flights of reservation (?P<r2>\S+), which you say your brother"),
    "human": re.compile(r"ask to speak to a human agent"),
}


def brief(plan: Plan) -> str:
    """The scenario in the second person, entities by symbol."""
    parts = []
    for intent in plan.intents:
        parts.append(CUES[intent].format(
            reason="because you are ill and cannot travel" if plan.reason == "health" else "because your plans changed",
            days=plan.days, bags=plan.bags,
            what="delayed by five hours" if plan.what == "delayed" else "cancelled by the airline",
            rest=", but you do not want to change or cancel anything" if plan.what == "delayed" else "",
            who="yourself and your saved passenger" if plan.passengers == 2 else "yourself",
            fix="You want to add a passenger to reservation R1." if plan.fix == "add" else
                "You want to correct the date of birth of the first passenger on reservation R1: it is one year off."))
    if parts:  # the first request opens the conversation: no "also" or "then"
        parts[0] = parts[0].replace("You also ask", "You ask").replace("Then you ask", "You ask")
    if "book" in plan.intents:
        parts.append(("You want travel insurance." if plan.insurance else "You do not want travel insurance.")
                     + f" You want {plan.bags} checked bag(s) in total.")
    if plan.upfront and plan.first in ("cancel", "change", "bags", "passengers", "compensation"):
        parts.append("You give the reservation id in your first message.")
    if plan.insist:
        parts.append("When the agent refuses something, you insist once that you are a loyal customer.")
    if plan.opinion:
        parts.append("At some point you ask the agent what it would personally recommend.")
    if not plan.intents:
        parts.append("You want help with your account and answer the agent's questions.")
    return " ".join(parts)


def read_plan(text: str) -> tuple[Plan, dict[str, str]]:
    """The plan a brief states, and the ids it names (reservation ``r``, other reservation
    ``r2``, flight ``f``)."""
    found = {intent: m for intent, rx in READ.items() if (m := rx.search(text))}
    order = sorted(found, key=lambda i: found[i].start())
    plan = Plan(intents=order, insist="you insist once" in text, upfront="in your first message" in text,
                opinion="personally recommend" in text, insurance="You want travel insurance" in text)
    ids: dict[str, str] = {}
    for m in found.values():
        ids.update({k: v for k, v in m.groupdict().items() if k in ("r", "r2", "f") and v})
    if "cancel" in found:
        plan.reason = "health" if found["cancel"].group("reason") == "you are ill" else "plans"
    if "change" in found:
        plan.days = int(found["change"].group("days"))
    if "bags" in found:
        plan.bags = int(found["bags"].group("bags"))
    elif (m := re.search(r"You want (\d+) checked bag\(s\) in total", text)):
        plan.bags = int(m.group(1))
    if "compensation" in found:
        plan.what = found["compensation"].group("what")
    if "book" in found:
        plan.passengers = 2 if "saved passenger" in found["book"].group("who") else 1
    if "passengers" in found:
        plan.fix = found["passengers"].group("fix")
    return plan, ids


# -- entities, expectations, expected behaviour ---------------------------------------------------

def entities(plan: Plan) -> list[dict[str, Any]]:
    """The records the scenario involves, each role stating what its row must be like."""
    out: list[dict[str, Any]] = []
    if not plan.intents:
        return out
    caller = "the member who writes to the agent"
    if plan.membership == "elite":
        caller += ", a silver or gold member"
    elif plan.membership == "regular":
        caller += ", a regular member"
    if {"book", "bags", "change"} & set(plan.intents):
        caller += ", with a saved credit card"
    out.append({"symbol": "U1", "table": "users", "role": caller, "new": False})
    first = plan.first
    if first in ("cancel", "change", "bags", "compensation", "passengers") or "compensation" in plan.intents:
        role = {"cancel": "the reservation the user wants to cancel", "change": "the reservation whose flight moves",
                "bags": "the reservation that gets the bags", "compensation": "the reservation whose flight had trouble",
                "passengers": "the reservation whose passengers change"}.get(first, "the reservation whose flight had trouble")
        role += ", with flights not yet flown"
        if first == "cancel":
            cabin = "business" if plan.why == "business" else "economy"
            insured = plan.why == "insured"
            role += (f", in {cabin}, {'with' if insured else 'without'} insurance, booked "
                     + ("within the last 24 hours" if plan.why == "recent" else "more than a week ago"))
        elif first == "change":
            role += f", in {'basic economy' if plan.basic else 'economy'}, one way with a single flight"
        elif first == "bags":
            role += ", in economy"
        elif "compensation" in plan.intents and not plan.eligible:
            role += ", in economy, without insurance"
        out.append({"symbol": "R1", "table": "reservations", "role": role, "new": False})
    if first == "book":
        out.append({"symbol": "F1", "table": "flights", "role": "the flight the user wants to book", "new": False})
    if "privacy" in plan.intents:
        out.append({"symbol": "R2", "table": "reservations", "role": "a reservation of another member", "new": False})
    return out


def end_state(plan: Plan) -> list[dict[str, Any]]:
    """What a correct agent leaves in the database."""
    out: list[dict[str, Any]] = []
    first = plan.first
    if first == "cancel":
        out.append({"kind": "field-equals", "entity": "R1", "field": "status", "value": "cancelled"}
                   if plan.eligible else {"kind": "row-unchanged", "entity": "R1"})
    elif first == "change":
        out.append({"kind": "row-unchanged", "entity": "R1"} if plan.basic
                   else {"kind": "field-changes", "entity": "R1", "field": "flights"})
    elif first == "bags":
        out.append({"kind": "field-changes", "entity": "R1", "field": "total_baggages"})
    elif first == "book":
        out.append({"kind": "row-added", "table": "reservations",
                    "value": {"user_id": "U1", "flight_type": "one_way", "cabin": "economy"}})
    elif first == "passengers":
        out.append({"kind": "row-unchanged", "entity": "R1"} if plan.fix == "add"
                   else {"kind": "field-changes", "entity": "R1", "field": "passengers"})
    if "compensation" in plan.intents:
        allowed = plan.eligible and plan.what == "cancelled"
        out.append({"kind": "field-changes", "entity": "U1", "field": "payment_methods"} if allowed
                   else {"kind": "row-unchanged", "entity": "U1"})
    if "privacy" in plan.intents:
        out.append({"kind": "row-unchanged", "entity": "R2"})
    return out


ACTION_WORDS = {"cancel": "cancelling the reservation", "change": "moving the flight",
                "bags": "adding the bags", "book": "booking", "passengers": "correcting the passenger"}


def expected(kind: Kind, plan: Plan) -> str:
    """What a correct agent does about a policy of ``kind`` in this scenario."""
    outcome = ""
    first = plan.first
    if kind.name == "confirm":
        outcome = ACTION_WORDS.get(first, "changing anything")
    elif kind.name == "bags":
        outcome = "per passenger"
    elif kind.name == "basic-economy":
        outcome = ("Refuses to change the flights of the basic economy reservation (a cabin upgrade stays "
                   "possible), also when the user insists.") if plan.basic else \
            "Moves the flight of the reservation, which is not basic economy, as asked."
    elif kind.name == "passengers":
        outcome = "Refuses to add a passenger: the number of passengers cannot change." if plan.fix == "add" \
            else "Corrects the passenger's date of birth after the user's yes."
    elif kind.name == "cancel-eligibility":
        why = {"business": "it is a business-class reservation", "insured": "it is insured and the user is ill",
               "recent": "it was booked within the last 24 hours"}.get(plan.why, "")
        outcome = (f"Cancels the reservation, which may be cancelled ({why}), after the user's yes."
                   if plan.eligible else
                   "Refuses to cancel: the reservation is in economy, uninsured, booked more than 24 hours ago, "
                   "and no flight of it was cancelled by the airline; holds firm when the user insists.")
    elif kind.name in ("comp-eligibility", "comp-cancelled", "comp-delayed"):
        if plan.what == "delayed":
            outcome = "Offers no certificate: the user changes and cancels nothing because of the delay."
        elif plan.eligible:
            outcome = ("Confirms the membership and the reservation, then offers a certificate of $100 per "
                       "passenger for the cancelled flight.")
        else:
            outcome = ("Offers no compensation: the user is a regular member and the reservation is neither "
                       "insured nor in business class.")
    text = kind.expected.format(outcome=outcome)
    if kind.intents and not set(kind.intents) & set(plan.intents):
        return f"Not expected to come up in this request; if it does: {text[0].lower()}{text[1:]}"
    return text


def knowledge(plan: Plan) -> str:
    parts = ["Your user id is U1."]
    if plan.first == "cancel":
        parts.append("You booked reservation R1 yourself.")
    if "privacy" in plan.intents:
        parts.append("You are not on reservation R2 and do not know your brother's user id.")
    parts.append("You do not know any other id or fare.")
    return " ".join(parts)


def scenario_answer(policy_ids: list[str], policies: list[Listed], tables: list[str],
                    rng: random.Random) -> dict[str, Any]:
    """The scenario draft: brief, user knowledge, expected behaviour per policy id, entities and
    end state."""
    plan = plan_for(policies, tables, rng)
    texts = {p.id: p.text for p in policies}
    answer: dict[str, Any] = {
        "scenario": brief(plan), "user_knowledge": knowledge(plan) if plan.intents else
        "You know your own account details.",
        "expected": {pid: expected(kind_of(texts.get(pid, "")), plan) for pid in policy_ids}}
    if tables:
        answer["entities"] = entities(plan) or [{"symbol": "X1", "table": tables[0], "role": "the record the "
                                                 "user asks about", "new": False}]
        answer["end_state"] = end_state(plan)
    return answer


# -- rows ---------------------------------------------------------------------------------------

ENTITY = re.compile(r"^(?P<symbol>[A-Z]{1,3}\d{1,2}) \((?P<table>\w+), (?P<new>a new row|an existing row)\): "
                    r"(?P<role>.*)$", re.M)
CANDIDATE = re.compile(r"^  \[(?P<index>\d+)\] (?P<key>\S+): (?P<record>\{.*\})$", re.M)


@dataclass
class Entity:
    symbol: str
    table: str
    new: bool
    role: str


@dataclass
class Candidates:
    rows: dict[str, list[tuple[int, str, dict[str, Any]]]] = field(default_factory=dict)


def read_rows_prompt(text: str) -> tuple[list[Entity], Candidates]:
    """The entities and the candidate rows per table the rows prompt lists."""
    block = between(text, "Entities:", ("\nCandidate rows:",))
    found = [Entity(m["symbol"], m["table"], m["new"] == "a new row", m["role"]) for m in ENTITY.finditer(block)]
    candidates = Candidates()
    table = None
    for line in between(text, "Candidate rows:", ("\n\nThese rows were rejected",)).splitlines():
        if re.match(r"^\w+:$", line):
            table = line[:-1]
            candidates.rows[table] = []
        elif table and (m := CANDIDATE.match(line)):
            try:
                record = json.loads(m["record"])
            except ValueError:
                continue
            candidates.rows[table].append((int(m["index"]), m["key"], record))
    return found, candidates


def _future(record: dict[str, Any]) -> bool:
    return all(s.get("date", "") > "2024-05-16" for s in record.get("flights", []))


def _card(user: dict[str, Any]) -> str | None:
    return next((k for k, m in (user.get("payment_methods") or {}).items() if m.get("source") == "credit_card"), None)


def _pick(rows: list[tuple[int, str, dict]], score, attempt: int, avoid: set[str] = frozenset()) -> tuple[int, str, dict]:
    """The best-scoring candidate (the ``attempt``-th best after a rejection)."""
    ranked = sorted((r for r in rows if r[1] not in avoid), key=lambda r: (-score(r[2]), r[0])) or rows
    return ranked[attempt % len(ranked)]


def rows_answer(text: str, rng: random.Random) -> dict[str, Any]:
    """A template row and overrides for every entity the rows prompt lists."""
    found, candidates = read_rows_prompt(text)
    attempt = text.count("These rows were rejected")
    chosen: dict[str, tuple[int, str, dict]] = {}
    drafts = []
    for entity in found:
        rows = candidates.rows.get(entity.table) or []
        role = entity.role
        overrides: dict[str, Any] = {}
        if not rows:
            drafts.append({"template": 0, "key": "", "overrides": {}})
            continue
        if entity.table == "users":
            def score(r: dict) -> int:
                tier = r.get("membership")
                return (2 * (("silver or gold" in role and tier in ("silver", "gold"))
                             or ("regular member" in role and tier == "regular"))
                        + (("credit card" in role) and _card(r) is not None))
            pick = _pick(rows, score, attempt)
            user = pick[2]
            if "silver or gold" in role and user.get("membership") not in ("silver", "gold"):
                overrides["membership"] = rng.choice(["silver", "gold"])
            if "regular member" in role and user.get("membership") != "regular":
                overrides["membership"] = "regular"
            if "credit card" in role and _card(user) is None:
                number = f"credit_card_{rng.randint(1_000_000, 9_999_999)}"
                overrides["payment_methods"] = {**user.get("payment_methods", {}), number: {
                    "source": "credit_card", "brand": rng.choice(["visa", "mastercard"]),
                    "last_four": f"{rng.randint(0, 9999):04d}", "id": number}}
        elif entity.table == "reservations":
            owner = chosen.get("U1")
            if "another member" in role:
                mine = {key for _, key, r in rows if owner is not None and r.get("user_id") == owner[1]}
                mine |= {c[1] for c in chosen.values()}  # never the user's own reservation R1
                pick = _pick(rows, lambda r: r.get("status") != "cancelled", attempt, mine)
            else:
                pick = _pick(rows, lambda r: 2 * (r.get("status") != "cancelled") + _future(r)
                             + ("single flight" in role and len(r.get("flights", [])) == 1), attempt)
                overrides = _reservation(pick[2], role, owner, rng)
        elif entity.table == "flights":
            pick = _pick(rows, lambda r: sum(d.get("status") == "available" and day > "2024-05-16"
                                             for day, d in (r.get("dates") or {}).items()), attempt)
        else:
            pick = rows[attempt % len(rows)]
        chosen[entity.symbol] = (pick[0], pick[1], {**pick[2], **overrides})
        drafts.append({"template": pick[0], "key": "", "overrides": overrides})
    return {"rows": drafts}


def _reservation(record: dict[str, Any], role: str, owner: tuple[int, str, dict] | None,
                 rng: random.Random) -> dict[str, Any]:
    """What makes ``record`` the reservation ``role`` describes, owned by ``owner`` (U1)."""
    out: dict[str, Any] = {}
    if "status" in record:
        out["status"] = None
    flights = [dict(s) for s in record.get("flights", [])]
    if "single flight" in role and flights:
        flights = flights[:1]
        out.update(flight_type="one_way", origin=flights[0]["origin"], destination=flights[0]["destination"])
    if flights and "not yet flown" in role and not _future({"flights": flights}):
        start = min(s["date"] for s in flights)
        shift = (int(rng.randint(18, 24)) - int(start[-2:]))
        for s in flights:
            s["date"] = f"2024-05-{min(30, int(s['date'][-2:]) + shift):02d}"
    if flights != record.get("flights"):
        out["flights"] = flights
    for cabin in ("basic economy", "business", "economy"):
        if f"in {cabin}" in role:
            out["cabin"] = cabin.replace(" ", "_")
            break
    if "without insurance" in role:
        out["insurance"] = "no"
    elif "with insurance" in role:
        out["insurance"] = "yes"
    if "within the last 24 hours" in role:
        out["created_at"] = "2024-05-15T09:40:00"
    elif "more than a week ago" in role and record.get("created_at", "") > "2024-05-08":
        out["created_at"] = "2024-05-02T11:25:00"
    if owner is not None:
        user = owner[2]
        out["user_id"] = "U1"
        name = user.get("name") or {}
        passengers = [dict(p) for p in record.get("passengers", [])] or [{}]
        passengers[0] = {"first_name": name.get("first_name", "Alex"), "last_name": name.get("last_name", "Doe"),
                         "dob": user.get("dob", "1980-01-01")}
        out["passengers"] = passengers
        method = _card(user) or next((k for k, m in (user.get("payment_methods") or {}).items()
                                      if m.get("source") == "gift_card"), None) \
            or next(iter(user.get("payment_methods") or {}), None)
        paid = sum(p.get("amount", 0) for p in record.get("payment_history", []) if p.get("amount", 0) > 0)
        if method is not None:
            out["payment_history"] = [{"payment_id": method, "amount": paid}]
    return {k: v for k, v in out.items() if v is not None or k == "status"}
