"""The spans of one run, made with a tracer provider of the run's own (never the global one, so
no library's spans mix in and tests stay apart).

Span names and attributes follow the OpenTelemetry GenAI semantic conventions (as of
opentelemetry-semantic-conventions 0.66b2; their names kept here as strings, not imported from
its ``_incubating`` module): the run is ``invoke_workflow PIPELINE``, each step item
``step STEP``, each model call ``chat MODEL`` (``gen_ai.request.model``, ``gen_ai.usage.*``; its
cost in ``intellagent.cost.usd``: the conventions have no cost attribute yet), each turn of the
agent under test ``invoke_agent AGENT`` and each tool call ``execute_tool TOOL``. Events come as
things end, with when they started and how long they took: their spans are made afterwards with
those times, under their item's span.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any, Sequence

from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (BatchSpanProcessor, SimpleSpanProcessor, SpanExporter,
                                            SpanExportResult)
from opentelemetry.trace import SpanKind, Status, StatusCode

from intellagent import __version__

OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
AGENT_NAME = "gen_ai.agent.name"
CONVERSATION = "gen_ai.conversation.id"
WORKFLOW = "gen_ai.workflow.name"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
ERROR_TYPE = "error.type"
COST = "intellagent.cost.usd"

UNFINISHED = ("infra-error", "invalid-output", "budget-exhausted")  # an item that could not finish
EXPORT_TIMEOUT = 5.0  # seconds an export may take with its retries (unless OTEL_EXPORTER_OTLP_TIMEOUT says)
EXPORTER_LOGGER = "opentelemetry.exporter.otlp.proto.http"


def _ns(seconds: float) -> int:
    return int(seconds * 1e9)


def resource() -> Resource:
    """The service: ``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES`` when set, else
    ``intellagent``."""
    found = Resource.create({SERVICE_VERSION: __version__})
    if str(found.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        found = found.merge(Resource({SERVICE_NAME: "intellagent"}))
    return found


class Delivery(SpanExporter):
    """``exporter``, reporting its failures once when the run ends instead of a log line per
    retry, and giving up after the first batch it could not send (a collector that is down would
    otherwise hold the end of the run for every batch left)."""

    def __init__(self, exporter: Any, where: str) -> None:
        self.exporter = exporter
        self.where = where
        self.sent = self.lost = 0
        self.reason = ""
        self._log = _FirstMessage()
        logger = logging.getLogger(EXPORTER_LOGGER)
        logger.addHandler(self._log)
        logger.propagate = False  # what it says is summed up by ``report``

    def export(self, spans: Sequence[Any]) -> SpanExportResult:
        if not self.lost:
            self._log.first = ""
            result = self.exporter.export(spans)
            if result is SpanExportResult.SUCCESS:
                self.sent += len(spans)
                return result
            self.reason = self._log.first
        self.lost += len(spans)
        return SpanExportResult.FAILURE

    def shutdown(self) -> None:
        self.exporter.shutdown()
        logger = logging.getLogger(EXPORTER_LOGGER)
        logger.removeHandler(self._log)
        if not logger.handlers:  # no run of ours is exporting
            logger.propagate = True

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.exporter.force_flush(timeout_millis)

    def report(self) -> None:
        if self.lost:
            print(f"warning: traces: {self.lost} span(s) could not be sent to {self.where}"
                  + (f" ({self.reason})" if self.reason else ""), file=sys.stderr)


class _FirstMessage(logging.Handler):
    """Keeps the first thing a logger said since ``first`` was emptied (the exporter's reason
    for a failure, before it says it gave up)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.first = ""

    def emit(self, record: logging.LogRecord) -> None:
        if not self.first:
            self.first = record.getMessage().splitlines()[0][:300]


class RunTrace:
    """The spans of run ``run``, sent to ``exporter`` (in batches from a thread when ``batch``,
    else as each span ends); ``where`` names it in a warning."""

    def __init__(self, run: Any, exporter: Any, *, batch: bool, where: str = "the exporter") -> None:
        self.run = run
        self.provider = TracerProvider(resource=resource())
        self.delivery = Delivery(exporter, where)
        self.provider.add_span_processor(BatchSpanProcessor(self.delivery) if batch
                                         else SimpleSpanProcessor(self.delivery))
        self.tracer = self.provider.get_tracer("intellagent", __version__)
        plan = run.plan
        self.agent = plan.agent.name if getattr(plan, "agent", None) is not None else None
        self.span = self.tracer.start_span(
            f"invoke_workflow {plan.name}", kind=SpanKind.INTERNAL,
            attributes={OPERATION: "invoke_workflow", WORKFLOW: plan.name,
                        "intellagent.run.id": run.run_id, "intellagent.environment": run.env.name,
                        "intellagent.seed": run.seed})
        self.context = trace.set_span_in_context(self.span)
        self.items: dict[tuple[str, str], Any] = {}  # (step, item) → its open span

    # -- items ---------------------------------------------------------------------------------

    def item_started(self, step: Any, item: str) -> None:
        self.items[(step.name, item)] = self.tracer.start_span(
            f"step {step.name}", context=self.context, kind=SpanKind.INTERNAL,
            attributes={"intellagent.step": step.name, "intellagent.step.plugin": step.use,
                        "intellagent.step.kind": step.kind, "intellagent.item": item})

    def item_done(self, step: Any, item: str, status: str, made: bool) -> None:
        span = self.items.pop((step.name, item), None)
        if span is None:
            return
        span.set_attributes({"intellagent.status": status, "intellagent.reused": not made})
        if status in UNFINISHED:
            span.set_status(Status(StatusCode.ERROR, status))
            span.set_attribute(ERROR_TYPE, status)
        span.end()

    def _within(self, step: Any, item: str | None) -> Any:
        """The context of ``item``'s span (the run's for a call outside any item)."""
        span = self.items.get((step.name, item)) if step is not None and item is not None else None
        return trace.set_span_in_context(span) if span is not None else self.context

    def _conversation(self, step: Any, item: str) -> str:
        return f"{self.run.run_id}/{step.name}/{item}"

    # -- inside an item ------------------------------------------------------------------------

    def model_call(self, step: Any, item: str | None, call: Any) -> None:
        settings = self.run.llm.settings_for(call.role)
        provider = settings.provider_name
        span = self.tracer.start_span(
            f"chat {call.model}", context=self._within(step, item), kind=SpanKind.CLIENT,
            start_time=_ns(call.started),
            attributes={OPERATION: "chat", PROVIDER: provider, REQUEST_MODEL: call.model,
                        INPUT_TOKENS: call.prompt_tokens, OUTPUT_TOKENS: call.completion_tokens,
                        COST: call.cost_usd, "intellagent.role": call.role,
                        "intellagent.structured": call.kind == "structured",
                        "intellagent.cached": call.cached, "intellagent.attempts": call.attempts,
                        "intellagent.outcome": call.outcome})
        if call.outcome != "ok":
            span.set_status(Status(StatusCode.ERROR, call.error or call.outcome))
            span.set_attribute(ERROR_TYPE, call.outcome)
        span.end(end_time=_ns(call.started + call.seconds))

    def agent_turn(self, step: Any, item: str, turn: Any) -> None:
        attributes = {OPERATION: "invoke_agent", CONVERSATION: self._conversation(step, item),
                      "intellagent.tool_calls": turn.tool_calls}
        if self.agent:
            attributes[AGENT_NAME] = self.agent
        span = self.tracer.start_span(f"invoke_agent {self.agent or 'agent'}", context=self._within(step, item),
                                      kind=SpanKind.INTERNAL, start_time=_ns(turn.started),
                                      attributes=attributes)
        if turn.error:
            span.set_status(Status(StatusCode.ERROR, turn.error))
            span.set_attribute(ERROR_TYPE, "agent-error")
        span.end(end_time=_ns(turn.started + turn.seconds))

    def tool_call(self, step: Any, item: str, call: Any) -> None:
        attributes = {OPERATION: "execute_tool", TOOL_NAME: call.name, TOOL_TYPE: "function",
                      CONVERSATION: self._conversation(step, item)}
        if call.call_id:
            attributes[TOOL_CALL_ID] = call.call_id
        span = self.tracer.start_span(f"execute_tool {call.name}", context=self._within(step, item),
                                      kind=SpanKind.INTERNAL, start_time=_ns(call.started),
                                      attributes=attributes)
        if call.error:
            span.set_status(Status(StatusCode.ERROR, "the tool raised"))
            span.set_attribute(ERROR_TYPE, "tool-error")
        span.end(end_time=_ns(call.started + call.seconds))

    # -- the end -------------------------------------------------------------------------------

    def end(self, *, status: str = "done", error: BaseException | None = None) -> None:
        """End the run's span (and any item's left open by an error), send what is left and
        shut the provider down (at most one export's timeout: ``Delivery`` gives up after a
        failure)."""
        now = time.time_ns()
        for span in self.items.values():
            span.set_status(Status(StatusCode.ERROR, "the run stopped"))
            span.end(end_time=now)
        self.items.clear()
        self.span.set_attribute("intellagent.status", "failed" if error is not None else status)
        if error is not None:  # its type and message, not its traceback
            self.span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
            self.span.set_attribute(ERROR_TYPE, type(error).__name__)
        self.span.end(end_time=now)
        self.provider.shutdown()
        self.delivery.report()
