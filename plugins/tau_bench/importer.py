"""``intellagent import tau-bench PATH``: turn a τ-bench checkout's domains into ready
environment folders: its data, its policy and its tasks (as JSON), with IntellAgent's schema and
tools for that domain (which behave exactly like τ-bench's). Task files are Python in τ-bench;
they are read with ``ast``, never executed."""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path
from typing import Any

import click

from intellagent.errors import IntellagentError

DOMAINS = {"airline": ("flights", "reservations", "users"), "retail": ("orders", "products", "users")}


def _literal(node: ast.AST, source: Path) -> Any:
    """A literal, or a ``Task(...)``/``Action(...)`` call turned into a dict of its keywords."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("Task", "Action"):
        if node.args:
            raise IntellagentError("positional arguments are not supported", file=source, line=node.lineno)
        return {kw.arg: _literal(kw.value, source) for kw in node.keywords}
    if isinstance(node, ast.List):
        return [_literal(item, source) for item in node.elts]
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise IntellagentError("task files may only hold literals, Task(...) and Action(...)",
                               file=source, line=getattr(node, "lineno", None)) from None


def read_task_file(path: Path) -> list[dict[str, Any]]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except SyntaxError as exc:
        raise IntellagentError(f"not valid Python: {exc.msg}", file=path, line=exc.lineno) from None
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.List):
            tasks = _literal(stmt.value, path)
            return [{"index": i, "user_id": t.get("user_id"), "instruction": t.get("instruction", ""),
                     "actions": [{"name": a["name"], "kwargs": a.get("kwargs", {})} for a in t.get("actions", [])],
                     "outputs": t.get("outputs", [])} for i, t in enumerate(tasks)]
    raise IntellagentError("no list of tasks found", file=path)


def domain_folder(checkout: Path, domain: str) -> Path:
    for candidate in (checkout / "tau_bench" / "envs" / domain, checkout / "envs" / domain, checkout):
        if (candidate / "data").is_dir() and (candidate / "wiki.md").is_file():
            return candidate
    raise IntellagentError(f"no τ-bench {domain} domain here (expected tau_bench/envs/{domain} "
                           "with data/ and wiki.md)", file=checkout)


def import_domain(checkout: Path, domain: str, out: Path) -> Path:
    source = domain_folder(checkout, domain)
    import intellagent_environments

    builtin = Path(intellagent_environments.__file__).parent / domain
    dest = out / f"tau-{domain}"
    if dest.exists() and any(dest.iterdir()):
        raise IntellagentError("folder exists and is not empty", file=dest)
    (dest / "data").mkdir(parents=True, exist_ok=True)
    (dest / "database").mkdir(exist_ok=True)
    copied: dict[str, str] = {}
    for table in DOMAINS[domain]:
        found = [p for p in (source / "data" / f"{table}.json", source / "data" / f"{table}.json.gz") if p.is_file()]
        if not found:
            raise IntellagentError(f"missing {table}.json", file=source / "data")
        shutil.copyfile(found[0], dest / "data" / found[0].name)
        copied[table] = found[0].name
    shutil.copyfile(source / "wiki.md", dest / "policy.md")
    shutil.copyfile(builtin / "database" / "schema.yaml", dest / "database" / "schema.yaml")
    shutil.copyfile(builtin / "tools.yaml", dest / "tools.yaml")
    splits = []
    for task_file in sorted(source.glob("tasks_*.py")):
        split = task_file.stem.removeprefix("tasks_")
        tasks = read_task_file(task_file)
        (dest / "data" / f"tasks_{split}.json").write_text(json.dumps(tasks, indent=1), encoding="utf-8")
        splits.append(f"{split} ({len(tasks)})")
    (dest / "environment.yaml").write_text(
        f"name: tau-{domain}\nversion: 0.1.0\n"
        f"description: {json.dumps(f'τ-bench {domain} domain imported from {source}; tasks: ' + (', '.join(splits) or 'none'), ensure_ascii=False)}\n"
        "prompt: policy.md\ndatabase:\n  schema: database/schema.yaml\n"
        # the tables' files by name: data/ also holds the task files
        "  seed: {" + ", ".join(f"{t}: data/{n}" for t, n in sorted(copied.items())) + "}\n"
        f"tools: tools.yaml\nvalidators: intellagent_environments.{domain}.validators\n", encoding="utf-8")
    return dest


@click.group("import")
def import_group() -> None:
    """Turn another project's benchmark into IntellAgent environments."""


@import_group.command("tau-bench")
@click.argument("checkout", type=click.Path(path_type=Path))
@click.option("--domain", type=click.Choice(["airline", "retail", "all"]), default="all",
              show_default=True)
@click.option("--out", type=click.Path(path_type=Path), default=Path("."), show_default=True)
def import_tau_bench(checkout: Path, domain: str, out: Path) -> None:
    """Make environment folders tau-airline and tau-retail from a τ-bench CHECKOUT: its data,
    policy and tasks with IntellAgent's faithful tools. Run its tasks with
    `intellagent run OUT/tau-airline --pipeline tau-bench`."""
    if not checkout.is_dir():
        raise IntellagentError("τ-bench checkout not found", file=checkout)
    for name in (DOMAINS if domain == "all" else [domain]):
        click.echo(f"created {import_domain(checkout, name, out)}")
