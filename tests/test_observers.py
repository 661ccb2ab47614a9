"""The observer hooks see a run's lifecycle: before/after the run and every stage, and errors."""

from __future__ import annotations

import types

from intellagent import hookimpl
from intellagent.cli import cli


def recorder():
    seen: list[tuple] = []
    plugin = types.ModuleType("observer")
    plugin.before_run = hookimpl(lambda run: seen.append(("before_run", run.env.name)))
    plugin.after_run = hookimpl(lambda run, report: seen.append(("after_run", report.totals["events"])))
    plugin.on_run_error = hookimpl(lambda run, error: seen.append(("on_run_error", type(error).__name__)))
    plugin.before_stage = hookimpl(lambda run, stage: seen.append(("before_stage", stage.kind)))
    plugin.after_stage = hookimpl(lambda run, stage, outputs: seen.append(
        ("after_stage", stage.kind, len(outputs) if isinstance(outputs, list) else type(outputs).__name__)))
    plugin.on_stage_error = hookimpl(lambda run, stage, error: seen.append(("on_stage_error", stage.kind, str(error))))
    return plugin, seen


def test_observers_see_every_stage(runner, tmp_path):
    plugin, seen = recorder()
    result = runner.invoke(cli, ["run", "education", "--events", "5", "--workspace", str(tmp_path)],
                           obj={"plugins": (plugin,)})
    assert result.exit_code == 0, result.output
    assert seen[0] == ("before_run", "education") and seen[-1] == ("after_run", 5)
    assert [s for s in seen if s[0] == "before_stage"] == [
        ("before_stage", k) for k in ("extractor", "sampler", "generator", "simulator", "critic")]
    after = {s[1]: s[2] for s in seen if s[0] == "after_stage"}
    assert after["extractor"] == "PolicyGraph" and after["sampler"] == 5 and after["generator"] == 5
    assert not any(s[0].startswith("on_") for s in seen)


def broken_generator():
    from intellagent.stages import Generator

    class Broken(Generator):
        name = "broken-events"

        async def generate(self, ctx, graph, spec):
            raise RuntimeError("generator bug")

    return Broken


def test_observers_see_a_stage_error(runner, tmp_path):
    plugin, seen = recorder()
    stages = types.ModuleType("brokenstages")
    stages.register_stages = hookimpl(lambda register: register(broken_generator()))
    pipeline = tmp_path / "p.yaml"
    from intellagent.engine import builtin_pipeline

    pipeline.write_text(builtin_pipeline().read_text().replace("{use: symbolic-events}", "{use: brokenstages/broken-events}"))
    result = runner.invoke(cli, ["run", "education", "--pipeline", str(pipeline), "--events", "2",
                                 "--workspace", str(tmp_path / "ws")], obj={"plugins": (plugin, stages)})
    assert result.exit_code != 0
    assert ("on_stage_error", "generator", "generator bug") in seen
    assert ("on_run_error", "RuntimeError") in seen and ("after_run", 2) not in seen
