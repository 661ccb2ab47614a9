"""Tool implementations: each takes the event's database first, then the spec's parameters."""

from intellagent.environment import Database, ToolError


def find_customer(db: Database, email: str) -> dict:
    for customer in db.all("customers"):
        if customer["email"].lower() == email.lower():
            return customer
    raise ToolError("no customer with that email")


def open_ticket(db: Database, customer_id: str, subject: str) -> dict:
    if not db.has("customers", customer_id):
        raise ToolError("customer not found")
    ticket = {"ticket_id": f"t{db.count('tickets') + 1}", "customer_id": customer_id,
              "subject": subject, "status": "open", "tags": []}
    db.insert("tickets", ticket)
    return ticket


def close_ticket(db: Database, customer_id: str, ticket_id: str) -> dict:
    ticket = db.get("tickets", ticket_id)
    if ticket is None or ticket["customer_id"] != customer_id:
        raise ToolError("ticket not found for this customer")
    if ticket["status"] == "closed":
        raise ToolError("ticket is already closed")
    return db.update("tickets", ticket_id, status="closed")
