"""The observer hooks see a run's lifecycle: before/after the run and every step, and errors."""

from __future__ import annotations

import types

from intellagent import hookimpl
from intellagent.cli import cli
from tests.conftest import REPO


def recorder():
    seen: list[tuple] = []
    plugin = types.ModuleType("observer")
    plugin.before_run = hookimpl(lambda run: seen.append(("before_run", run.env.name)))
    plugin.after_run = hookimpl(lambda run, report: seen.append(
        ("after_run", sum(report.outcomes.values()))))
    plugin.on_run_error = hookimpl(lambda run, error: seen.append(("on_run_error", type(error).__name__)))
    plugin.before_step = hookimpl(lambda run, step: seen.append(("before_step", step.name, step.kind)))
    plugin.after_step = hookimpl(lambda run, step, summary: seen.append(
        ("after_step", step.name, summary["items"])))
    plugin.on_step_error = hookimpl(lambda run, step, error: seen.append(("on_step_error", step.name, str(error))))
    return plugin, seen


def test_observers_see_every_step(runner, tmp_path):
    plugin, seen = recorder()
    result = runner.invoke(cli, ["run", "education", "--events", "5", "--workspace", str(tmp_path)],
                           obj={"plugins": (plugin,)})
    assert result.exit_code == 0, result.output
    assert seen[0] == ("before_run", "education") and seen[-1] == ("after_run", 5)
    started = [s[1:] for s in seen if s[0] == "before_step"]
    assert started == [("graph", "extractor"), ("specs", "sampler"), ("events", "generator"),
                       ("dialogs", "simulator"), ("verdicts", "critic")]
    after = {s[1]: s[2] for s in seen if s[0] == "after_step"}
    assert after["graph"] == 1 and after["specs"] == 1 and after["events"] == 5
    assert after["dialogs"] == after["verdicts"] <= 5
    order = [s[1] for s in seen if s[0] == "after_step"]
    assert order.index("specs") < order.index("events") < order.index("verdicts")
    assert not any(s[0].startswith("on_") for s in seen)


def broken_generator():
    from intellagent.steps import Generator
    from intellagent_plugins.intellagent.artefacts import Event, EventSpec, PolicyGraph

    class Broken(Generator):
        name = "broken-events"
        inputs = {"graph": PolicyGraph, "spec": EventSpec}
        output = Event

        async def run(self, ctx, graph, spec):
            raise RuntimeError("generator bug")

    return Broken


def run_broken_pipeline(runner, tmp_path, observer):
    """The IntellAgent pipeline with an event generator that raises, run with ``observer``."""
    steps = types.ModuleType("brokenstages")
    steps.register_stages = hookimpl(lambda register: register(broken_generator()))
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text((REPO / "plugins" / "intellagent" / "pipeline.yaml").read_text().replace(
        "{use: symbolic-events,", "{use: brokenstages/broken-events,"))
    return runner.invoke(cli, ["run", "education", "--pipeline", str(pipeline), "--events", "2",
                               "--workspace", str(tmp_path / "ws")], obj={"plugins": (observer, steps)})


def test_observers_see_a_step_error(runner, tmp_path):
    plugin, seen = recorder()
    result = run_broken_pipeline(runner, tmp_path, plugin)
    assert result.exit_code != 0
    assert ("on_step_error", "events", "generator bug") in seen
    assert ("on_run_error", "RuntimeError") in seen and not any(s[0] == "after_run" for s in seen)


def test_after_run_sees_the_reports_written(runner, tmp_path):
    """after_run is called once the reports are written (an observer may publish them): `run`
    wrote them itself after the runner returned, after the hook."""
    found = []
    plugin = types.ModuleType("report_observer")
    plugin.after_run = hookimpl(lambda run, report: found.extend(
        sorted(p.name for p in (tmp_path / "runs" / report.info.run_id).glob("report.*"))))
    result = runner.invoke(cli, ["run", "education", "--events", "2", "--workspace", str(tmp_path)],
                           obj={"plugins": (plugin,)})
    assert result.exit_code == 0, result.output
    assert "report.json" in found and "report.html" in found
