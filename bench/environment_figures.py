"""The built-in environments' sizes, as README's table states them: seed rows per table and
tools (no network).

    python bench/environment_figures.py
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

#: How README names each environment's tables, in the order it lists them (empty tables left out).
TABLES = {"airline": [("users", "users"), ("flights", "flights over May 2024"), ("reservations", "reservations")],
          "retail": [("users", "users"), ("products", "products with variants"), ("orders", "orders")],
          "almita": [("customers", "customers"), ("orders", "orders")]}


def sizes() -> dict[str, tuple[dict[str, int], int]]:
    """Per environment: seed rows per table, and the number of tools."""
    from intellagent.environment import load_environment
    from intellagent.envs import environment_path
    from intellagent.registry import load_registry

    registry = load_registry()
    out = {}
    for name in TABLES:
        env = load_environment(environment_path(registry, name))
        db = env.seed_database()
        try:
            out[name] = ({t: db.count(t) for t in env.db_schema.tables}, len(env.tools))
        finally:
            db.close()
    return out


def readme_figures() -> list[str]:
    """The table's figures: "120 users, 70 flights over May 2024, 300 reservations; 14 tools"."""
    return [", ".join(f"{rows[table]:,} {label}" for table, label in TABLES[name]) + f"; {tools} tools"
            for name, (rows, tools) in sizes().items()]


def main() -> None:
    for name, (rows, tools) in sizes().items():
        print(f"{name}: " + ", ".join(f"{t} {n}" for t, n in rows.items()) + f"; {tools} tools")
    print("README's figures:")
    for line in readme_figures():
        print("  " + line)


if __name__ == "__main__":
    main()
