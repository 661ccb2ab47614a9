"""OpenTelemetry traces of a run, as an observer of the run's hooks: a span for the run, for
each step item, and inside an item for each model call, agent turn and tool call, exported over
OTLP/HTTP.

On only when an endpoint is configured: ``intellagent run --otel URL``, or the standard
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_ENDPOINT`` variables (and not
``OTEL_SDK_DISABLED=true`` or ``OTEL_TRACES_EXPORTER=none``). Otherwise it does nothing and
imports nothing: the OpenTelemetry SDK (the ``otel`` extra) is imported by the first run it
traces.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from intellagent import hookimpl

TRACES_PATH = "/v1/traces"


def endpoint(run: Any) -> str | None:
    """The URL spans are posted to, or None when traces are not configured: ``--otel`` (a base
    URL, as ``OTEL_EXPORTER_OTLP_ENDPOINT``), else the standard variables."""
    explicit = getattr(run, "otel", None)
    if explicit:
        return _traces_url(explicit)
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true" or \
            os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return None
    if os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        return os.environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]  # the full URL, used as it is
    if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        return _traces_url(os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"])
    return None


def _traces_url(base: str) -> str:
    base = base.rstrip("/")
    return base if base.endswith(TRACES_PATH) else base + TRACES_PATH


class Traces:
    """The observer. ``exporter``: a span exporter to use instead of OTLP (a test's in-memory
    one), which also turns traces on; without it, runs are traced when an endpoint is
    configured."""

    def __init__(self, exporter: Any = None) -> None:
        self.exporter = exporter
        self.runs: dict[str, Any] = {}  # run id → its RunTrace
        self._warned = False

    @hookimpl
    def before_run(self, run: Any) -> None:
        if self.exporter is not None:
            from intellagent_plugins.traces.spans import RunTrace

            self.runs[run.run_id] = RunTrace(run, self.exporter, batch=False)
            return
        url = endpoint(run)
        if url is None:
            return
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            from intellagent_plugins.traces.spans import RunTrace
        except ImportError:
            if not self._warned:
                self._warned = True
                print(f"warning: traces to {url} need the otel extra (pip install "
                      "'intellagent[otel]'); going on without them", file=sys.stderr)
            return
        from intellagent_plugins.traces.spans import EXPORT_TIMEOUT

        timeout = None if (os.environ.get("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT")
                           or os.environ.get("OTEL_EXPORTER_OTLP_TIMEOUT")) else EXPORT_TIMEOUT
        self.runs[run.run_id] = RunTrace(run, OTLPSpanExporter(endpoint=url, timeout=timeout),
                                         batch=True, where=url)

    @hookimpl
    def before_item(self, run: Any, step: Any, item: str) -> None:
        if (trace := self.runs.get(run.run_id)) is not None:
            trace.item_started(step, item)

    @hookimpl
    def after_item(self, run: Any, step: Any, item: str, status: str, made: bool) -> None:
        if (trace := self.runs.get(run.run_id)) is not None:
            trace.item_done(step, item, status, made)

    @hookimpl
    def after_model_call(self, run: Any, step: Any, item: str | None, call: Any) -> None:
        if (trace := self.runs.get(run.run_id)) is not None:
            trace.model_call(step, item, call)

    @hookimpl
    def after_agent_turn(self, run: Any, step: Any, item: str, turn: Any) -> None:
        if (trace := self.runs.get(run.run_id)) is not None:
            trace.agent_turn(step, item, turn)

    @hookimpl
    def after_tool_call(self, run: Any, step: Any, item: str, call: Any) -> None:
        if (trace := self.runs.get(run.run_id)) is not None:
            trace.tool_call(step, item, call)

    @hookimpl
    def after_run(self, run: Any, report: Any) -> None:
        if (trace := self.runs.pop(run.run_id, None)) is not None:
            trace.end(status=report.info.status if report is not None else "done")

    @hookimpl
    def on_run_error(self, run: Any, error: BaseException) -> None:
        if (trace := self.runs.pop(run.run_id, None)) is not None:
            trace.end(error=error)


traces = Traces()
"""The instance the entry point registers."""
