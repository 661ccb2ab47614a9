"""Data validators: raise ValidationFailed with a message a model can act on."""

from intellagent.environment import ValidationFailed, row_validator


@row_validator("customers")
def email_looks_valid(customer, db):
    if "@" not in customer["email"]:
        raise ValidationFailed(f"email {customer['email']!r} has no '@'")


@row_validator("tickets")
def tags_are_strings(ticket, db):
    if not all(isinstance(tag, str) for tag in ticket["tags"]):
        raise ValidationFailed("tags must be a list of strings")
