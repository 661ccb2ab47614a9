"""The docs' local route (docs/local-models.md) is true: its llama-server settings, as written, run a pipeline against
the local test server imitating llama-server; the structured mode each role used (an ``auto``
probe's pick) is shown in the run summary, the report (report.json info and HTML) and ``cost``
(issue 37, point 7)."""

from __future__ import annotations

import re

import pytest
from ruamel.yaml import YAML

from intellagent.cli import cli
from intellagent.testing.openai_server import OpenAIServer
from tests.conftest import REPO
from intellagent_plugins.reporters.writers import read_report
from tests.docs_pages import page

LOCAL_MODELS = page("local-models.md")


def readme_llm_settings() -> dict:
    """The `llm:` block the "Local models" page gives."""
    block = re.search(r"```yaml\n(llm:.+?)```", LOCAL_MODELS, re.S).group(1)
    return YAML(typ="safe").load(block)["llm"]


@pytest.mark.parametrize("structured", ["as written", "auto"])
def test_readmes_llama_server_settings_run_and_the_mode_is_shown(structured, runner, tmp_path):
    llm = readme_llm_settings()
    assert llm["default"]["base_url"] == "http://127.0.0.1:8080/v1" and llm["default"]["structured"] == "json_schema"
    assert llm["timeout"] == 300 and llm["max_concurrency"] == 2
    with OpenAIServer(quirks=["ignore-tool-choice"]) as server:  # llama-server answers a named tool choice in text
        llm["default"]["base_url"] = server.base_url
        if structured == "auto":
            del llm["default"]["structured"]
        spec = YAML(typ="safe").load((REPO / "plugins" / "intellagent" / "pipeline.yaml").read_text())
        spec["llm"] = llm
        pipeline = tmp_path / "pipeline.yaml"
        with pipeline.open("w") as out:
            YAML(typ="safe").dump(spec, out)
        ws = tmp_path / "ws"
        result = runner.invoke(cli, ["run", "education", "--pipeline", str(pipeline), "--events", "2",
                                     "--workspace", str(ws)])
        structured_calls = [r for r in server.requests if r.get("response_format")]
    assert result.exit_code == 0, (result.output, result.exception)
    assert structured_calls and all(r["response_format"]["type"] == "json_schema" for r in structured_calls)
    roles = ["critic", "edges", "extractor", "generator", "user"]
    assert f"  structured output: json_schema ({', '.join(roles)})" in result.stdout.splitlines()
    report = read_report(next(ws.glob("runs/*/report.json")))
    assert report["info"]["structured"] == {r: "json_schema" for r in roles}
    assert not [i for i in report["items"] if i["status"] in ("infra-error", "invalid-output")]
    html = next(ws.glob("runs/*/report.html")).read_text()
    assert "<th>structured output</th><td>json_schema (critic, edges, extractor, generator, user)</td>" in html
    cost = runner.invoke(cli, ["cost", "--workspace", str(ws)])
    assert "structured output: json_schema (critic, edges, extractor, generator, user)" in cost.stdout


def test_readme_names_the_known_issues_of_local_servers():
    section = LOCAL_MODELS
    assert "--no-repack" in section
    assert "chatml-function-calling" in section and "HTML-escapes" in section
    assert "do not use `--chat_format chatml-function-calling`" in section
