"""The labelling page (``intellagent label RUN``): one static HTML file showing each item's
dialog (through the registered views, as the report does, the judging steps' output left out)
with a question per judgement: the item's own outcome, and each thing judged one by one (a
score that declares a subject: a rule under test). The judge's answer stays hidden until the
person has answered; a button downloads the answers as a labels CSV for ``intellagent
calibrate``. Answers are kept in the browser's local storage until downloaded. No asset is
loaded from anywhere."""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from typing import Any, Iterator

from intellagent.calibration import (MAX_LABELLER_NAME, UNDECIDED, UNLOOKED, outcome_statuses, says_violated,
                                     why_unjudged)
from intellagent.results import RunData, RunItem, finals

MAX_ITEMS = 5000  # items one page may hold

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:1000px;color:#1d232a;padding:0 1rem}
.item{border:1px solid #ccc;border-radius:6px;margin:1.2rem 0;padding:.6rem 1rem}
.turn{margin:.3rem 0;padding:.3rem .5rem;border-radius:4px}.user{background:#eef4ff}
.assistant{background:#f3f4f6}.critic{background:#fff7e6}.tool{font-family:monospace;font-size:12px;
white-space:pre-wrap;color:#444}.thought{color:#666;font-style:italic}.muted{color:#666}
pre,code{font-family:monospace;font-size:12px;white-space:pre-wrap}
.question{background:#fafafa;border-left:3px solid #3b82f6;margin:.5rem 0;padding:.4rem .6rem}
.judge{margin-top:.3rem;color:#444}.agree{color:#17803d}.disagree{color:#b42318}
#bar{position:sticky;top:0;background:#fff;padding:.5rem 0;border-bottom:1px solid #ddd}
"""

SCRIPT = """
const RUN = document.body.dataset.run, KEY = 'intellagent-labels-' + RUN;
const subjects = JSON.parse(document.body.dataset.subjects);
let answers = JSON.parse(localStorage.getItem(KEY) || '{}');
function reveal(q) {
  const said = answers[q.dataset.id];
  const judge = q.querySelector('.judge');
  if (said === undefined) { judge.hidden = true; return; }
  judge.hidden = false;
  const agrees = (q.dataset.judge === 'true') === said;
  judge.querySelector('.answer').className = 'answer ' + (agrees ? 'agree' : 'disagree');
  q.querySelectorAll('input').forEach(i => { i.checked = (i.value === String(said)); });
}
function count() {
  const total = document.querySelectorAll('.question').length;
  document.getElementById('answered').textContent = Object.keys(answers).length + ' of ' + total + ' answered';
}
function field(text) { return /[",\\n]/.test(text) ? '"' + text.replace(/"/g, '""') + '"' : text; }
const who = document.getElementById('labeller'), NAME = KEY + '-labeller';
who.value = localStorage.getItem(NAME) || '';
who.addEventListener('input', () => { localStorage.setItem(NAME, who.value); document.getElementById('need-name').hidden = true; });
function labeller() { return who.value.trim().split(/\\s+/).join(' '); }
function csv() {
  const lines = [['item', ...subjects, 'violated', 'run', 'labeller'].join(',')];
  document.querySelectorAll('.question').forEach(q => {
    const said = answers[q.dataset.id];
    if (said === undefined) return;
    const row = [q.dataset.item, ...subjects.map(s => s === q.dataset.subject ? q.dataset.value : ''), String(said), RUN, labeller()];
    lines.push(row.map(field).join(','));
  });
  return lines.join('\\n') + '\\n';
}
document.querySelectorAll('.question').forEach(q => {
  q.querySelectorAll('input').forEach(input => input.addEventListener('change', () => {
    answers[q.dataset.id] = input.value === 'true';
    localStorage.setItem(KEY, JSON.stringify(answers));
    reveal(q); count();
  }));
  reveal(q);
});
document.getElementById('download').addEventListener('click', () => {
  if (!labeller()) { document.getElementById('need-name').hidden = false; who.focus(); return; }
  const link = document.createElement('a');
  link.href = URL.createObjectURL(new Blob([csv()], {type: 'text/csv'}));
  link.download = 'labels-' + RUN + '-' + labeller().replace(/[^A-Za-z0-9._-]+/g, '_') + '.csv';
  document.body.appendChild(link); link.click(); link.remove();
});
document.getElementById('forget').addEventListener('click', () => {
  if (!confirm('Forget every answer on this page?')) return;
  answers = {}; localStorage.removeItem(KEY);
  document.querySelectorAll('.question').forEach(q => { q.querySelectorAll('input').forEach(i => i.checked = false); reveal(q); });
  count();
});
count();
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _view(data: RunData, item: RunItem, views: list[Any]) -> str:
    """The item's value through the view of its type (or of its nearest base type)."""
    if not item.payload or item.payload == "null":
        return ""
    value = data.decode(item.step, item.payload)
    by_type = {}
    for view in views:
        by_type.setdefault(view.artefact, view)
    view = next((by_type[t] for t in type(value).__mro__ if t in by_type), None)
    if view is not None:
        return view.html(value, item)
    return f"<pre>{_e(json.dumps(json.loads(item.payload), indent=1, ensure_ascii=False)[:4000])}</pre>"


def _groups(data: RunData, keys: set[str]) -> Iterator[list[RunItem]]:
    """Every step's entry of the items ``keys``, item by item in the run's order."""
    group: list[RunItem] = []
    for item in data.items(payload=True):
        if item.item not in keys:
            continue
        if group and group[0].item != item.item:
            yield group
            group = []
        group.append(item)
    if group:
        yield group


@dataclass
class Question:
    """One judgement the page asks about: the item's own outcome (``subject`` None) or one thing
    judged within it."""

    item: str
    subject: tuple[str, str] | None
    text: str
    judge: bool
    reason: str

    @property
    def qid(self) -> str:
        return f"{self.item}|" + (f"{self.subject[0]}|{self.subject[1]}" if self.subject else "")


@dataclass
class LeftOut:
    """The judgements a page leaves out for one reason."""

    items: int = 0  # items left with no judgement to ask about (their own outcome left out)
    rows: int = 0  # judgements of the items on the page
    statuses: set[str] = field(default_factory=set)


#: How the page says each reason calibrate counts no answer on a judgement.
SAID = {UNLOOKED: ("no judge looked at", "the dialog broke before a judge could see it"),
        UNDECIDED: ("the judge could not decide", "its judging did not finish")}


@dataclass
class LabelPage:
    """A labelling page and what it leaves out: judgements calibrate counts no answer on (no
    judge looked: the simulated user broke the dialog; or the judge could not decide: its call
    failed), by reason; an item left with none is not shown."""

    html: str
    items: int = 0  # items on the page
    left_out_by: dict[str, LeftOut] = field(default_factory=dict)

    def left_out(self) -> str:
        """What was left out and why, in words ("" when nothing was)."""
        parts = []
        for why, (what, because) in SAID.items():
            if (found := self.left_out_by.get(why)) is None:
                continue
            counts = [f"{found.items} item(s)" if found.items else "",
                      f"{found.rows} question(s) of other items" if found.rows else ""]
            parts.append(f"{', and '.join(c for c in counts if c)}, {what} "
                         f"({', '.join(sorted(found.statuses))}: {because})")
        return f"left out: {'; '.join(parts)}; calibrate would count no answer on them" if parts else ""


def _question(q: Question) -> str:
    """A question, the judge's answer hidden until answered."""
    name, value = q.subject or ("", "")
    shown = "violated" if q.judge else "not violated"
    return (f"<div class=question data-id='{_e(q.qid)}' data-item='{_e(q.item)}' data-subject='{_e(name)}' "
            f"data-value='{_e(value)}' data-judge='{str(q.judge).lower()}'>"
            f"<b>{q.text}</b> <label><input type=radio name='{_e(q.qid)}' value=true> yes, violated</label> "
            f"<label><input type=radio name='{_e(q.qid)}' value=false> no</label>"
            f"<div class=judge hidden>The judge: <b class=answer>{_e(shown)}</b> "
            f"<span class=muted>{_e(q.reason[:600])}</span></div></div>")


def _questions(data: RunData, outcome: dict[str, RunItem]) \
        -> tuple[dict[str, list[Question]], dict[str, list[tuple[str, str]]]]:
    """The questions of each item of ``outcome`` (in the run's order) calibrate would count an
    answer on, and per item each judgement left out: why (UNLOOKED, UNDECIDED) and its status."""
    plan = data.plan
    declared = plan.declared_scores()
    asked: dict[str, list[Question]] = {}
    dropped: dict[str, list[tuple[str, str]]] = {key: [] for key in outcome}
    for key, final in outcome.items():
        statuses = outcome_statuses(plan, final)
        if why := why_unjudged(statuses, final.status):
            dropped[key].append((why, final.status))
            asked[key] = []
        else:
            asked[key] = [Question(key, None, "Did the agent get this item wrong?",
                                   says_violated(statuses, final.status), f"{final.status}: {final.note}")]
    for it in data.items(scored=True):
        if it.item not in asked:
            continue
        for score in it.scores:
            spec = declared.get(score.name)
            if spec is None or not spec.subject or spec.subject not in score.labels:
                continue
            if why := why_unjudged(spec.statuses, score.status):
                dropped[it.item].append((why, score.status))
                continue
            value = str(score.labels[spec.subject])
            others = ", ".join(f"{k}: {v}" for k, v in score.labels.items() if k != spec.subject)
            text = f"{_e(spec.subject)} {_e(value)}" + (f" <span class=muted>({_e(others)})</span>" if others else "") \
                + ": violated?"
            asked[it.item].append(Question(it.item, (spec.subject, value), text,
                                           says_violated(spec.statuses, score.status), f"{score.status}: {score.note}"))
    return asked, dropped


def label_page(data: RunData, views: list[Any], *, limit: int = 100) -> LabelPage:
    """The labelling page of the run's first ``limit`` items with a judgement to label: an item
    that never reached a judging step (an invalid scenario) has none, nor has one whose every
    judgement calibrate would count no answer on (no judge looked: the simulated user broke the
    dialog; the judge could not decide: its call failed); such judgements within an item shown
    are left out too, and counted."""
    plan = data.plan
    subjects = sorted({spec.subject for spec in plan.declared_scores().values() if spec.subject})
    every = finals(data)
    outcome = {key: final for key, final in every.items() if outcome_statuses(plan, final) is not None}
    unreached = len(every) - len(outcome)
    asked, dropped = _questions(data, outcome)
    labelled = [key for key, questions in asked.items() if questions]
    keys = labelled[:limit]
    found = LabelPage(html="", items=len(keys))
    for key, judgements in dropped.items():
        # an item left with nothing to ask is counted once, by why its own outcome (the first) was
        for why, status in judgements if asked[key] else judgements[:1]:
            left = found.left_out_by.setdefault(why, LeftOut())
            left.statuses.add(status)
            if asked[key]:
                left.rows += 1
            else:
                left.items += 1
    hidden = {name for name, step in plan.steps.items() if step.kind == "critic"}
    counts = [f"{len(keys)} of {len(labelled)} items with a judgement to label"]
    if unreached:
        counts.append(f"{unreached} never reached a judging step")
    if found.left_out():
        counts.append(found.left_out())
    parts = [f"<!doctype html><html lang=en><head><meta charset=utf-8><title>Label run {_e(data.run_id)}"
             f"</title><style>{CSS}</style></head><body data-run='{_e(data.run_id)}' "
             f"data-subjects='{_e(json.dumps(subjects))}'>",
             f"<h1>Label run {_e(data.run_id)}</h1><p>For each dialog, answer every question as you "
             "read it: did the agent get it wrong? The judge's answer shows once you have answered. "
             "Give your name, download your answers and give them to <code>intellagent calibrate "
             "--labels FILE</code> (the file names this run and you; several people's files: "
             "<code>--labels</code> again for each).</p>",
             f"<div id=bar><label>Your name <input id=labeller maxlength={MAX_LABELLER_NAME} "
             "autocomplete=name required></label> <button id=download>Download labels (CSV)</button> "
             "<span id=need-name class=disagree hidden>your name first: it tells your labels from "
             "other people's</span> "
             f"<button id=forget>Forget my answers</button> <span id=answered></span> "
             f"<span class=muted id=counts>({_e('; '.join(counts))})</span></div>"]
    for group in _groups(data, set(keys)):
        key = group[0].item
        parts.append(f"<section class=item id='item-{_e(key)}'><h2>{_e(key)}</h2>")
        parts += [_view(data, it, views) for it in group if it.step not in hidden]
        parts += [_question(q) for q in asked[key]]
        parts.append("</section>")
    parts.append(f"<script>{SCRIPT}</script></body></html>\n")
    found.html = "\n".join(parts)
    return found
