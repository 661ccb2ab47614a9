"""Integrity rules for retail data; their messages are shown to a model generating rows."""

from intellagent.environment import ValidationFailed, database_validator, row_validator


@row_validator("users")
def user_is_consistent(user, db):
    if "@" not in user["email"]:
        raise ValidationFailed(f"email {user['email']!r} is not an email address")
    for key, method in user["payment_methods"].items():
        if method.get("id") != key:
            raise ValidationFailed(f"payment method '{key}' must have id '{key}'")
        source = method.get("source")
        if source not in ("credit_card", "gift_card", "paypal"):
            raise ValidationFailed(f"payment method '{key}' has unknown source {source!r}")
        if (source == "gift_card") != ("gift_card" in key):
            raise ValidationFailed(f"payment method id '{key}' must contain 'gift_card' exactly "
                                   "when it is a gift card")
        if source == "gift_card" and not (isinstance(method.get("balance"), (int, float))
                                          and method["balance"] >= 0):
            raise ValidationFailed(f"gift card '{key}' needs a non-negative balance")
    for oid in user["orders"]:
        if not db.has("orders", oid):
            raise ValidationFailed(f"lists order '{oid}', which does not exist")


@row_validator("products")
def variants_are_well_formed(product, db):
    if not product["variants"]:
        raise ValidationFailed("a product needs at least one variant")
    for key, variant in product["variants"].items():
        if variant.get("item_id") != key:
            raise ValidationFailed(f"variant '{key}' must have item_id '{key}'")
        if not isinstance(variant.get("price"), (int, float)) or variant["price"] <= 0:
            raise ValidationFailed(f"variant '{key}' needs a positive price")
        if not isinstance(variant.get("available"), bool):
            raise ValidationFailed(f"variant '{key}' needs available: true or false")


@row_validator("orders")
def order_is_consistent(order, db):
    if not order["items"]:
        raise ValidationFailed("an order needs at least one item")
    for item in order["items"]:
        product = db.get("products", item["product_id"])
        if product is None:
            raise ValidationFailed(f"item {item['item_id']}: product {item['product_id']} does not exist")
        if item["item_id"] not in product["variants"]:
            raise ValidationFailed(f"item {item['item_id']} is not a variant of product "
                                   f"{item['product_id']} ({product['name']})")
    if not order["payment_history"] or order["payment_history"][0]["transaction_type"] != "payment":
        raise ValidationFailed("an order's payment_history starts with its payment")
    if order["status"] in ("processed", "delivered") and not order["fulfillments"]:
        raise ValidationFailed(f"a {order['status']} order needs a fulfillment with a tracking id")


@database_validator
def orders_are_listed_by_their_users(db):
    listed = {oid for ids in db.values("users", "orders") for oid in ids or []}
    missing = [k for k in db.keys("orders") if k not in listed]
    if missing:
        raise ValidationFailed(f"order(s) {', '.join(missing[:5])} are not listed in their user's orders")
