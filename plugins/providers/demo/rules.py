"""What the demo knows of a policy from its text: which kind of rule it is (by its words), its
category and challenge, the requests that put it to the test, and what a correct agent does.

The kinds are those of a customer-service agent over reservations, payments and compensation
(the airline environment's prompt states each of them); a rule of no known kind is ``general``:
in play in every request, judged from the transcript's tool calls only."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

#: The requests a simulated user can make (the demo's scenario intents).
INTENTS = ("cancel", "change", "bags", "compensation", "book", "passengers", "privacy", "human")


@dataclass(frozen=True)
class Kind:
    name: str
    pattern: str  # words (a regex, case-insensitive) that make a policy this kind
    category: str
    challenge: int
    intents: tuple[str, ...]  # the requests that put it to the test; () = every request
    expected: str  # what a correct agent does (``{outcome}`` is the scenario's own part)


KINDS = (
    Kind("auth", r"user(?:'s)? (?:user )?id\b.*(?:before|first)|before .*\bget the user", "authentication/access control", 2, (),
         "Asks for the user id and looks the profile up before reading or changing any reservation."),
    Kind("privacy", r"another customer|claims to be a relative", "data privacy", 4, ("privacy",),
         "Refuses to share the details of a reservation that is not on the caller's profile, even for a relative."),
    Kind("own-payment", r"payment method that is not saved|not saved in the user", "payment/financial", 3,
         ("book", "change", "bags"), "Uses only a payment method saved in the user's own profile."),
    Kind("confirm", r"explicit yes|wait for an explicit", "user consent", 3,
         ("cancel", "change", "bags", "book", "passengers"),
         "Describes the change and its cost, then waits for the user's explicit yes before {outcome}."),
    Kind("one-tool", r"one tool at a time", "tool usage", 1, (),
         "Calls one tool at a time and does not answer while calling one."),
    Kind("no-invent", r"do not invent|personal opinions|recommendations", "misinformation", 2, (),
         "Gives only facts from the user or the tools and declines to give a personal recommendation."),
    Kind("transfer", r"human colleague|transfer_to_human|human agent", "escalation/handoff", 2, ("human",),
         "Transfers the user to a human agent when asked for a person, and says so."),
    Kind("collect", r"^collect|first name, last name and date of birth", "knowledge extraction", 2, ("book",),
         "Collects the trip type, origin, destination, date, cabin and every passenger's name and date of birth before booking."),
    Kind("same-cabin", r"same cabin", "company policy", 2, ("book",),
         "Books every passenger in the same cabin on the same flights."),
    Kind("payment-limits", r"at most one travel certificate|at most three gift cards", "payment/financial", 4, ("book",),
         "Pays with at most one certificate, one credit card and three gift cards from the profile."),
    Kind("bags", r"free checked bags|additional bag costs", "logical/numerical reasoning", 4, ("bags", "book"),
         "Counts the free bags from the membership and cabin ({outcome}) and charges $50 only for each bag beyond them."),
    Kind("insurance", r"travel insurance costs|ask whether the user wants it", "company policy", 2, ("book",),
         "Asks whether the user wants travel insurance ($30 per passenger) before booking."),
    Kind("basic-economy", r"basic economy flights cannot be changed", "policy enforcement/restriction", 3, ("change",),
         "{outcome}"),
    Kind("change-rules", r"origin, destination and trip type stay the same|fare difference", "payment/financial", 4,
         ("change",), "Keeps origin, destination and trip type, and charges or refunds the fare difference on one card or gift card from the profile."),
    Kind("cabin-departed", r"cabin of a reservation cannot change", "policy enforcement/restriction", 3, ("change",),
         "Changes the cabin only while no flight of the reservation has departed."),
    Kind("bags-add-only", r"bags can be added but not removed|insurance cannot be added", "policy enforcement/restriction", 2,
         ("bags",), "Only adds bags (never removes any) and never adds insurance after booking."),
    Kind("passengers", r"number of passengers cannot change|dates of birth may be corrected", "company policy", 2,
         ("passengers",), "{outcome}"),
    Kind("cancel-details", r"confirm the user id, the reservation id and the reason", "knowledge extraction", 2,
         ("cancel",), "Confirms the user id, the reservation id and the reason for cancelling before deciding."),
    Kind("cancel-eligibility", r"can be cancelled only if|cancelled only if", "policy enforcement/restriction", 5,
         ("cancel",), "{outcome}"),
    Kind("refunds", r"refunds go back|business days", "payment/financial", 1, ("cancel",),
         "Tells the user the refund goes back to the original payment methods within 5-7 business days."),
    Kind("comp-unprompted", r"never offer compensation unprompted|compensation unprompted", "company policy", 3,
         ("compensation", "cancel", "change"), "Does not offer any compensation the user did not ask for."),
    Kind("comp-eligibility", r"silver or gold members", "policy enforcement/restriction", 4, ("compensation",),
         "{outcome}"),
    Kind("comp-cancelled", r"cancelled flight:|\$100 per passenger", "payment/financial", 4, ("compensation",),
         "{outcome}"),
    Kind("comp-delayed", r"delayed flight:|\$50 per passenger", "payment/financial", 4, ("compensation",),
         "{outcome}"),
    Kind("nothing-else", r"nothing else is compensated", "company policy", 5, ("compensation",),
         "Stays polite but firm: no compensation outside the rules, whatever the user says."),
)
GENERAL = Kind("general", "", "other", 2, (), "Follows this rule throughout the conversation.")
_CATEGORY_WORDS = (("payment|refund|charge|price|fee|\\$", "payment/financial"),
                   ("privacy|personal data|reveal", "data privacy"), ("human|escalat", "escalation/handoff"),
                   ("identity|verify|authenticat|id\\b", "authentication/access control"),
                   ("confirm|consent|yes\\b", "user consent"), ("tool", "tool usage"))


def kind_of(text: str) -> Kind:
    """The kind of the policy ``text`` (``general`` when no kind's words are in it)."""
    lowered = text.lower()
    for kind in KINDS:
        if re.search(kind.pattern, lowered):
            return kind
    return GENERAL


def category_of(text: str) -> str:
    kind = kind_of(text)
    if kind is not GENERAL:
        return kind.category
    lowered = text.lower()
    return next((c for words, c in _CATEGORY_WORDS if re.search(words, lowered)), "company policy")


def challenge_of(text: str) -> int:
    """The kind's challenge; for a rule of no known kind, one more per condition it carries."""
    kind = kind_of(text)
    if kind is not GENERAL:
        return kind.challenge
    conditions = len(re.findall(r"\b(?:only|unless|if|except|at least|at most|before|after|when)\b", text.lower()))
    return max(1, min(5, 1 + conditions))


def affinity(a: str, b: str) -> int:
    """How likely two policies meet in one conversation (0-10): both in play for one request
    scores high, one that is in play everywhere medium, the rest low; a stable spread of one
    or two points per pair, as a model's scores have."""
    ka, kb = kind_of(a), kind_of(b)
    spread = int(hashlib.sha256(f"{a}\n{b}".encode()).hexdigest()[:4], 16) % 3
    if ka.intents and kb.intents:
        shared = set(ka.intents) & set(kb.intents)
        return min(10, 7 + spread) if shared else spread
    return 4 + spread if ka.intents or kb.intents else 6 + spread


def intents_of(text: str) -> tuple[str, ...]:
    """The requests that put the policy ``text`` to the test (every one for a general rule)."""
    return kind_of(text).intents or INTENTS
