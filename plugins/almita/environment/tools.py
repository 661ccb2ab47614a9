"""Larkspur Home's order APIs. The ALMITA pipeline gives the agent their specs only; these
implementations let the environment serve pipelines that run tools (and keep `validate` honest)."""

from intellagent.environment import ToolError


def _order(db, order_id):
    order = db.get("orders", order_id)
    if order is None:
        raise ToolError(f"no order with id {order_id}")
    return order


def get_order(db, order_id):
    return _order(db, order_id)


def track_shipment(db, order_id):
    order = _order(db, order_id)
    return {"order_id": order_id, "tracking": order["tracking"], "expected_delivery": order["expected_delivery"]}


def cancel_order(db, order_id, reason):
    order = _order(db, order_id)
    if order["status"] != "processing":
        raise ToolError(f"order {order_id} is {order['status']}: only an order that has not shipped can be cancelled")
    return db.update("orders", order_id, status="cancelled", refunded=order["total"])


def refund_order(db, order_id):
    order = _order(db, order_id)
    if order["status"] != "shipped":
        raise ToolError(f"order {order_id} is {order['status']}: only a shipped order that did not arrive is refunded")
    if order["refunded"]:
        raise ToolError(f"order {order_id} was already refunded")
    db.update("orders", order_id, refunded=order["total"])
    return {"order_id": order_id, "refunded": order["total"]}


def update_delivery_address(db, order_id, address):
    order = _order(db, order_id)
    if order["status"] != "processing":
        raise ToolError(f"order {order_id} is {order['status']}: the address can no longer be changed")
    return db.update("orders", order_id, address=address)


def report_damaged_item(db, order_id, sku, description, resolution):
    order = _order(db, order_id)
    if order["status"] != "delivered":
        raise ToolError(f"order {order_id} is {order['status']}, not delivered")
    item = next((i for i in order["items"] if i["sku"] == sku), None)
    if item is None:
        raise ToolError(f"order {order_id} has no item {sku}")
    claim_id = f"CL-{db.count('claims') + 1:04d}"
    db.insert("claims", {"claim_id": claim_id, "order_id": order_id, "sku": sku,
                         "description": description, "resolution": resolution})
    if resolution == "refund":
        db.update("orders", order_id, refunded=order["refunded"] + item["price"] * item["qty"])
    return {"claim_id": claim_id, "resolution": resolution}


def transfer_to_human(db, summary):
    return "Transferred to a human agent."
