"""How reports show APIGen-MT's artefacts: a blueprint with every round (problems, committee
votes and reasons, the diff patch), and a recombination pair."""

from __future__ import annotations

import html
import json
from typing import Any

from intellagent_plugins.apigen_mt.artefacts import METRICS, Blueprint, BlueprintResult, Pair


def _e(text: object) -> str:
    return html.escape(str(text))


def blueprint_html(b: Blueprint) -> str:
    actions = "".join(f"<li><code>{_e(a.name)}({_e(json.dumps(a.arguments, ensure_ascii=False))})</code></li>"
                      for a in b.actions)
    parts = [f"<p><b>Instruction.</b> {_e(b.instruction)}</p>",
             f"<p><b>User.</b> {_e(b.user_id)}" + (f" · <b>persona</b> {_e(b.persona)}" if b.persona else "") + "</p>",
             f"<ol start=0>{actions}</ol>",
             f"<p><b>Outputs.</b> {_e(', '.join(b.outputs) or '(none)')}</p>"]
    if b.thought:
        parts.append(f"<p><i>{_e(b.thought)}</i></p>")
    return "\n".join(parts)


class BlueprintView:
    artefact = BlueprintResult

    @staticmethod
    def html(result: BlueprintResult, item: Any = None) -> str:
        head = f"<p><b>{_e(result.status)}</b> after {len(result.attempts)} version(s)"
        if result.parts:
            head += f" · joins {_e(', '.join(result.parts))}"
        parts = [head + "</p>"]
        if result.error:
            parts.append(f"<p class=other>{_e(result.error)}</p>")
        for attempt in result.attempts:
            verdict = "accepted" if not attempt.problems else f"rejected at {attempt.stage}"
            body = [blueprint_html(attempt.blueprint)]
            if attempt.reviews:
                rows = "".join(
                    f"<tr><td>{m}</td><td>{attempt.votes.get(m, '')}</td>"
                    + "".join(f"<td>{getattr(r, m).score} {_e(getattr(r, m).reason)}</td>" for r in attempt.reviews)
                    + "</tr>" for m in METRICS)
                body.append("<table><tr><th>metric</th><th>majority</th>"
                            + "".join(f"<th>member {i + 1}</th>" for i in range(len(attempt.reviews)))
                            + f"</tr>{rows}</table>")
            if attempt.feedback:
                body.append(f"<pre>{_e(attempt.feedback)}</pre>")
            if attempt.diff:
                body.append(f"<details><summary>diff patch</summary><pre>{_e(attempt.diff[:6000])}</pre></details>")
            parts.append(f"<details{' open' if attempt is result.attempts[-1] else ''}><summary>version "
                         f"{attempt.round}: {_e(verdict)}</summary>{''.join(body)}</details>")
        return "\n".join(parts)


class PairView:
    artefact = Pair

    @staticmethod
    def html(pair: Pair, item: Any = None) -> str:
        return (f"<p><b>{_e(pair.user_id)}</b>: {_e(pair.first.id)} + {_e(pair.second.id)}</p>"
                + "".join(f"<p>{_e(r.blueprint.instruction)}</p>" for r in (pair.first, pair.second) if r.blueprint))
