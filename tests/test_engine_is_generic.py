"""The engine knows no pipeline: ``intellagent/`` imports nothing from the built-in plugins or
environments, and its code (docstrings aside) names no concept of one pipeline."""

from __future__ import annotations

import ast
import re
import subprocess
import sys

from tests.conftest import REPO

ENGINE = REPO / "intellagent"
FORBIDDEN_IMPORTS = ("intellagent_plugins", "intellagent_environments")
# words of the IntellAgent and τ-bench pipelines that must not shape the engine's code
VOCABULARY = re.compile(r"(?i)(polic(y|ies)|verdict|violation|challenge|scenario|symbolic|eventspec"
                        r"|event_spec|tau|oracle|weighted.?walk)")


def sources():
    return sorted(p for p in ENGINE.rglob("*.py") if "__pycache__" not in p.parts)


def docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def test_the_engine_imports_no_plugin_and_no_environment():
    for path in sources():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                names = [node.value] if node.value.startswith(FORBIDDEN_IMPORTS) else []
            for name in names:
                assert not name.startswith(FORBIDDEN_IMPORTS), f"{path.relative_to(REPO)}:{node.lineno} {name}"


def test_the_engine_names_no_concept_of_one_pipeline():
    hits = []
    for path in sources():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = docstrings(tree)
        for node in ast.walk(tree):
            words = []
            if isinstance(node, ast.Name):
                words = [node.id]
            elif isinstance(node, ast.Attribute):
                words = [node.attr]
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                words = [node.name]
            elif isinstance(node, ast.arg):
                words = [node.arg]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
                words = [node.value]
            for word in words:
                if VOCABULARY.search(word) and "policy document" not in word:
                    hits.append(f"{path.relative_to(REPO)}:{getattr(node, 'lineno', '?')}: {word[:80]!r}")
    assert not hits, "\n".join(hits)


def test_running_the_engine_loads_no_plugin_until_the_registry_does():
    code = ("import sys, intellagent.cli, intellagent.runner, intellagent.plan, intellagent.results; "
            "print(sorted(m for m in sys.modules if m.startswith(('intellagent_plugins', "
            "'intellagent_environments', 'openai', 'instructor', 'opentelemetry', 'litellm', 'rich'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
