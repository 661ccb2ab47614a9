"""``junit``: report.junit.xml, the results as a CI server shows test results (JUnit XML, valid
against the common ``junit-10.xsd``).

One test case per item of the run's first fan-out (an event, a task, a conversation), with the
status of the last step it reached, read through that step's declared statuses: passed is a
pass; failed a ``<failure>`` carrying the reason and every failing score (the violated policies,
the end state); an unfinished item (an infra error, a budget stop) an ``<error>``; any other
status (not exercised, an invalid scenario) ``<skipped>``. The suite's properties say what was
tested (the agent, the models, the seed) and each gate's verdict.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from intellagent.report import Reporter
from intellagent.steps import UNFINISHED


def _cases(data: Any) -> list[dict[str, Any]]:
    """Each item of the first fan-out: its status at the last step it reached, its note, and
    the scores of all its steps."""
    plan = data.plan
    domains = plan.domains()
    if not domains:
        return []
    steps = [s for s in plan.steps.values() if s.domain == domains[0]]
    cases: dict[str, dict[str, Any]] = {}
    for step in steps:  # execution order: a later step's status overrides
        for item in data.items(step.name):
            case = cases.setdefault(item.item, {"item": item.item, "scores": []})
            case |= {"status": item.status, "note": item.note, "step": step}
            case["scores"] += [(step, s) for s in item.scores]
    return list(cases.values())


def _failing(scores: list[tuple[Any, Any]], declared: dict[str, Any]) -> list[str]:
    out = []
    for _, score in scores:
        spec = declared.get(score.name)
        failed = spec.statuses.failed if spec is not None and spec.statuses is not None else ["fail"]
        if score.status in failed:
            labels = ", ".join(f"{k}={v}" for k, v in score.labels.items()
                               if not isinstance(v, (dict, list)) or isinstance(v, list) and len(v) < 4)
            out.append(f"{score.name} {score.status}" + (f" [{labels}]" if labels else "")
                       + (f": {score.note}" if score.note else ""))
    return out


class JunitReporter(Reporter):
    """report.junit.xml for CI servers (GitHub Actions, GitLab, Jenkins)."""

    name = "junit"
    filename = "report.junit.xml"

    def write(self, report, data, folder, views) -> Path:
        info = report.info
        declared = data.plan.declared_scores()
        suite_name = f"{info.pipeline} on {info.environment}"
        classname = f"{info.pipeline.replace('/', '.')}.{info.environment}"
        suite = ET.Element("testsuite", name=suite_name, timestamp=info.run_id[:15], time="0.000")
        properties = ET.SubElement(suite, "properties")
        facts = {"run": info.run_id, "status": info.status, "seed": str(info.seed),
                 "agent": info.agent or "", "models": json.dumps(info.models)}
        p = info.provenance
        if p is not None and p.agent is not None:
            facts |= {"agent.endpoint": p.agent.endpoint, "agent.identity": p.agent.identity or "black box"}
        for gate in report.gates:  # as the summary and the HTML report say it
            facts[f"gate {gate.gate.text()}"] = gate.outcome(report.finished)
        for name, value in facts.items():
            ET.SubElement(properties, "property", name=name, value=value)
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        for case in _cases(data):
            counts["tests"] += 1
            element = ET.SubElement(suite, "testcase", name=case["item"], classname=classname, time="0")
            statuses = case["step"].statuses
            status, note = case["status"], case["note"] or ""
            if status in statuses.passed:
                continue
            if status in UNFINISHED:
                counts["errors"] += 1
                ET.SubElement(element, "error", message=note[:500] or status, type=status).text = note
            elif status in statuses.failed or status not in statuses.other:
                counts["failures"] += 1
                details = "\n".join([note, *_failing(case["scores"], declared)]).strip()
                ET.SubElement(element, "failure", message=note[:500] or status, type=status).text = details
            else:
                counts["skipped"] += 1
                ET.SubElement(element, "skipped", message=f"{status}: {note}"[:500] if note else status)
        for key, value in counts.items():
            suite.set(key, str(value))
        root = ET.Element("testsuites", name="intellagent", tests=str(counts["tests"]),
                          failures=str(counts["failures"]), errors=str(counts["errors"]), time="0.000")
        root.append(suite)
        ET.indent(root)
        path = folder / self.filename
        ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
        return path
