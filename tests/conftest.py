"""Shared fixtures: a small valid environment to break, and a CLI runner."""

from __future__ import annotations

import json
import textwrap
from functools import lru_cache
from pathlib import Path

import pytest
from click.testing import CliRunner

REPO = Path(__file__).resolve().parent.parent
TAU_BENCH = REPO.parent / "shared" / "datasets" / "tau-bench"

MANIFEST = """\
name: shop
version: 0.1.0
description: A tiny shop for tests.
prompt: prompt.md
database:
  schema: schema.yaml
  seed: data
tools: tools.yaml
validators: validators.py
"""

SCHEMA = """\
tables:
  customers:
    primary_key: customer_id
    columns:
      customer_id: {type: string}
      name: {type: string}
      tier: {type: string, enum: [basic, gold]}
      credit: {type: integer}
  orders:
    primary_key: order_id
    columns:
      order_id: {type: string}
      customer_id: {type: string, references: customers.customer_id}
      items: {type: json}
      note: {type: string, nullable: true, omit_if_null: true}
"""

TOOLS = """\
tools:
  - name: get_customer
    description: Look up a customer.
    implementation: impl.py:get_customer
    parameters:
      type: object
      properties:
        customer_id: {type: string}
      required: [customer_id]
  - name: add_credit
    description: Add credit to a customer.
    action: true
    implementation: impl.py:add_credit
    parameters:
      type: object
      properties:
        customer_id: {type: string}
        amount: {type: integer, minimum: 1}
      required: [customer_id, amount]
"""

IMPL = """\
from intellagent.environment import ToolError


def get_customer(db, customer_id):
    customer = db.get("customers", customer_id)
    if customer is None:
        raise ToolError("customer not found")
    return customer


def add_credit(db, customer_id, amount):
    customer = get_customer(db, customer_id)
    customer["credit"] += amount
    db.put("customers", customer_id, customer)
    if customer["credit"] > 1000:
        raise ToolError("credit limit exceeded")
    return customer
"""

VALIDATORS = """\
from intellagent.environment import ValidationFailed, row_validator


@row_validator("customers")
def credit_not_negative(customer, db):
    if customer["credit"] < 0:
        raise ValidationFailed("credit must not be negative")
"""

CUSTOMERS = [
    {"customer_id": "c1", "name": "Ana {not a template}", "tier": "gold", "credit": 10},
    {"customer_id": "c2", "name": "Bo", "tier": "basic", "credit": 0},
]
ORDERS = [
    {"order_id": "o1", "customer_id": "c1", "items": [{"sku": "A", "qty": 2.0}]},
    {"order_id": "o2", "customer_id": "c2", "items": [], "note": "gift"},
]


def write_env(root: Path) -> Path:
    """A small, valid environment folder at ``root/shop``."""
    env = root / "shop"
    (env / "data").mkdir(parents=True)
    (env / "environment.yaml").write_text(MANIFEST)
    (env / "prompt.md").write_text("# Shop\nBe kind. Braces {like_this} stay as they are.\n")
    (env / "schema.yaml").write_text(SCHEMA)
    (env / "tools.yaml").write_text(TOOLS)
    (env / "impl.py").write_text(IMPL)
    (env / "validators.py").write_text(VALIDATORS)
    (env / "data" / "customers.json").write_text(json.dumps(CUSTOMERS, indent=1))
    (env / "data" / "orders.jsonl").write_text("\n".join(json.dumps(o) for o in ORDERS) + "\n")
    return env


@lru_cache(maxsize=None)
def _plain_jinja(folder: str):
    import jinja2

    return jinja2.Environment(loader=jinja2.FileSystemLoader(folder), autoescape=False,
                              undefined=jinja2.StrictUndefined, keep_trailing_newline=False)


@pytest.fixture(autouse=True)
def built_in_prompts_render_as_outside_the_sandbox(monkeypatch):
    """Every built-in prompt any test renders (in Jinja2's sandbox) is also rendered by a plain
    Jinja2 environment, and the two must agree: the sandbox changes no prompt we ship."""
    from intellagent.prompts import PromptFiles

    sandboxed = PromptFiles.render

    def render(self, name, **values):
        text = sandboxed(self, name, **values)
        if not (self.override and (Path(self.override) / name).is_file()):
            plain = _plain_jinja(self.builtin).get_template(name).render(**values).strip()
            assert text == plain, f"{self.builtin}/{name} renders differently in the sandbox"
        return text

    monkeypatch.setattr(PromptFiles, "render", render)


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    return write_env(tmp_path)


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def dedent(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")
