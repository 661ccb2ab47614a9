"""Retail tools. Their behaviour matches τ-bench's retail tools exactly, quirks included
(unrounded item-change differences, refunds of every history entry on cancellation), so τ-bench
tasks replay to the same end states."""

from __future__ import annotations

from typing import Any

from intellagent.environment import Database, ToolError

CANCEL_REASONS = ("no longer needed", "ordered by mistake")


def _order(db: Database, order_id: str) -> dict[str, Any]:
    order = db.get("orders", order_id)
    if order is None:
        raise ToolError("Order not found")
    return order


def _user(db: Database, user_id: str) -> dict[str, Any]:
    user = db.get("users", user_id)
    if user is None:
        raise ToolError("User not found")
    return user


def _require_status(order: dict[str, Any], status: str) -> None:
    if order["status"] != status:
        raise ToolError(f"Non-{status} order cannot be modified" if status == "pending"
                        else f"Non-{status} order cannot be exchanged or returned")


def _check_items_in_order(order: dict[str, Any], item_ids: list[str]) -> None:
    present = [item["item_id"] for item in order["items"]]
    for item_id in item_ids:
        if item_ids.count(item_id) > present.count(item_id):
            raise ToolError(f"{item_id} not found")


def _price_difference(db: Database, order: dict[str, Any], item_ids: list[str],
                      new_item_ids: list[str]) -> int | float:
    if len(item_ids) != len(new_item_ids):
        raise ToolError("The number of items to be exchanged should match")
    diff: int | float = 0
    for old_id, new_id in zip(item_ids, new_item_ids):
        item = next(i for i in order["items"] if i["item_id"] == old_id)
        variants = db.get("products", item["product_id"])["variants"]
        variant = variants.get(new_id)
        if variant is None or not variant["available"]:
            raise ToolError(f"New item {new_id} not found or available")
        diff += variant["price"] - item["price"]
    return diff


def _payment_method(user: dict[str, Any], payment_method_id: str) -> dict[str, Any]:
    method = user["payment_methods"].get(payment_method_id)
    if method is None:
        raise ToolError("Payment method not found")
    return method


def cancel_pending_order(db: Database, order_id: str, reason: str) -> dict:
    """Cancel a pending order; every payment is refunded (gift cards at once)."""
    order = _order(db, order_id)
    if order["status"] != "pending":
        raise ToolError("Non-pending order cannot be cancelled")
    if reason not in CANCEL_REASONS:
        raise ToolError("Invalid reason")
    user = db.get("users", order["user_id"])
    refunds = []
    for payment in order["payment_history"]:
        refunds.append({"transaction_type": "refund", "amount": payment["amount"],
                        "payment_method_id": payment["payment_method_id"]})
        if "gift_card" in payment["payment_method_id"]:
            method = user["payment_methods"][payment["payment_method_id"]]
            method["balance"] = round(method["balance"] + payment["amount"], 2)
    order["status"] = "cancelled"
    order["cancel_reason"] = reason
    order["payment_history"].extend(refunds)
    db.put("users", order["user_id"], user)
    db.put("orders", order_id, order)
    return order


def exchange_delivered_order_items(db: Database, order_id: str, item_ids: list,
                                   new_item_ids: list, payment_method_id: str) -> dict:
    """Ask to exchange delivered items for other variants of the same products."""
    order = _order(db, order_id)
    _require_status(order, "delivered")
    _check_items_in_order(order, item_ids)
    diff = round(_price_difference(db, order, item_ids, new_item_ids), 2)
    user = db.get("users", order["user_id"])
    method = _payment_method(user, payment_method_id)
    if method["source"] == "gift_card" and method["balance"] < diff:
        raise ToolError("Insufficient gift card balance to pay for the price difference")
    order["status"] = "exchange requested"
    order["exchange_items"] = sorted(item_ids)
    order["exchange_new_items"] = sorted(new_item_ids)
    order["exchange_payment_method_id"] = payment_method_id
    order["exchange_price_difference"] = diff
    db.put("orders", order_id, order)
    return order


def find_user_id_by_email(db: Database, email: str) -> str:
    """The id of the user with this email address."""
    for key, user in db.items("users"):
        if user["email"].lower() == email.lower():
            return key
    raise ToolError("User not found")


def find_user_id_by_name_zip(db: Database, first_name: str, last_name: str, zip: str) -> str:
    """The id of the user with this name and ZIP code."""
    for key, user in db.items("users"):
        if (user["name"]["first_name"].lower() == first_name.lower()
                and user["name"]["last_name"].lower() == last_name.lower()
                and user["address"]["zip"] == zip):
            return key
    raise ToolError("User not found")


def get_order_details(db: Database, order_id: str) -> dict:
    """An order's items, status, fulfilments and payments."""
    return _order(db, order_id)


def get_product_details(db: Database, product_id: str) -> dict:
    """A product and all its variants (item ids, options, availability, prices)."""
    product = db.get("products", product_id)
    if product is None:
        raise ToolError("Product not found")
    return product


def get_user_details(db: Database, user_id: str) -> dict:
    """A user's profile, payment methods and orders."""
    return _user(db, user_id)


def list_all_product_types(db: Database) -> dict:
    """Every product name with its product id."""
    return dict(sorted((p["name"], p["product_id"]) for p in db.all("products")))


def _address(address1: str, address2: str, city: str, state: str, country: str, zip: str) -> dict:
    return {"address1": address1, "address2": address2, "city": city, "state": state,
            "country": country, "zip": zip}


def modify_pending_order_address(db: Database, order_id: str, address1: str, address2: str,
                                 city: str, state: str, country: str, zip: str) -> dict:
    """Change the shipping address of a pending order."""
    order = _order(db, order_id)
    _require_status(order, "pending")
    order["address"] = _address(address1, address2, city, state, country, zip)
    db.put("orders", order_id, order)
    return order


def modify_pending_order_items(db: Database, order_id: str, item_ids: list, new_item_ids: list,
                               payment_method_id: str) -> dict:
    """Swap items of a pending order for other variants (once per order)."""
    order = _order(db, order_id)
    _require_status(order, "pending")
    _check_items_in_order(order, item_ids)
    diff = _price_difference(db, order, item_ids, new_item_ids)
    user = db.get("users", order["user_id"])
    method = _payment_method(user, payment_method_id)
    if method["source"] == "gift_card" and method["balance"] < diff:
        raise ToolError("Insufficient gift card balance to pay for the new item")
    order["payment_history"].append({
        "transaction_type": "payment" if diff > 0 else "refund", "amount": abs(diff),
        "payment_method_id": payment_method_id})
    if method["source"] == "gift_card":
        method["balance"] = round(method["balance"] - diff, 2)
        db.put("users", order["user_id"], user)
    for old_id, new_id in zip(item_ids, new_item_ids):
        item = next(i for i in order["items"] if i["item_id"] == old_id)
        variant = db.get("products", item["product_id"])["variants"][new_id]
        item["item_id"] = new_id
        item["price"] = variant["price"]
        item["options"] = variant["options"]
    order["status"] = "pending (item modified)"
    db.put("orders", order_id, order)
    return order


def modify_pending_order_payment(db: Database, order_id: str, payment_method_id: str) -> dict:
    """Pay a pending order with another of the user's payment methods."""
    order = _order(db, order_id)
    _require_status(order, "pending")
    user = db.get("users", order["user_id"])
    method = _payment_method(user, payment_method_id)
    history = order["payment_history"]
    if len(history) > 1 or history[0]["transaction_type"] != "payment":
        raise ToolError("There should be exactly one payment for a pending order")
    old_id = history[0]["payment_method_id"]
    if old_id == payment_method_id:
        raise ToolError("The new payment method should be different from the current one")
    amount = history[0]["amount"]
    if method["source"] == "gift_card" and method["balance"] < amount:
        raise ToolError("Insufficient gift card balance to pay for the order")
    history.append({"transaction_type": "payment", "amount": amount,
                    "payment_method_id": payment_method_id})
    history.append({"transaction_type": "refund", "amount": amount, "payment_method_id": old_id})
    if method["source"] == "gift_card":
        method["balance"] = round(method["balance"] - amount, 2)
    if "gift_card" in old_id:
        old = user["payment_methods"][old_id]
        old["balance"] = round(old["balance"] + amount, 2)
    db.put("users", order["user_id"], user)
    db.put("orders", order_id, order)
    return order


def modify_user_address(db: Database, user_id: str, address1: str, address2: str, city: str,
                        state: str, country: str, zip: str) -> dict:
    """Change a user's default address."""
    user = _user(db, user_id)
    user["address"] = _address(address1, address2, city, state, country, zip)
    db.put("users", user_id, user)
    return user


def return_delivered_order_items(db: Database, order_id: str, item_ids: list,
                                 payment_method_id: str) -> dict:
    """Ask to return delivered items, refunded to the original method or a gift card."""
    order = _order(db, order_id)
    _require_status(order, "delivered")
    user = db.get("users", order["user_id"])
    _payment_method(user, payment_method_id)
    if ("gift_card" not in payment_method_id
            and payment_method_id != order["payment_history"][0]["payment_method_id"]):
        raise ToolError("Payment method should be either the original payment method or a gift card")
    _check_items_in_order(order, item_ids)
    order["status"] = "return requested"
    order["return_items"] = sorted(item_ids)
    order["return_payment_method_id"] = payment_method_id
    db.put("orders", order_id, order)
    return order
