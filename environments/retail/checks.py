"""The retail policy's rules that can be decided from a sequence of tool calls and the database
states around it. Each returns what breaks the rule (a message a generator can act on), or
None. ``trace.context["user_id"]``, when given, is the customer the conversation is for."""

from __future__ import annotations

from intellagent.environment import Trace, rule_check

ORDER_WRITES = ("cancel_pending_order", "modify_pending_order_address", "modify_pending_order_items",
                "modify_pending_order_payment", "return_delivered_order_items",
                "exchange_delivered_order_items")
FINAL = ("cancel_pending_order", "return_delivered_order_items", "exchange_delivered_order_items")
LOOKUPS = ("find_user_id_by_email", "find_user_id_by_name_zip")


def _customer(trace: Trace) -> str | None:
    """Whom the conversation is for: the task's user, else the first user a lookup found."""
    if trace.context.get("user_id"):
        return trace.context["user_id"]
    for action in trace.calls(*LOOKUPS):
        if not action.error:
            return action.result if isinstance(action.result, str) else None
    return None


@rule_check("own-orders", "Help one customer per conversation: only the authenticated user's own "
                          "orders and account may be looked at or changed.")
def own_orders(trace: Trace):
    user = _customer(trace)
    if user is None:
        return None
    problems = []
    for action in trace.actions:
        order_id = action.arguments.get("order_id")
        if order_id is not None and action.name in ORDER_WRITES + ("get_order_details",):
            order = action.before.get("orders", order_id)
            if order is not None and order["user_id"] != user:
                problems.append(f"{action.name} on order {order_id}, which belongs to "
                                f"{order['user_id']}, not to {user}")
        other = action.arguments.get("user_id")
        if other is not None and action.name in ("modify_user_address", "get_user_details") and other != user:
            problems.append(f"{action.name} on user {other}, not the authenticated {user}")
    return problems


@rule_check("one-final-action-per-order", "A cancelled order cannot be returned, exchanged or "
                                          "modified, and an order is cancelled, returned or "
                                          "exchanged at most once.")
def one_final_action(trace: Trace):
    done: dict[str, str] = {}
    problems = []
    for action in trace.actions:
        order_id = action.arguments.get("order_id")
        if action.name not in ORDER_WRITES or order_id is None:
            continue
        if order_id in done:
            problems.append(f"{action.name} on order {order_id} after {done[order_id]} of the same order")
        status = (action.before.get("orders", order_id) or {}).get("status")
        if status == "cancelled":
            problems.append(f"{action.name} on order {order_id}, which is cancelled")
        if action.name in FINAL and not action.error:
            done[order_id] = action.name
    return problems


@rule_check("items-change-once", "Items of a pending order are changed once, all in one go; a "
                                 "delivered order is exchanged once.")
def items_change_once(trace: Trace):
    seen: set[tuple[str, str]] = set()
    problems = []
    for action in trace.calls("modify_pending_order_items", "exchange_delivered_order_items"):
        key = (action.name, action.arguments.get("order_id"))
        if key in seen:
            problems.append(f"{action.name} called twice for order {key[1]}: collect every item first")
        if not action.error:
            seen.add(key)
    return problems


@rule_check("pending-only", "Only pending orders can be cancelled or modified; only delivered "
                            "orders can be returned or exchanged.")
def status_allows(trace: Trace):
    problems = []
    for action in trace.calls(*ORDER_WRITES):
        order = action.record("orders", "order_id")
        if order is None:
            continue
        wanted = "delivered" if action.name in ("return_delivered_order_items",
                                                 "exchange_delivered_order_items") else "pending"
        if order["status"] != wanted:
            problems.append(f"{action.name} on order {order['order_id']}, whose status is "
                            f"'{order['status']}', not '{wanted}'")
    return problems


@rule_check("transfer-ends", "A transfer to a human agent ends the conversation.")
def transfer_ends(trace: Trace):
    for action in trace.calls("transfer_to_human_agents"):
        if action.index != len(trace.actions) - 1:
            return f"{len(trace.actions) - 1 - action.index} call(s) after the transfer to a human agent"
    return None
