"""Integrity rules for airline data; their messages are shown to a model generating rows."""

from intellagent.environment import ValidationFailed, database_validator, row_validator


def _check_methods(methods: dict) -> None:
    for key, method in methods.items():
        if method.get("id") != key:
            raise ValidationFailed(f"payment method '{key}' must have id '{key}'")
        source = method.get("source")
        if source not in ("credit_card", "gift_card", "certificate"):
            raise ValidationFailed(f"payment method '{key}' has unknown source {source!r}")
        if source not in key:
            raise ValidationFailed(f"payment method id '{key}' must contain its source '{source}'")
        if source == "credit_card" and not (isinstance(method.get("last_four"), str)
                                            and len(method["last_four"]) == 4):
            raise ValidationFailed(f"credit card '{key}' needs a 4-character last_four")
        if source != "credit_card" and not (isinstance(method.get("amount"), (int, float))
                                            and method["amount"] >= 0):
            raise ValidationFailed(f"{source} '{key}' needs a non-negative amount")


@row_validator("users")
def user_is_consistent(user, db):
    if "@" not in user["email"]:
        raise ValidationFailed(f"email {user['email']!r} is not an email address")
    _check_methods(user["payment_methods"])
    for rid in user["reservations"]:
        if not db.has("reservations", rid):
            raise ValidationFailed(f"lists reservation '{rid}', which does not exist")


@row_validator("flights")
def flight_dates_are_well_formed(flight, db):
    if flight["origin"] == flight["destination"]:
        raise ValidationFailed("origin and destination must differ")
    for day, info in flight["dates"].items():
        status = info.get("status")
        if status == "available":
            for part in ("available_seats", "prices"):
                cabins = info.get(part, {})
                if set(cabins) != {"basic_economy", "economy", "business"}:
                    raise ValidationFailed(f"{day}: an available flight needs {part} for "
                                           "basic_economy, economy and business")
        elif status not in ("landed", "cancelled", "delayed", "on time", "flying"):
            raise ValidationFailed(f"{day}: unknown status {status!r}")


@row_validator("reservations")
def reservation_is_consistent(reservation, db):
    if not reservation["flights"]:
        raise ValidationFailed("a reservation needs at least one flight")
    for segment in reservation["flights"]:
        flight = db.get("flights", segment["flight_number"])
        if flight is None:
            raise ValidationFailed(f"flight {segment['flight_number']} does not exist")
        if segment["date"] not in flight["dates"]:
            raise ValidationFailed(f"flight {segment['flight_number']} does not fly on {segment['date']}")
        if (segment["origin"], segment["destination"]) != (flight["origin"], flight["destination"]):
            raise ValidationFailed(f"segment {segment['flight_number']} must go from "
                                   f"{flight['origin']} to {flight['destination']}")
    if not 1 <= len(reservation["passengers"]) <= 9:
        raise ValidationFailed("a reservation has between 1 and 9 passengers")
    if not 0 <= reservation["nonfree_baggages"] <= reservation["total_baggages"]:
        raise ValidationFailed("need 0 <= nonfree_baggages <= total_baggages")
    if not reservation["payment_history"]:
        raise ValidationFailed("a reservation needs its payment in payment_history")


@database_validator
def reservations_are_listed_by_their_users(db):
    # SQLite reads the users' lists (JSON) itself: no user record is decoded
    missing = [r[0] for r in db.execute(
        "SELECT reservation_id FROM reservations WHERE reservation_id NOT IN "
        "(SELECT j.value FROM users, json_each(users.reservations) AS j WHERE j.value IS NOT NULL) "
        "ORDER BY rowid")]
    if missing:
        raise ValidationFailed(f"reservation(s) {', '.join(missing[:5])} are not listed in their "
                               "user's reservations")
