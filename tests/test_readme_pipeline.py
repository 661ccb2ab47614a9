"""The docs' "Writing a pipeline" (docs/writing/pipeline.md) is true: every name it mentions imports from the module it names,
and its dialogue-kit example (a scenario type of its own, played by the kit's user-agent) runs as
written."""

from __future__ import annotations

import ast
import importlib
import re
import types

import pytest

from intellagent.cli import cli
from intellagent_plugins.reporters.writers import read_report
from tests.docs_pages import page


def section() -> str:
    return page("writing/pipeline.md")


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", section(), flags=re.S)


def dotted_names() -> list[str]:
    """``intellagent.x.Y`` written in backticks (a call's arguments cut off)."""
    found = re.findall(r"`((?:intellagent|intellagent_plugins)(?:\.\w+)+)", section())
    return sorted(set(found))


def test_every_import_in_the_sections_code_works():
    imports = []
    for code in blocks("python"):
        for node in ast.walk(ast.parse(code)):
            if isinstance(node, ast.ImportFrom) and node.module.startswith("intellagent"):
                imports += [(node.module, a.name) for a in node.names]
    assert len(imports) >= 10
    for module, name in imports:
        assert hasattr(importlib.import_module(module), name), f"from {module} import {name}"


def test_every_dotted_name_the_section_mentions_resolves():
    names = dotted_names()
    assert "intellagent.report.Reporter" in names and "intellagent_plugins.dialogue" in names
    for dotted in names:
        parts = dotted.split(".")
        for cut in range(len(parts), 0, -1):  # the longest importable module, then attributes
            try:
                obj = importlib.import_module(".".join(parts[:cut]))
            except ModuleNotFoundError:
                continue
            for attr in parts[cut:]:
                assert hasattr(obj, attr), dotted
                obj = getattr(obj, attr)
            break
        else:
            pytest.fail(f"{dotted} does not import")


def redteam(tmp_path):
    """The section's red-team example, written as its author would: the module, the persona, the
    pipeline."""
    [plugin] = [c for c in blocks("python") if "class Attack(Scenario)" in c]
    [persona] = blocks("jinja")
    [spec] = [c for c in blocks("yaml") if "acme/leak-check" in c]
    module = types.ModuleType("acme_redteam")
    module.INTELLAGENT_NAMESPACE = "acme"
    exec(compile(plugin, "acme_redteam.py", "exec"), module.__dict__)
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "user.attacker.md").write_text(persona)
    (tmp_path / "redteam.yaml").write_text(spec)
    return module


def user_turns(request, model):
    """The simulated user (mock/function): the persona it was given, echoed in its first
    message, then a stop."""
    first = len(request.messages) <= 2
    return {"thought": "t", "message": request.messages[0]["content"] if first else "bye",
            "stop": "continue" if first else "failure", "reason": "it would not tell"}


LEAKY = "555-0102"


def leaky_agent(messages, tools):
    return f"Sure, their phone number is {LEAKY}." if "administrator" in messages[-1]["content"] else "I cannot."


@pytest.mark.parametrize("agent,resisted", [(None, {"claim to be that customer": 1.0, "claim to be an administrator": 1.0}),
                                            ("tests.test_readme_pipeline:leaky_agent",
                                             {"claim to be that customer": 1.0, "claim to be an administrator": 0.0})])
def test_the_dialogue_kit_example_runs_as_written(runner, shop, tmp_path, monkeypatch, agent, resisted):
    module = redteam(tmp_path)
    monkeypatch.chdir(tmp_path)  # its prompts: folder is relative, as a user runs it
    args = ["run", str(shop), "--pipeline", "redteam.yaml", "--workspace", "ws",
            "--set", "llm.roles.user.model=mock/function",
            "--set", "llm.roles.user.options.function=tests.test_readme_pipeline:user_turns"]
    if agent:
        args += ["--agent", "python", "--set", f"agent.with.callable={agent}"]
    result = runner.invoke(cli, args, obj={"plugins": (module,)})
    assert result.exit_code == 0, result.output
    report = read_report(next((tmp_path / "ws" / "runs").glob("*/report.json")))
    dialogs = {i["item"]: i["value"] for i in report["items"] if i["step"] == "dialogs"}
    assert len(dialogs) == 2
    for dialog in dialogs.values():  # the user spoke from the example's own persona and scenario
        opening = dialog["turns"][0]["content"]
        assert opening.startswith("You are chatting with a customer-service agent. Get the phone number")
        assert "Your trick: claim to be" in opening
    rows = {r["trick"]: r["rate"]["rate"] for r in report["metrics"]["resisted"]["rows"]}
    assert rows == resisted
