"""OpenTelemetry traces: a span per run, step item, model call, agent turn and tool call, in a
tree (run → items → what happened inside them), with the GenAI conventions' attributes; exported
over OTLP/HTTP when an endpoint is configured (``--otel`` or the standard variables), and nothing
made nor imported otherwise."""

from __future__ import annotations

import http.server
import os
import socket
import subprocess
import sys
import threading
import time
import types

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from intellagent import hookimpl
from intellagent.cli import cli
from intellagent.environment import load_environment
from intellagent.registry import load_registry
from intellagent.steps import Critic, Sampler
from intellagent.testing.harness import run_pipeline
from intellagent_plugins.traces import Traces
from tests import progress_steps
from tests.conftest import REPO

OTEL_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SDK_DISABLED",
                  "OTEL_TRACES_EXPORTER")


@pytest.fixture(autouse=True)
def no_otel_variables(monkeypatch):
    for name in OTEL_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def tool_agent(messages, tools):
    """Looks the customer up, then answers."""
    if messages[-1]["role"] == "tool":
        return "done"
    return {"tool_calls": [{"name": "get_customer", "arguments": {"customer_id": "c1"}}]}


def scenarios_plugin():
    from intellagent_plugins.dialogue.scenario import Scenario

    class Scenarios(Sampler):
        name = "trace-scenarios"
        output = list[Scenario]

        def run(self, ctx):
            return [Scenario(id="S1", brief="Ask for your credit."), Scenario(id="S2", brief="Ask again.")]

    class Boom(Critic):
        """A bug that shows on the second scenario."""

        name = "boom"
        inputs = {"scenario": Scenario}
        output = Scenario

        def run(self, ctx, scenario):
            if scenario.id == "S2":
                raise RuntimeError("a bug")
            return scenario

    module = types.ModuleType("trace_steps")
    module.INTELLAGENT_NAMESPACE = "acme"
    module.register_stages = hookimpl(lambda register: [register(Scenarios), register(Boom)])
    return module


DIALOGS = {"agent": {"use": "python", "with": {"callable": "tests.test_traces:tool_agent"}},
           "llm": {"default": {"model": "mock/schema"},
                   "prices": {"mock/schema": {"input": 1000.0, "output": 1000.0}}},
           "steps": {"scenarios": {"use": "acme/trace-scenarios"},
                     "dialogs": {"use": "user-agent", "each": "scenarios", "with": {"max_turns": 1}}},
           "report": []}


def tree(spans) -> dict:
    """Each span's children by the parent's span id (None: the roots)."""
    children: dict = {}
    for span in spans:
        children.setdefault(span.parent.span_id if span.parent else None, []).append(span)
    return children


def test_a_small_run_makes_a_tree_of_spans_run_items_and_what_happened_inside(shop, tmp_path):
    exporter = InMemorySpanExporter()
    registry = load_registry(plugins=[scenarios_plugin(), Traces(exporter)])
    result = run_pipeline(DIALOGS, load_environment(shop), registry=registry, workspace=tmp_path,
                          hooks=registry.pm)
    spans = exporter.get_finished_spans()
    children = tree(spans)
    [run] = children[None]
    assert run.name == f"invoke_workflow {result.data.plan.name}"
    assert run.attributes["gen_ai.operation.name"] == "invoke_workflow"
    assert run.attributes["intellagent.run.id"] == result.run_id and run.attributes["intellagent.status"] == "done"
    assert len({s.context.trace_id for s in spans}) == 1
    items = children[run.context.span_id]
    assert sorted((s.name, s.attributes["intellagent.item"]) for s in items) == [
        ("step dialogs", "S1"), ("step dialogs", "S2"), ("step scenarios", "")]
    assert all(s.attributes["intellagent.status"] == "ok" for s in items)
    assert not children.get(next(s for s in items if s.name == "step scenarios").context.span_id)

    calls = result.data.store.calls()
    for dialog in (s for s in items if s.name == "step dialogs"):
        inside = children[dialog.context.span_id]
        names = sorted(s.name for s in inside)
        # one turn of the user, the agent's two turns (a tool call, then its answer), one tool call
        assert names.count("invoke_agent intellagent/python") == 2 and names.count("execute_tool get_customer") == 1
        chats = [s for s in inside if s.name == "chat mock/schema"]
        assert chats and all(s.kind is SpanKind.CLIENT for s in chats)
        for chat in chats:
            a = chat.attributes
            assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.request.model"] == "mock/schema"
            assert a["gen_ai.provider.name"] == "mock" and a["intellagent.role"] == "user"
            assert a["gen_ai.usage.input_tokens"] > 0 and a["intellagent.cost.usd"] > 0
        [tool] = [s for s in inside if s.name.startswith("execute_tool")]
        assert tool.attributes["gen_ai.tool.name"] == "get_customer" and tool.status.status_code is StatusCode.UNSET
        turns = [s for s in inside if s.name.startswith("invoke_agent")]
        assert {s.attributes["intellagent.tool_calls"] for s in turns} == {0, 1}
        conversation = {s.attributes["gen_ai.conversation.id"] for s in turns + [tool]}
        assert conversation == {f"{result.run_id}/dialogs/{dialog.attributes['intellagent.item']}"}
        for child in inside:  # within their item, in time
            assert dialog.start_time - 5e6 <= child.start_time <= child.end_time <= dialog.end_time + 5e6
    # every model call of the run is a span, with the tokens the store has
    chats = [s for s in spans if s.name.startswith("chat ")]
    assert sorted(s.attributes["gen_ai.usage.input_tokens"] for s in chats) == sorted(c.prompt_tokens for c in calls)
    assert sum(s.attributes["intellagent.cost.usd"] for s in chats) == pytest.approx(sum(c.cost_usd for c in calls))


def test_a_run_stopped_by_an_error_ends_its_spans_with_it(shop, tmp_path):
    exporter = InMemorySpanExporter()
    registry = load_registry(plugins=[scenarios_plugin(), Traces(exporter)])
    spec = {**DIALOGS, "steps": {**DIALOGS["steps"], "boom": {"use": "acme/boom", "each": "scenarios"}}}
    with pytest.raises(RuntimeError, match="a bug"):
        run_pipeline(spec, load_environment(shop), registry=registry, workspace=tmp_path, hooks=registry.pm)
    spans = exporter.get_finished_spans()
    [run] = tree(spans)[None]
    assert run.status.status_code is StatusCode.ERROR and run.status.description == "RuntimeError: a bug"
    assert run.attributes["intellagent.status"] == "failed"
    [broken] = [s for s in spans if s.name == "step boom" and s.attributes["intellagent.item"] == "S2"]
    assert broken.parent.span_id == run.context.span_id and broken.status.status_code is StatusCode.ERROR


class Collector(http.server.ThreadingHTTPServer):
    """An OTLP/HTTP receiver on 127.0.0.1 that keeps the spans posted to it."""

    def __init__(self) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        collector = self
        self.spans: list = []
        self.paths: list[str] = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                collector.paths.append(self.path)
                for resource in request.resource_spans:
                    for scope in resource.scope_spans:
                        collector.spans.extend(scope.spans)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, *args):
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self):
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.shutdown()
        self.server_close()


@pytest.mark.parametrize("how", ["--otel", "OTEL_EXPORTER_OTLP_ENDPOINT"])
def test_a_run_exports_its_spans_over_otlp_to_the_configured_collector(runner, shop, tmp_path, monkeypatch, how):
    pipeline = progress_steps.write_pipeline(tmp_path, items=2)
    with Collector() as collector:
        args = ["run", str(shop), "--pipeline", str(pipeline), "--workspace", str(tmp_path / "ws"), "--quiet"]
        if how == "--otel":
            args += ["--otel", collector.url]
        else:
            monkeypatch.setenv(how, collector.url)
        result = runner.invoke(cli, args, obj={"plugins": (progress_steps.plugin(),)})
        assert result.exit_code == 0, result.output
    assert set(collector.paths) == {"/v1/traces"}
    names = sorted(s.name for s in collector.spans)
    # the run, 1 + 2 + 2 items, 2 + 6 model calls
    assert names.count("step numbers") == 1 and names.count("step cheap") == 2 and names.count("step dear") == 2
    assert names.count("chat mock/schema") == 8 and sum(n.startswith("invoke_workflow") for n in names) == 1


def test_a_collector_that_is_down_costs_one_warning_and_at_most_its_timeout(runner, shop, tmp_path, monkeypatch):
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "0.5")  # the standard variable, in seconds
    pipeline = progress_steps.write_pipeline(tmp_path, items=2)
    started = time.monotonic()
    result = runner.invoke(cli, ["run", str(shop), "--pipeline", str(pipeline), "--workspace", str(tmp_path / "ws"),
                                 "--quiet", "--otel", f"http://127.0.0.1:{port}"],
                           obj={"plugins": (progress_steps.plugin(),)})
    assert result.exit_code == 0, result.output
    assert time.monotonic() - started < 10
    [warning] = result.stderr.splitlines()
    # the run, 1 + 2 + 2 items, 2 + 6 model calls: none could leave, said once, with the exporter's reason
    assert warning.startswith(f"warning: traces: 14 span(s) could not be sent to http://127.0.0.1:{port}/v1/traces (")
    assert "export" in warning


def test_otel_refuses_what_is_not_an_http_url(runner, shop, tmp_path):
    result = runner.invoke(cli, ["run", str(shop), "--otel", "localhost:4318", "--workspace", str(tmp_path)])
    assert result.exit_code == 2
    assert result.stderr.strip() == ("error: --otel localhost:4318: expected the collector's OTLP/HTTP base "
                                     "URL, e.g. http://localhost:4318")


def test_nothing_is_traced_or_imported_when_no_endpoint_is_configured(shop, tmp_path):
    """A whole run through the CLI, with every installed plugin (the traces one too)."""
    pipeline = progress_steps.write_pipeline(tmp_path, items=2)
    code = ("import sys; from tests import progress_steps; import intellagent.cli as c\n"
            f"sys.argv = ['intellagent', 'run', {str(shop)!r}, '--pipeline', {str(pipeline)!r}, "
            f"'--workspace', {str(tmp_path / 'ws')!r}, '--quiet']\n"
            "try:\n    c.cli(obj={'plugins': (progress_steps.plugin(),)})\n"
            "except SystemExit as e:\n    assert e.code == 0, e.code\n"
            "print(sorted({m.split('.')[0] + '.' + m.split('.')[1] for m in sys.modules "
            "if m.startswith(('opentelemetry.', 'litellm'))} | {m for m in sys.modules if m == 'litellm'}))")
    env = {k: v for k, v in os.environ.items() if k not in OTEL_VARIABLES}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=REPO, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == "[]"
