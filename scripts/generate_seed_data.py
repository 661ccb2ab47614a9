"""Write the built-in airline and retail seed data (deterministic; our own, not τ-bench's).

    python scripts/generate_seed_data.py

The records have τ-bench's shapes so that τ-bench's data and tasks load unchanged alongside.
"""

from __future__ import annotations

import json
import random
from datetime import date, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "environments"
FIRST = ["Ana", "Bilal", "Chloe", "Dmitri", "Elif", "Farid", "Grace", "Hiro", "Ines", "Jonas",
         "Kavya", "Liam", "Maya", "Nikolai", "Olga", "Pablo", "Quinn", "Rosa", "Sanjay", "Tara",
         "Umar", "Vera", "Wen", "Ximena", "Yusuf", "Zoe", "Aiden", "Beatriz", "Caleb", "Dalia"]
LAST = ["Okafor", "Lindqvist", "Moreau", "Tanaka", "Haddad", "Novak", "Silva", "Kowalski",
        "Nguyen", "Fischer", "Rossi", "Mensah", "Patel", "Larsen", "Ortega", "Brennan", "Ito",
        "Petrov", "Castillo", "Whitaker"]
STREETS = ["Maple Avenue", "Harbor Street", "Cedar Lane", "Elm Court", "Ridge Road", "Lake Drive",
           "Willow Way", "Park Place", "Hillcrest Boulevard", "Orchard Road"]
CITIES = [("Boston", "MA", "021"), ("Denver", "CO", "802"), ("Seattle", "WA", "981"),
          ("Austin", "TX", "787"), ("Chicago", "IL", "606"), ("Phoenix", "AZ", "850"),
          ("Atlanta", "GA", "303"), ("Portland", "OR", "972"), ("Miami", "FL", "331"),
          ("Columbus", "OH", "432")]
AIRPORTS = ["SFO", "JFK", "LAX", "ORD", "DFW", "DEN", "SEA", "ATL", "MIA", "BOS", "PHX", "IAH",
            "LAS", "MCO", "EWR", "CLT", "MSP", "DTW", "PHL", "LGA"]
CABINS = ["basic_economy", "economy", "business"]
DAYS = [f"2024-05-{d:02d}" for d in range(1, 31)]
TODAY = "2024-05-15"


def person(rng: random.Random, used: set[str]) -> tuple[str, str, str]:
    while True:
        first, last = rng.choice(FIRST), rng.choice(LAST)
        uid = f"{first.lower()}_{last.lower()}_{rng.randint(1000, 9999)}"
        if uid not in used:
            used.add(uid)
            return first, last, uid


def address(rng: random.Random) -> dict:
    city, state, zip3 = rng.choice(CITIES)
    return {"address1": f"{rng.randint(10, 999)} {rng.choice(STREETS)}",
            "address2": rng.choice(["", f"Suite {rng.randint(100, 999)}", f"Apt {rng.randint(1, 40)}"]),
            "city": city, "country": "USA", "state": state, "zip": f"{zip3}{rng.randint(10, 99)}"}


def dob(rng: random.Random) -> str:
    return (date(1950, 1, 1) + timedelta(days=rng.randint(0, 365 * 55))).isoformat()


def pid(rng: random.Random, kind: str) -> str:
    return f"{kind}_{rng.randint(1000000, 9999999)}"


# --------------------------------------------------------------------------- airline

def airline(rng: random.Random) -> dict:
    flights = {}
    routes = set()
    while len(routes) < 70:
        a, b = rng.sample(AIRPORTS, 2)
        routes.add((a, b))
        routes.add((b, a))
    for n, (origin, dest) in enumerate(sorted(routes), 1):
        dep_h = rng.randint(5, 22)
        dur = rng.randint(1, 6)
        arr_h = dep_h + dur
        number = f"HAT{n:03d}"
        base = {c: rng.randint(lo, hi) for c, (lo, hi) in
                zip(CABINS, [(50, 100), (100, 200), (250, 500)])}
        dates = {}
        for day in DAYS:
            if day < TODAY:
                if rng.random() < 0.06:
                    dates[day] = {"status": "cancelled"}
                else:
                    late = rng.randint(-10, 40)
                    dates[day] = {"status": "landed",
                                  "actual_departure_time_est": f"{day}T{dep_h:02d}:{max(0, late) % 60:02d}:00",
                                  "actual_arrival_time_est": f"{day}T{arr_h % 24:02d}:{max(0, late) % 60:02d}:00"}
            elif day == TODAY and dep_h < 15:
                dates[day] = {"status": rng.choice(["landed", "flying", "delayed", "on time"])}
                if dates[day]["status"] in ("delayed", "on time"):
                    dates[day]["estimated_departure_time_est"] = f"{day}T{dep_h + 1:02d}:00:00"
                    dates[day]["estimated_arrival_time_est"] = f"{day}T{(arr_h + 1) % 24:02d}:00:00"
                elif dates[day]["status"] == "flying":
                    dates[day]["actual_departure_time_est"] = f"{day}T{dep_h:02d}:05:00"
                    dates[day]["estimated_arrival_time_est"] = f"{day}T{arr_h % 24:02d}:10:00"
                else:
                    dates[day]["actual_departure_time_est"] = f"{day}T{dep_h:02d}:00:00"
                    dates[day]["actual_arrival_time_est"] = f"{day}T{arr_h % 24:02d}:00:00"
            else:
                dates[day] = {"status": "available",
                              "available_seats": {c: rng.randint(0, 20) for c in CABINS},
                              "prices": {c: base[c] + rng.randint(-20, 20) for c in CABINS}}
        flights[number] = {
            "flight_number": number, "origin": origin, "destination": dest,
            "scheduled_departure_time_est": f"{dep_h:02d}:00:00",
            "scheduled_arrival_time_est": f"{arr_h % 24:02d}:00:00" + ("+1" if arr_h >= 24 else ""),
            "dates": dates}
    by_route = {}
    for f in flights.values():
        by_route.setdefault((f["origin"], f["destination"]), []).append(f)

    users, used = {}, set()
    for _ in range(120):
        first, last, uid = person(rng, used)
        methods = {}
        for _ in range(rng.randint(1, 3)):
            kind = rng.choice(["credit_card", "credit_card", "gift_card", "certificate"])
            mid = pid(rng, kind)
            m = {"source": kind}
            if kind == "credit_card":
                m.update(brand=rng.choice(["visa", "mastercard", "amex"]), last_four=f"{rng.randint(0, 9999):04d}")
            else:
                m["amount"] = rng.choice([50, 100, 150, 200, 250, 300, 500])
            m["id"] = mid
            methods[mid] = m
        users[uid] = {
            "name": {"first_name": first, "last_name": last}, "address": address(rng),
            "email": f"{first.lower()}.{last.lower()}{rng.randint(1, 999)}@example.com",
            "dob": dob(rng), "payment_methods": methods,
            "saved_passengers": [{"first_name": rng.choice(FIRST), "last_name": last, "dob": dob(rng)}
                                 for _ in range(rng.randint(0, 2))],
            "membership": rng.choice(["regular", "regular", "silver", "gold"]),
            "reservations": []}

    reservations = {}
    letters = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
    uids = sorted(users)
    while len(reservations) < 300:
        uid = rng.choice(uids)
        user = users[uid]
        origin, dest = rng.choice(sorted(by_route))
        trip = rng.choice(["one_way", "round_trip"])
        cabin = rng.choice(CABINS)
        out_day = rng.choice(DAYS[:-3])
        legs = [(rng.choice(by_route[(origin, dest)]), out_day)]
        if trip == "round_trip":
            back = by_route.get((dest, origin))
            if not back:
                continue
            legs.append((rng.choice(back), DAYS[DAYS.index(out_day) + rng.randint(1, 3)]))
        segments = []
        for f, day in legs:
            info = f["dates"][day]
            price = info["prices"][cabin] if "prices" in info else rng.randint(60, 480)
            segments.append({"origin": f["origin"], "destination": f["destination"],
                             "flight_number": f["flight_number"], "date": day, "price": price})
        passengers = [{"first_name": user["name"]["first_name"], "last_name": user["name"]["last_name"],
                       "dob": user["dob"]}]
        passengers += user["saved_passengers"][:rng.randint(0, len(user["saved_passengers"]))]
        insurance = rng.choice(["yes", "no"])
        bags = rng.randint(0, 3)
        nonfree = rng.randint(0, bags)
        total = sum(s["price"] for s in segments) * len(passengers) + 50 * nonfree
        total += 30 * len(passengers) if insurance == "yes" else 0
        card = next((m for m in user["payment_methods"].values() if m["source"] == "credit_card"), None)
        payer = card["id"] if card else next(iter(user["payment_methods"]))
        rid = "".join(rng.choice(letters) for _ in range(6))
        if rid in reservations:
            continue
        created = date(2024, 4, 1) + timedelta(days=rng.randint(0, 43))
        reservations[rid] = {
            "reservation_id": rid, "user_id": uid, "origin": origin, "destination": dest,
            "flight_type": trip, "cabin": cabin, "flights": segments, "passengers": passengers,
            "payment_history": [{"payment_id": payer, "amount": total}],
            "created_at": f"{created.isoformat()}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:00",
            "total_baggages": bags, "nonfree_baggages": nonfree, "insurance": insurance}
        user["reservations"].append(rid)
    return {"flights": flights, "users": users, "reservations": reservations}


# --------------------------------------------------------------------------- retail

CATALOGUE = {
    "Desk Lamp": {"color": ["white", "black", "brass"], "brightness": ["low", "medium", "high"], "power source": ["USB", "AC adapter"]},
    "Running Shoes": {"size": ["7", "8", "9", "10", "11"], "color": ["red", "black", "grey"], "material": ["mesh", "leather"]},
    "Backpack": {"color": ["navy", "olive", "black"], "size": ["small", "large"], "compartment": ["laptop", "camera"]},
    "Coffee Grinder": {"capacity": ["250g", "500g"], "grind type": ["burr", "blade"], "finish": ["steel", "black"]},
    "Yoga Mat": {"thickness": ["4mm", "6mm", "8mm"], "material": ["rubber", "TPE"], "color": ["purple", "teal"]},
    "Wireless Headphones": {"color": ["black", "white", "blue"], "type": ["over-ear", "in-ear"], "noise cancelling": ["yes", "no"]},
    "Water Flask": {"capacity": ["500ml", "750ml", "1000ml"], "material": ["steel", "glass"], "color": ["green", "white"]},
    "Mechanical Keyboard": {"switch": ["linear", "tactile", "clicky"], "layout": ["full", "tenkeyless"], "backlight": ["none", "RGB"]},
    "Rain Jacket": {"size": ["S", "M", "L", "XL"], "color": ["yellow", "navy"], "hood": ["fixed", "packable"]},
    "Air Purifier": {"room size": ["small", "medium", "large"], "filter": ["HEPA", "carbon"], "smart": ["yes", "no"]},
    "Electric Kettle": {"capacity": ["1L", "1.7L"], "material": ["glass", "steel", "plastic"], "temperature control": ["yes", "no"]},
    "Camping Tent": {"capacity": ["2-person", "4-person"], "season": ["3-season", "4-season"], "color": ["orange", "green"]},
    "Smart Watch": {"color": ["black", "silver", "rose"], "band": ["silicone", "leather", "metal"], "size": ["40mm", "44mm"]},
    "Bookshelf": {"material": ["oak", "pine", "metal"], "height": ["3ft", "5ft", "6ft"], "color": ["natural", "white"]},
    "Blender": {"capacity": ["1L", "2L"], "speed settings": ["3", "6"], "color": ["red", "silver"]},
    "Office Chair": {"material": ["mesh", "fabric", "leather"], "color": ["black", "grey"], "armrest": ["fixed", "adjustable"]},
    "Bicycle Helmet": {"size": ["S", "M", "L"], "color": ["white", "matte black"], "ventilation": ["standard", "high"]},
    "Board Game": {"players": ["2-4", "4-8"], "theme": ["strategy", "party", "cooperative"], "age": ["8+", "12+"]},
    "Sunglasses": {"frame": ["acetate", "metal"], "lens": ["polarized", "standard"], "color": ["tortoise", "black"]},
    "Portable Speaker": {"color": ["black", "blue", "red"], "battery": ["10h", "20h"], "waterproof": ["yes", "no"]},
}


def retail(rng: random.Random) -> dict:
    products = {}
    for name, options in CATALOGUE.items():
        product_id = str(rng.randint(10**9, 10**10 - 1))
        base = rng.uniform(20, 400)
        variants = {}
        keys = list(options)
        for _ in range(rng.randint(4, 9)):
            chosen = {k: rng.choice(options[k]) for k in keys}
            item_id = str(rng.randint(10**9, 10**10 - 1))
            variants[item_id] = {"item_id": item_id, "options": chosen,
                                 "available": rng.random() < 0.75,
                                 "price": round(base * rng.uniform(0.85, 1.2), 2)}
        products[product_id] = {"name": name, "product_id": product_id, "variants": variants}

    users, used = {}, set()
    for _ in range(120):
        first, last, uid = person(rng, used)
        methods = {}
        for kind in rng.sample(["credit_card", "paypal", "gift_card"], rng.randint(1, 3)):
            mid = pid(rng, kind)
            m = {"source": kind}
            if kind == "credit_card":
                m.update(brand=rng.choice(["visa", "mastercard"]), last_four=f"{rng.randint(0, 9999):04d}")
            elif kind == "gift_card":
                m["balance"] = rng.randint(0, 250)
            m["id"] = mid
            methods[mid] = m
        users[uid] = {"name": {"first_name": first, "last_name": last}, "address": address(rng),
                      "email": f"{first.lower()}.{last.lower()}{rng.randint(1, 999)}@example.com",
                      "payment_methods": methods, "orders": []}

    orders = {}
    uids = sorted(users)
    all_products = sorted(products.values(), key=lambda p: p["name"])
    while len(orders) < 300:
        uid = rng.choice(uids)
        user = users[uid]
        oid = f"#W{rng.randint(1000000, 9999999)}"
        if oid in orders:
            continue
        items = []
        for product in rng.sample(all_products, rng.randint(1, 4)):
            v = rng.choice(sorted(product["variants"].values(), key=lambda v: v["item_id"]))
            items.append({"name": product["name"], "product_id": product["product_id"],
                          "item_id": v["item_id"], "price": v["price"], "options": dict(v["options"])})
        status = rng.choice(["pending", "pending", "processed", "delivered", "delivered", "cancelled"])
        fulfillments = []
        if status in ("processed", "delivered"):
            fulfillments = [{"tracking_id": [str(rng.randint(10**11, 10**12 - 1))],
                             "item_ids": [i["item_id"] for i in items]}]
        amount = round(sum(i["price"] for i in items), 2)
        method = rng.choice(sorted(user["payment_methods"]))
        history = [{"transaction_type": "payment", "amount": amount, "payment_method_id": method}]
        if status == "cancelled":
            history.append({"transaction_type": "refund", "amount": amount, "payment_method_id": method})
        orders[oid] = {"order_id": oid, "user_id": uid, "address": dict(user["address"]),
                       "items": items, "fulfillments": fulfillments, "status": status,
                       "payment_history": history}
        user["orders"].append(oid)
    return {"products": products, "users": users, "orders": orders}


def write(domain: str, tables: dict) -> None:
    folder = ROOT / domain / "data"
    folder.mkdir(parents=True, exist_ok=True)
    for name, rows in tables.items():
        (folder / f"{name}.json").write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    write("airline", airline(random.Random(2024)))
    write("retail", retail(random.Random(2025)))
