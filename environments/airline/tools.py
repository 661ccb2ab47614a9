"""Airline tools. Their behaviour matches τ-bench's airline tools exactly, quirks included
(fixed new reservation ids and creation time, seats never decremented, cabin not updated by a
flight change), so τ-bench tasks replay to the same end states."""

from __future__ import annotations

import copy
from typing import Any

from intellagent.environment import Database, ToolError

AIRPORTS = {
    "SFO": "San Francisco", "JFK": "New York", "LAX": "Los Angeles", "ORD": "Chicago",
    "DFW": "Dallas", "DEN": "Denver", "SEA": "Seattle", "ATL": "Atlanta", "MIA": "Miami",
    "BOS": "Boston", "PHX": "Phoenix", "IAH": "Houston", "LAS": "Las Vegas", "MCO": "Orlando",
    "EWR": "Newark", "CLT": "Charlotte", "MSP": "Minneapolis", "DTW": "Detroit",
    "PHL": "Philadelphia", "LGA": "LaGuardia",
}
NEW_RESERVATION_IDS = ("HATHAT", "HATHAU", "HATHAV")
CERTIFICATE_IDS = ("certificate_3221322", "certificate_3221323", "certificate_3221324")
BOOKING_TIME = "2024-05-15T15:00:00"


def _user(db: Database, user_id: str) -> dict[str, Any]:
    user = db.get("users", user_id)
    if user is None:
        raise ToolError("User not found")
    return user


def _reservation(db: Database, reservation_id: str) -> dict[str, Any]:
    reservation = db.get("reservations", reservation_id)
    if reservation is None:
        raise ToolError("Reservation not found")
    return reservation


def _price_segment(db: Database, segment: dict[str, Any], cabin: str, passengers: int) -> int:
    """Check one new segment is bookable and fill in its price, origin and destination."""
    flight = db.get("flights", segment["flight_number"])
    if flight is None:
        raise ToolError(f"Flight {segment['flight_number']} not found")
    day = flight["dates"].get(segment["date"])
    if day is None:
        raise ToolError(f"Flight {segment['flight_number']} not found on date {segment['date']}")
    if day["status"] != "available":
        raise ToolError(f"Flight {segment['flight_number']} not available on date {segment['date']}")
    if day["available_seats"][cabin] < passengers:
        raise ToolError(f"Not enough seats on flight {segment['flight_number']}")
    segment["price"] = day["prices"][cabin]
    segment["origin"] = flight["origin"]
    segment["destination"] = flight["destination"]
    return segment["price"] * passengers


def book_reservation(db: Database, user_id: str, origin: str, destination: str, flight_type: str,
                     cabin: str, flights: list, passengers: list, payment_methods: list,
                     total_baggages: int, nonfree_baggages: int, insurance: str) -> dict:
    """Book a reservation, paying with the user's saved payment methods."""
    user = _user(db, user_id)
    new_id = next((i for i in NEW_RESERVATION_IDS[:2] if not db.has("reservations", i)),
                  NEW_RESERVATION_IDS[2])
    segments = copy.deepcopy(flights)
    count = len(passengers)
    total = 0
    for segment in segments:
        total += _price_segment(db, segment, cabin, count)
    if insurance == "yes":
        total += 30 * count
    total += 50 * nonfree_baggages

    methods = user["payment_methods"]
    for entry in payment_methods:
        method = methods.get(entry["payment_id"])
        if method is None:
            raise ToolError(f"Payment method {entry['payment_id']} not found")
        if method["source"] in ("gift_card", "certificate") and method["amount"] < entry["amount"]:
            raise ToolError(f"Not enough balance in payment method {entry['payment_id']}")
    paid = sum(entry["amount"] for entry in payment_methods)
    if paid != total:
        raise ToolError(f"Payment amount does not add up, total price is {total}, but paid {paid}")

    for entry in payment_methods:
        method = methods[entry["payment_id"]]
        if method["source"] == "gift_card":
            method["amount"] -= entry["amount"]
        elif method["source"] == "certificate":
            del methods[entry["payment_id"]]
    reservation = {
        "reservation_id": new_id, "user_id": user_id, "origin": origin, "destination": destination,
        "flight_type": flight_type, "cabin": cabin, "flights": segments, "passengers": passengers,
        "payment_history": payment_methods, "created_at": BOOKING_TIME,
        "total_baggages": total_baggages, "nonfree_baggages": nonfree_baggages,
        "insurance": insurance,
    }
    user["reservations"].append(new_id)
    db.put("users", user_id, user)
    db.put("reservations", new_id, reservation)
    return reservation


def cancel_reservation(db: Database, reservation_id: str) -> dict:
    """Cancel a whole reservation; every payment is reversed in its history."""
    reservation = _reservation(db, reservation_id)
    refunds = [{"payment_id": p["payment_id"], "amount": -p["amount"]}
               for p in reservation["payment_history"]]
    reservation["payment_history"].extend(refunds)
    reservation["status"] = "cancelled"
    db.put("reservations", reservation_id, reservation)
    return reservation


def get_reservation_details(db: Database, reservation_id: str) -> dict:
    """The details of a reservation."""
    return _reservation(db, reservation_id)


def get_user_details(db: Database, user_id: str) -> dict:
    """A user's profile, payment methods and reservations."""
    return _user(db, user_id)


def list_all_airports(db: Database) -> dict:
    """Every airport served, by IATA code."""
    return dict(AIRPORTS)


def _flight_on(flight: dict[str, Any], date: str) -> dict[str, Any]:
    """The flight's own fields followed by that date's status, seats and prices."""
    out = {k: v for k, v in flight.items() if k != "dates"}
    out.update(flight["dates"][date])
    return out


def search_direct_flight(db: Database, origin: str, destination: str, date: str) -> list:
    """Direct flights between two airports that can be booked on a date."""
    out = []
    for flight in db.select("flights", origin=origin, destination=destination):
        day = flight["dates"].get(date)
        if day is not None and day["status"] == "available":
            out.append(_flight_on(flight, date))
    return out


def search_onestop_flight(db: Database, origin: str, destination: str, date: str) -> list:
    """Connections with one stop between two airports on a date."""
    arriving = db.select("flights", destination=destination)  # SQL picks the rows: only they are decoded
    out = []
    for first in db.select("flights", origin=origin):
        for second in arriving:
            if first["destination"] != second["origin"]:
                continue
            if "+1" in first["scheduled_arrival_time_est"]:
                second_date = "2024-05-" + str(int(date[-2:]) + 1)
            else:
                second_date = date
            if first["scheduled_arrival_time_est"] > second["scheduled_departure_time_est"]:
                continue
            if (date in first["dates"] and second_date in second["dates"]
                    and first["dates"][date]["status"] == "available"
                    and second["dates"][second_date]["status"] == "available"):
                leg1 = _flight_on(first, date)
                leg1["date"] = date
                leg2 = _flight_on(second, date)  # the first leg's date, as τ-bench does
                leg2["date"] = second_date
                out.append([leg1, leg2])
    return out


def send_certificate(db: Database, user_id: str, amount: float) -> str | None:
    """Give a user a travel certificate (compensation)."""
    user = _user(db, user_id)
    for cert_id in CERTIFICATE_IDS:
        if cert_id not in user["payment_methods"]:
            user["payment_methods"][cert_id] = {"source": "certificate", "amount": amount,
                                                "id": cert_id}
            db.put("users", user_id, user)
            return f"Certificate {cert_id} added to user {user_id} with amount {amount}."
    return None


def update_reservation_baggages(db: Database, reservation_id: str, total_baggages: int,
                                nonfree_baggages: int, payment_id: str) -> dict:
    """Change a reservation's bag counts, paying for added non-free bags."""
    reservation = _reservation(db, reservation_id)
    fee = 50 * max(0, nonfree_baggages - reservation["nonfree_baggages"])
    user = db.get("users", reservation["user_id"])
    method = user["payment_methods"].get(payment_id)
    if method is None:
        raise ToolError("Payment method not found")
    if method["source"] == "certificate":
        raise ToolError("Certificate cannot be used to update reservation")
    if method["source"] == "gift_card" and method["amount"] < fee:
        raise ToolError("Gift card balance is not enough")
    reservation["total_baggages"] = total_baggages
    reservation["nonfree_baggages"] = nonfree_baggages
    if method["source"] == "gift_card":
        method["amount"] -= fee
        db.put("users", reservation["user_id"], user)
    if fee != 0:
        reservation["payment_history"].append({"payment_id": payment_id, "amount": fee})
    db.put("reservations", reservation_id, reservation)
    return reservation


def update_reservation_flights(db: Database, reservation_id: str, cabin: str, flights: list,
                               payment_id: str) -> dict:
    """Replace a reservation's whole itinerary (and cabin price), charging or refunding the
    difference."""
    reservation = _reservation(db, reservation_id)
    count = len(reservation["passengers"])
    total = 0
    segments = copy.deepcopy(flights)
    for segment in segments:
        kept = None
        if cabin == reservation["cabin"]:
            kept = next((old for old in reservation["flights"]
                         if old["flight_number"] == segment["flight_number"]
                         and old["date"] == segment["date"]), None)
        if kept is not None:
            segment["price"] = kept["price"]
            segment["origin"] = kept["origin"]
            segment["destination"] = kept["destination"]
            total += kept["price"] * count
        else:
            total += _price_segment(db, segment, cabin, count)
    total -= sum(old["price"] for old in reservation["flights"]) * count

    user = db.get("users", reservation["user_id"])
    method = user["payment_methods"].get(payment_id)
    if method is None:
        raise ToolError("Payment method not found")
    if method["source"] == "certificate":
        raise ToolError("Certificate cannot be used to update reservation")
    if method["source"] == "gift_card" and method["amount"] < total:
        raise ToolError("Gift card balance is not enough")
    if method["source"] == "gift_card":
        method["amount"] -= total
        db.put("users", reservation["user_id"], user)
    reservation["flights"] = segments
    if total != 0:
        reservation["payment_history"].append({"payment_id": payment_id, "amount": total})
    db.put("reservations", reservation_id, reservation)
    return reservation


def update_reservation_passengers(db: Database, reservation_id: str, passengers: list) -> dict:
    """Replace the passengers' details (the number of passengers cannot change)."""
    reservation = _reservation(db, reservation_id)
    if len(passengers) != len(reservation["passengers"]):
        raise ToolError("Number of passengers does not match")
    reservation["passengers"] = passengers
    db.put("reservations", reservation_id, reservation)
    return reservation
