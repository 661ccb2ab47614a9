"""Every response model a step asks a model for keeps to the JSON-Schema subset local grammars
enforce (issue 37, point 6): llama.cpp's json-schema-to-grammar converter reads a ``\\d`` in a
pattern as "any string" (the model then writes anything, and fails validation every time).

The response models are found, not listed: every built-in pipeline runs on a model that records
each response model it is asked for and the call site that asked (``ctx.llm.structured(...)``),
and every call site of ``.structured(`` in intellagent/ and plugins/ must have been seen."""

from __future__ import annotations

import ast
import shutil
import sys

import pytest

from intellagent.cli import cli
from intellagent.testing.local_grammar import grammar_problems, pattern_problem
from tests.conftest import REPO
from tests.schema_recorder import LAYER, SEEN

def call_sites() -> list[tuple[str, int, int]]:
    """(file, first line, last line) of every ``<x>.structured(...)`` call in intellagent/ and
    plugins/ outside the LLM layer."""
    sites = []
    for root in ("intellagent", "plugins"):
        for path in sorted((REPO / root).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            if rel.startswith(LAYER):
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                        and node.func.attr == "structured":
                    sites.append((rel, node.lineno, node.end_lineno or node.lineno))
    return sites


RUNS = [
    ("plain", ["airline", "--events", "4"]),
    ("plain", ["{tasked}", "--events", "3", "--set", "steps.graph.with.edges=pairwise"]),
    ("tooltalk", ["tooltalk", "--pipeline", "tooltalk-generate", "--agent", "tooltalk/oracle", "--requests", "4"]),
    ("almita", ["almita", "--pipeline", "almita"]),
    ("plain", ["airline", "--pipeline", "almita", "--set", "steps.intents.with.count=2"]),
    ("apigen", ["retail", "--pipeline", "apigen-mt", "--agent", "tau-oracle", "--blueprints", "8",
                "--trials", "2", "--pairs", "2", "--set", "steps.contexts.with.user_pool=2",
                "--set", "steps.dialogs.with.candidates=2"]),
]


@pytest.fixture(scope="module")
def seen(tmp_path_factory) -> dict[tuple[str, int], set[type]]:
    from click.testing import CliRunner

    SEEN.clear()
    tasked = tmp_path_factory.mktemp("env") / "tasked"  # an environment that states its task
    shutil.copytree(REPO / "environments" / "education", tasked)
    (tasked / "task.md").write_text("Help children with their homework without doing it for them.\n")
    manifest = tasked / "environment.yaml"
    manifest.write_text(manifest.read_text().replace("name: education", "name: tasked") + "task: task.md\n")
    depth = sys.get_coroutine_origin_tracking_depth()
    sys.set_coroutine_origin_tracking_depth(32)
    try:
        for i, (model, args) in enumerate(RUNS):
            ws = tmp_path_factory.mktemp(f"run{i}")
            args = [str(tasked) if a == "{tasked}" else a for a in args]
            result = CliRunner().invoke(cli, ["run", *args, "--workspace", str(ws),
                                              "--set", "llm.roles={}", "--model", "mock/function",
                                              "--set", f"llm.default.options.function=tests.schema_recorder:{model}"])
            assert result.exit_code == 0, (args, result.output, result.exception)
    finally:
        sys.set_coroutine_origin_tracking_depth(depth)
    return dict(SEEN)


def test_every_structured_call_site_was_seen(seen):
    missing = [f"{f}:{a}" for f, a, b in call_sites()
               if not any(f == g and a <= line <= b for g, line in seen)]
    assert not missing, f"structured calls no run reached (add a run that does): {missing}"


def test_every_response_model_is_read_whole_by_a_local_grammar(seen):
    models = {m for found in seen.values() for m in found}
    assert len(models) >= 20
    problems = {f"{m.__module__}.{m.__name__}": grammar_problems(m.model_json_schema()) for m in models}
    assert not {name: p for name, p in problems.items() if p}


@pytest.mark.parametrize("pattern,why", [
    (r"^[A-Z]{1,3}\d{1,2}$", "uses the escape \\d"), (r"^\w+$", "uses the escape \\w"),
    (r"^(?=.*x)x+$", "group syntax"), (r"^[^\s]+$", "escape \\s in a character class"),
    (r"[a-z]+", "not anchored"), (r"^a$b$", "anchor inside")])
def test_the_grammar_check_refuses_what_llama_cpp_ignores(pattern, why):
    assert why in (pattern_problem(pattern) or "")
    assert grammar_problems({"type": "object", "properties": {"x": {"type": "string", "pattern": pattern}}})
    assert pattern_problem(r"^[A-Z]{1,3}[0-9]{1,2}$") is None and pattern_problem(r"^(?:a|b\.c){2,}$") is None


def test_the_grammar_check_names_ignored_keywords():
    schema = {"type": "object", "properties": {
        "w": {"type": "number", "minimum": 0, "maximum": 1}, "n": {"type": "integer", "minimum": 0},
        "e": {"type": "string", "format": "email"}, "u": {"type": "array", "uniqueItems": True},  # 4 problems
        "d": {"type": "string", "format": "date"}}}
    problems = grammar_problems(schema)
    assert len(problems) == 4 and all(p.startswith("#/properties/") for p in problems)
    assert sum("'minimum' of a number" in p or "'maximum' of a number" in p for p in problems) == 2
    assert any("format 'email'" in p for p in problems) and any("'uniqueItems'" in p for p in problems)
