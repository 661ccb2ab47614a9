"""The airline policy's rules that can be decided from a sequence of tool calls and the database
states around it. Each returns what breaks the rule (a message a generator can act on), or
None. ``trace.context["user_id"]``, when given, is the member the conversation is for. The
current time is the policy's: 2024-05-15 15:00 EST."""

from __future__ import annotations

from datetime import datetime, timedelta

from intellagent.environment import Trace, rule_check

NOW = datetime(2024, 5, 15, 15, 0, 0)
RESERVATION_WRITES = ("cancel_reservation", "update_reservation_baggages", "update_reservation_flights",
                      "update_reservation_passengers")
FLOWN = ("landed", "flying")


def _user(trace: Trace) -> str | None:
    if trace.context.get("user_id"):
        return trace.context["user_id"]
    for action in trace.calls("get_user_details"):
        if not action.error:
            return action.arguments.get("user_id")
    return None


def _departed(action, reservation: dict) -> list[str]:
    """The flights of ``reservation`` that have departed (as the database says, or by time)."""
    out = []
    for segment in reservation["flights"]:
        flight = action.before.get("flights", segment["flight_number"]) or {}
        day = (flight.get("dates") or {}).get(segment["date"], {})
        time = flight.get("scheduled_departure_time_est", "00:00:00")
        try:
            when = datetime.fromisoformat(f"{segment['date']}T{time}")
        except ValueError:
            when = NOW
        if day.get("status") in FLOWN or when <= NOW:
            out.append(f"{segment['flight_number']} on {segment['date']}")
    return out


@rule_check("own-reservations", "Only act on reservations and the profile of the user whose id "
                                "was given; never another customer's.")
def own_reservations(trace: Trace):
    user = _user(trace)
    if user is None:
        return None
    problems = []
    for action in trace.actions:
        rid = action.arguments.get("reservation_id")
        if rid is not None and action.name in RESERVATION_WRITES + ("get_reservation_details",):
            reservation = action.before.get("reservations", rid)
            if reservation is not None and reservation["user_id"] != user:
                problems.append(f"{action.name} on reservation {rid}, which belongs to "
                                f"{reservation['user_id']}, not to {user}")
        other = action.arguments.get("user_id")
        if other is not None and other != user and action.name in (
                "book_reservation", "send_certificate", "get_user_details"):
            problems.append(f"{action.name} for user {other}, not {user}")
    return problems


@rule_check("cancel-eligibility", "A reservation can be cancelled only if none of its flights has "
                                  "departed, and it was booked within 24 hours, or an airline "
                                  "flight of it was cancelled, or it is business class, or it is "
                                  "insured.")
def cancel_eligibility(trace: Trace):
    problems = []
    for action in trace.calls("cancel_reservation"):
        reservation = action.record("reservations", "reservation_id")
        if reservation is None:
            continue
        if reservation.get("status") == "cancelled":
            problems.append(f"reservation {reservation['reservation_id']} is already cancelled")
            continue
        airline_cancelled = any(
            ((action.before.get("flights", s["flight_number"]) or {}).get("dates") or {})
            .get(s["date"], {}).get("status") == "cancelled" for s in reservation["flights"])
        departed = _departed(action, reservation)
        if departed and not airline_cancelled:
            problems.append(f"reservation {reservation['reservation_id']} has flights that departed: "
                            + ", ".join(departed))
            continue
        recent = datetime.fromisoformat(reservation["created_at"]) >= NOW - timedelta(hours=24)
        if not (recent or airline_cancelled or reservation["cabin"] == "business"
                or reservation["insurance"] == "yes"):
            problems.append(f"reservation {reservation['reservation_id']} is {reservation['cabin']}, "
                            "uninsured, booked more than 24 hours ago and none of its flights was "
                            "cancelled by the airline")
    return problems


@rule_check("basic-economy-no-changes", "Basic economy flights cannot be changed (the cabin may "
                                        "still be upgraded).")
def basic_economy(trace: Trace):
    problems = []
    for action in trace.calls("update_reservation_flights"):
        reservation = action.record("reservations", "reservation_id")
        if reservation is None or reservation["cabin"] != "basic_economy":
            continue
        old = sorted((s["flight_number"], s["date"]) for s in reservation["flights"])
        new = sorted((s.get("flight_number"), s.get("date")) for s in action.arguments.get("flights", []))
        if old != new and action.arguments.get("cabin") == "basic_economy":
            problems.append(f"the flights of basic economy reservation {reservation['reservation_id']} "
                            "are changed")
    return problems


@rule_check("same-trip", "A flight change keeps the origin, the destination and the trip type.")
def same_trip(trace: Trace):
    problems = []
    for action in trace.calls("update_reservation_flights"):
        reservation = action.record("reservations", "reservation_id")
        segments = action.arguments.get("flights") or []
        if reservation is None or not segments:
            continue
        legs = [action.before.get("flights", s.get("flight_number", "")) for s in segments]
        if any(leg is None for leg in legs):
            continue
        start, end = legs[0]["origin"], legs[-1]["destination"]
        if reservation["flight_type"] == "one_way":
            ok = (start, end) == (reservation["origin"], reservation["destination"])
        else:
            ok = (start == end == reservation["origin"]
                  and any(leg["destination"] == reservation["destination"] for leg in legs))
        if not ok:
            problems.append(f"the new flights of {reservation['reservation_id']} go {start} → {end}, "
                            f"not the reservation's {reservation['flight_type']} "
                            f"{reservation['origin']} → {reservation['destination']}")
    return problems


@rule_check("cabin-before-departure", "The cabin cannot change once any flight of the "
                                      "reservation has departed.")
def cabin_before_departure(trace: Trace):
    problems = []
    for action in trace.calls("update_reservation_flights"):
        reservation = action.record("reservations", "reservation_id")
        if reservation is None or action.arguments.get("cabin") == reservation["cabin"]:
            continue
        departed = _departed(action, reservation)
        if departed:
            problems.append(f"cabin of {reservation['reservation_id']} changed after "
                            + ", ".join(departed) + " departed")
    return problems


@rule_check("bags-only-added", "Checked bags can be added but not removed.")
def bags_only_added(trace: Trace):
    problems = []
    for action in trace.calls("update_reservation_baggages"):
        reservation = action.record("reservations", "reservation_id")
        if reservation is None:
            continue
        if action.arguments.get("total_baggages", 0) < reservation["total_baggages"] \
                or action.arguments.get("nonfree_baggages", 0) < reservation["nonfree_baggages"]:
            problems.append(f"bags of {reservation['reservation_id']} go down from "
                            f"{reservation['total_baggages']} to {action.arguments.get('total_baggages')}")
    return problems


@rule_check("booking-limits", "At most five passengers per reservation; payment with at most one "
                              "certificate, one credit card and three gift cards.")
def booking_limits(trace: Trace):
    problems = []
    for action in trace.calls("book_reservation"):
        if len(action.arguments.get("passengers") or []) > 5:
            problems.append("a booking for more than five passengers")
        user = action.record("users", "user_id") or {}
        methods = user.get("payment_methods", {})
        sources = [methods.get(p.get("payment_id"), {}).get("source")
                   for p in action.arguments.get("payment_methods") or []]
        for source, limit in (("certificate", 1), ("credit_card", 1), ("gift_card", 3)):
            if sources.count(source) > limit:
                problems.append(f"a booking paid with {sources.count(source)} {source.replace('_', ' ')}s "
                                f"(at most {limit})")
    return problems


@rule_check("compensation-eligibility", "Only silver or gold members, users with insurance, or "
                                        "business-class travellers can be compensated, with a "
                                        "certificate of $100 (cancelled flight) or $50 (delayed "
                                        "flight) per passenger.")
def compensation(trace: Trace):
    problems = []
    for action in trace.calls("send_certificate"):
        user = action.record("users", "user_id")
        if user is None:
            continue
        reservations = [action.before.get("reservations", r) or {} for r in user.get("reservations", [])]
        eligible = user.get("membership") in ("silver", "gold") or any(
            r.get("insurance") == "yes" or r.get("cabin") == "business" for r in reservations)
        if not eligible:
            problems.append(f"compensation for {action.arguments['user_id']}, a regular member "
                            "without an insured or business reservation")
        amount = action.arguments.get("amount", 0)
        if not isinstance(amount, (int, float)) or amount <= 0 or amount % 50:
            problems.append(f"a certificate of {amount}: compensation is $50 or $100 per passenger")
    return problems


@rule_check("cancelled-is-final", "A cancelled reservation cannot be changed.")
def cancelled_is_final(trace: Trace):
    problems = []
    for action in trace.calls(*RESERVATION_WRITES):
        reservation = action.record("reservations", "reservation_id")
        if reservation is not None and reservation.get("status") == "cancelled" \
                and action.name != "cancel_reservation":
            problems.append(f"{action.name} on reservation {reservation['reservation_id']}, which is cancelled")
    return problems


@rule_check("transfer-ends", "A transfer to a human agent ends the conversation.")
def transfer_ends(trace: Trace):
    for action in trace.calls("transfer_to_human_agents"):
        if action.index != len(trace.actions) - 1:
            return f"{len(trace.actions) - 1 - action.index} call(s) after the transfer to a human agent"
    return None
