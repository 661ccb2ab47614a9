"""A model's answer that does not fit is its own status (``invalid-output``), not an infra error
and never the agent's: the item's note names every failed field, the item is never cached as
finished, the CLI says a re-run can fix it, and the re-run asks with another seed, so running
again helps a deterministic model (issue 37, point 4)."""

from __future__ import annotations

import json
import random

from intellagent.cli import cli
from intellagent.llm.fabricate import fabricate
from tests.conftest import REPO
from intellagent_plugins.reporters.writers import read_report

FIRST_SEED: dict[str, int] = {}  # each scenario question → the seed it was first asked with
ASKED: list[int] = []


def deterministic_model(request, response_model):
    """A model that always gives the same answer to the same request: a scenario asked with the
    seed it was first asked with gets an answer that does not fit; any other seed, a good one."""
    if response_model is None:
        return "Sure."
    if response_model.__name__ == "ScenarioDraft":
        question = request.model_copy(update={"seed": None}).key()
        first = FIRST_SEED.setdefault(question, request.seed)
        ASKED.append(request.seed)
        if request.seed == first:
            return {"scenario": 5, "user_knowledge": ["not", "text"]}
    return fabricate(response_model.model_json_schema(), random.Random(request.key()))


def test_output_that_does_not_fit_is_its_own_status_and_a_rerun_retries_it(runner, tmp_path):
    FIRST_SEED.clear()
    ASKED.clear()
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text((REPO / "plugins" / "intellagent" / "pipeline.yaml").read_text().replace(
        "default: {model: mock/schema}",
        "default: {model: mock/schema}\n  roles: {generator: {model: mock/function, options: "
        "{function: 'tests.test_invalid_output:deterministic_model'}}}\n  validation_retries: 0"))
    args = ["run", "airline", "--pipeline", str(pipeline), "--events", "3", "--workspace", str(tmp_path / "ws")]

    first = runner.invoke(cli, args)
    assert first.exit_code == 3, (first.output, first.exception)  # items could not finish
    report = read_report(next((tmp_path / "ws").glob("runs/*/report.json")))
    events = [i for i in report["items"] if i["step"] == "events"]
    assert len(events) == 3 and {e["status"] for e in events} == {"invalid-output"}
    for e in events:  # every failed field and why, not pydantic's first line only
        assert "scenario: Input should be a valid string" in e["note"]
        assert "user_knowledge: Input should be a valid string" in e["note"] and "expected: Field required" in e["note"]
    assert not [i for i in report["items"] if i["step"] in ("dialogs", "verdicts")]
    assert "infra-error" not in json.dumps(report["outcomes"])
    assert "3 item(s) could not finish (3 invalid-output; see the report)" in first.stdout
    assert "invalid-output (a model answer that did not fit, asked again with another seed)" in first.stdout
    assert report["metrics"]["success"]["values"].get("n", 0) == 0  # nothing counted against the agent
    seeds_first = list(ASKED)

    second = runner.invoke(cli, args)  # "run the same command again"
    assert second.exit_code == 0, (second.output, second.exception)
    assert len(ASKED) == 2 * len(seeds_first)  # the unfinished items were made again, not reused
    assert not set(ASKED[len(seeds_first):]) & set(seeds_first)  # each with a seed of its own
    report = read_report(next((tmp_path / "ws").glob("runs/*/report.json")))
    events = [i for i in report["items"] if i["step"] == "events"]
    assert len(events) == 3 and "invalid-output" not in {e["status"] for e in events}
    assert "could not finish" not in second.stdout
