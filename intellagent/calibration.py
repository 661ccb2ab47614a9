"""Judges against people: how often a run's judgements agree with people's reading of the same
dialogs (``intellagent calibrate RUN --labels FILE``).

A labels file (CSV or JSONL) has one row per judgement a person made: ``item`` (an item of the
run, ``E0004``), ``violated`` (true or false) and, for a judgement of one thing within the item,
a column named as the label that score declares as its subject (``policy: P3``); that column
left empty means the item's own outcome; ``run``, where given (the labelling page writes it),
is the run the dialogs were read in, and no other run is calibrated with them (its item ids
are the same, its dialogs are not); a judgement labelled twice by one labeller is refused, as
it would count double. The judge's side of a row: a status its step or score
declares as failed is "violated"; passed and other statuses are not; an item or score that could
not finish, or an item that never reached a judging step (a critic), is left out (listed as not
judged); so is a status its step declares ``unjudged`` (no judge looked: the simulated user
broke the dialog), named with its status: read as "not violated" it would count people's
"violated" as the judge's miss, and their "not violated" as agreement, on a dialog no judge saw.

Several labellers (files given together, or a ``labeller`` column; a file without one is one
person, named by its stem): the judge is compared with people's majority per judgement (an even
split left out, as ``ties``), and people with one another over the judgements all of them
labelled (Cohen's kappa for two, Fleiss' kappa for more).

Per group (the matched score's ``--by`` label, a rule's category; item outcomes in a group of
their own) and overall: agreement with its 95 % Wilson interval, Cohen's kappa with the 95 %
interval from its large-sample standard error (Fleiss, Cohen & Everitt 1969; rows taken as
independent), and the confusion counts. Per thing judged (each subject value, the items' own
outcomes) and overall: the judge's precision and recall on "violated" with their Wilson
intervals and the items where only one side says violated, the least reliable thing first.
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from pydantic import BaseModel, Field, model_serializer

from intellagent.errors import IntellagentError, listed
from intellagent.metrics import Z95, Rate, wilson
from intellagent.results import finals
from intellagent.yamlio import _read_text, json_lines

MAX_LABEL_BYTES = 50_000_000  # a labels file larger than this is refused
MAX_LABELS = 200_000  # rows of one labels file, and of all the files given at once
MAX_LABEL_FILES = 20  # --labels given at most this often
MAX_LABELLERS = 100  # people in one calibration
MAX_LABELLER_NAME = 100  # characters of a labeller's name
ITEM_GROUP = "(item outcome)"
IGNORED = ("note", "comment", "labeller")  # columns people add that say nothing to compare
INTERVALS = ("agreement: 95 % Wilson score interval; Cohen's kappa: 95 % normal interval from its "
             "large-sample standard error (Fleiss, Cohen & Everitt 1969), rows taken as independent")
MIN_RANKED = 5  # a precision or recall resting on fewer judgements ranks nothing
DEFINITIONS = ("precision: of the judge's 'violated', the share people say too; recall: of people's "
               "'violated', the share the judge says too; each with its 95 % Wilson interval; a false "
               "alarm: the judge alone says violated; a miss: people alone do; least reliable first, "
               f"by the lower of precision and recall among those resting on {MIN_RANKED} judgements or more")
TRUE, FALSE = ("true", "yes", "1", "t", "y"), ("false", "no", "0", "f", "n")


@dataclass
class Label:
    """One judgement a person made, and where the file says it."""

    line: int
    item: str
    subject: tuple[str, str] | None  # (label, value): the thing judged within the item
    violated: bool
    run: str = ""  # the run it was labelled on, when the file says
    labeller: str = ""  # who: the file's labeller column, else the file's stem
    path: Path | None = None  # the file it is in

    @property
    def judgement(self) -> tuple[str, tuple[str, str] | None]:
        return self.item, self.subject


class Confusion(BaseModel):
    both: int = Field(default=0, description="The judge and people say violated.")
    judge_only: int = Field(default=0, description="The judge says violated, people do not.")
    people_only: int = Field(default=0, description="People say violated, the judge does not.")
    neither: int = Field(default=0, description="Neither says violated.")

    @property
    def n(self) -> int:
        return self.both + self.judge_only + self.people_only + self.neither


class Agreement(BaseModel):
    n: int = 0
    agreement: float | None = None
    agreement_low: float | None = None
    agreement_high: float | None = None
    kappa: float | None = Field(default=None, description="Cohen's kappa (None when chance "
                                "agreement is total: both always say the same one thing).")
    kappa_low: float | None = Field(default=None, description="None with a kappa: its interval is "
                                    "undefined (see kappa_note).")
    kappa_high: float | None = None
    kappa_note: str = Field(default="", description="Why kappa has no interval, when it has none.")
    confusion: Confusion = Field(default_factory=Confusion)

    @classmethod
    def of(cls, confusion: Confusion) -> "Agreement":
        n = confusion.n
        if n == 0:
            return cls(confusion=confusion)
        agreed = confusion.both + confusion.neither
        low, high = wilson(agreed, n)
        kappa, se = kappa_and_error(confusion)
        out = cls(n=n, agreement=round(agreed / n, 4), agreement_low=round(low, 4),
                  agreement_high=round(high, 4), confusion=confusion)
        if kappa is not None:
            out.kappa = round(kappa, 4) + 0.0  # + 0.0: no -0.0
            constant = [who for who, said in (("the judge", confusion.both + confusion.judge_only),
                                              ("people", confusion.both + confusion.people_only))
                        if said in (0, n)]
            if constant:  # its large-sample standard error is 0 there: no interval, not a point
                out.kappa_note = f"interval undefined: {' and '.join(constant)} gave one answer throughout"
            elif se == 0:
                out.kappa_note = "interval undefined: a zero standard error"
            else:
                out.kappa_low = round(max(-1.0, kappa - Z95 * se), 4) + 0.0
                out.kappa_high = round(min(1.0, kappa + Z95 * se), 4) + 0.0
        return out

    def kappa_interval(self) -> str:
        """κ's interval as shown: [low, high], or why there is none."""
        if self.kappa_low is None or self.kappa_high is None:
            return f"({self.kappa_note or 'interval undefined'})"
        return f"[{self.kappa_low:.2f}, {self.kappa_high:.2f}]"

    def text(self) -> str:
        if not self.n:
            return "nothing compared"
        kappa = "κ –" if self.kappa is None else f"κ {self.kappa:.2f} {self.kappa_interval()}"
        return (f"agreement {self.agreement:.0%} ({self.agreement_low:.0%}–{self.agreement_high:.0%}), "
                f"{kappa}, n={self.n}")


def kappa_and_error(c: Confusion) -> tuple[float | None, float]:
    """Cohen's kappa of a 2×2 table and its large-sample standard error (Fleiss, Cohen &
    Everitt 1969); (None, 0) when chance agreement is 1."""
    n = c.n
    # p[i][j]: the judge says i, people say j (0: violated, 1: not)
    p = [[c.both / n, c.judge_only / n], [c.people_only / n, c.neither / n]]
    rows = [p[0][0] + p[0][1], p[1][0] + p[1][1]]
    cols = [p[0][0] + p[1][0], p[0][1] + p[1][1]]
    observed = p[0][0] + p[1][1]
    chance = rows[0] * cols[0] + rows[1] * cols[1]
    if chance >= 1.0:
        return None, 0.0
    kappa = (observed - chance) / (1 - chance)
    a = sum(p[i][i] * (1 - (rows[i] + cols[i]) * (1 - kappa)) ** 2 for i in (0, 1))
    b = (1 - kappa) ** 2 * sum(p[i][j] * (cols[i] + rows[j]) ** 2 for i in (0, 1) for j in (0, 1) if i != j)
    c2 = (kappa - chance * (1 - kappa)) ** 2
    variance = max(0.0, a + b - c2) / (n * (1 - chance) ** 2)
    return kappa, math.sqrt(variance)


def fleiss_kappa(counts: list[list[int]]) -> float | None:
    """Fleiss' kappa (Fleiss 1971): ``counts[i][j]``, how many raters put subject i in category
    j, every subject rated by as many; None when chance agreement is total (every rating in one
    category)."""
    raters = sum(counts[0])
    if raters < 2 or any(sum(row) != raters for row in counts):
        raise ValueError("every subject needs the same number of raters, two or more")
    n = len(counts)
    shares = [sum(row[j] for row in counts) / (n * raters) for j in range(len(counts[0]))]
    observed = sum((sum(c * c for c in row) - raters) / (raters * (raters - 1)) for row in counts) / n
    chance = sum(p * p for p in shares)
    if chance >= 1.0:
        return None
    return (observed - chance) / (1 - chance)


class PeopleAgreement(BaseModel):
    """How the labellers agree among themselves, over the judgements every one of them labelled
    (those compared with the judge, a tie among people included)."""

    labellers: list[str] = Field(default_factory=list)
    n: int = Field(default=0, description="Judgements every labeller labelled.")
    statistic: str = Field(default="", description="Cohen's kappa (two labellers) or Fleiss' kappa "
                           "(three or more).")
    kappa: float | None = Field(default=None, description="None when chance agreement is total (every "
                                "answer the same) or nothing was labelled by all.")
    kappa_low: float | None = Field(default=None, description="Cohen's kappa's 95 % interval (as the "
                                    "judge's); Fleiss' kappa has none here.")
    kappa_high: float | None = None
    kappa_note: str = ""
    agreement: float | None = Field(default=None, description="The share of pairs of answers that agree "
                                    "(two labellers: of the judgements).")

    @classmethod
    def of(cls, labellers: list[str], answers: list[list[bool]]) -> "PeopleAgreement":
        """``answers``: per judgement, each labeller's violated, in ``labellers``' order."""
        two = len(labellers) == 2
        out = cls(labellers=labellers, n=len(answers), statistic="Cohen's kappa" if two else "Fleiss' kappa")
        if not answers:
            return out
        if two:
            c = Confusion()
            for a, b in answers:
                field = ("both" if b else "judge_only") if a else ("people_only" if b else "neither")
                setattr(c, field, getattr(c, field) + 1)
            found = Agreement.of(c)
            out.kappa, out.kappa_low, out.kappa_high = found.kappa, found.kappa_low, found.kappa_high
            constant = [name for name, said in zip(labellers, (c.both + c.judge_only, c.both + c.people_only))
                        if said in (0, c.n)]
            out.kappa_note = (f"interval undefined: {' and '.join(constant)} gave one answer throughout"
                              if constant and found.kappa is not None else found.kappa_note)
            out.agreement = found.agreement
            return out
        m = len(labellers)
        counts = [[sum(row), m - sum(row)] for row in answers]
        kappa = fleiss_kappa(counts)
        out.kappa = None if kappa is None else round(kappa, 4) + 0.0
        pairs = sum((c * (c - 1) + (m - c) * (m - c - 1)) / (m * (m - 1)) for c, _ in counts)
        out.agreement = round(pairs / len(counts), 4)
        return out

    def text(self) -> str:
        who = f"{len(self.labellers)} labellers ({listed(self.labellers, 10)})"
        if not self.n:
            return f"people among themselves, {who}: no judgement labelled by every one of them"
        if self.kappa is None:
            kappa = "κ –"
        elif self.kappa_low is not None and self.kappa_high is not None:
            kappa = f"κ {self.kappa:.2f} [{self.kappa_low:.2f}, {self.kappa_high:.2f}]"
        else:
            kappa = f"κ {self.kappa:.2f}" + (f" ({self.kappa_note})" if self.kappa_note else "")
        return (f"people among themselves, {who}: {self.statistic} {kappa}, agreement {self.agreement:.0%}, "
                f"n={self.n} (the judgements every one of them labelled)")


def _natural(text: str) -> list[Any]:
    """Sorts P4 before P21."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


class Reliability(BaseModel):
    """The judge's "violated" against people's on one thing judged (a rule, the items' own
    outcomes) or on all: precision and recall with their 95 % Wilson intervals, and the items
    where only one side says violated, to read."""

    n: int = Field(default=0, description="Judgements compared.")
    confusion: Confusion = Field(default_factory=Confusion)
    precision: float | None = Field(default=None, description="Of the judge's 'violated', the share "
                                    "people say too (None: the judge never said it).")
    precision_low: float | None = None
    precision_high: float | None = None
    precision_n: int = Field(default=0, description="The judge's 'violated': precision's denominator.")
    recall: float | None = Field(default=None, description="Of people's 'violated', the share the judge "
                                 "says too (None: people never said it).")
    recall_low: float | None = None
    recall_high: float | None = None
    recall_n: int = Field(default=0, description="People's 'violated': recall's denominator.")
    false_alarms: list[str] = Field(default_factory=list, description="Where the judge alone says "
                                    "violated (item, or item/subject overall), each once.")
    misses: list[str] = Field(default_factory=list, description="Where people alone say violated.")
    rank: int | None = Field(default=None, description="1: the least reliable thing; None: not ranked "
                             "(unranked says why).")
    unranked: str = ""

    @classmethod
    def of(cls, confusion: Confusion, false_alarms: list[str], misses: list[str]) -> "Reliability":
        precision = Rate.of(confusion.both, confusion.both + confusion.judge_only)
        recall = Rate.of(confusion.both, confusion.both + confusion.people_only)
        return cls(n=confusion.n, confusion=confusion, precision=precision.rate, precision_low=precision.low,
                   precision_high=precision.high, precision_n=precision.n, recall=recall.rate,
                   recall_low=recall.low, recall_high=recall.high, recall_n=recall.n,
                   false_alarms=list(dict.fromkeys(false_alarms)), misses=list(dict.fromkeys(misses)))

    def worst(self) -> tuple[float, float] | None:
        """The lower of precision and recall (with its upper bound) among those resting on
        ``MIN_RANKED`` judgements or more; None when neither does."""
        found = [(rate, high) for rate, high, n in ((self.precision, self.precision_high, self.precision_n),
                                                    (self.recall, self.recall_high, self.recall_n))
                 if rate is not None and high is not None and n >= MIN_RANKED]
        return min(found) if found else None

    def why_unranked(self) -> str:
        if not self.precision_n and not self.recall_n:
            return "neither side says violated"
        return (f"too few labels: 'violated' {self.precision_n}× from the judge, {self.recall_n}× from "
                f"people, {MIN_RANKED} needed")

    def text(self, most: int = 10) -> str:
        def rate(name: str, value: float | None, low: float | None, high: float | None, k: int, n: int) -> str:
            if value is None:
                return f"{name} – (0 of 0)"
            return f"{name} {value:.0%} ({low:.0%}–{high:.0%}, {k} of {n})"

        said = self.confusion.both
        parts = [rate("precision", self.precision, self.precision_low, self.precision_high, said, self.precision_n)
                 + ", " + rate("recall", self.recall, self.recall_low, self.recall_high, said, self.recall_n)
                 + f", n={self.n}"]
        if self.false_alarms:
            parts.append(f"false alarms: {listed(self.false_alarms, most)}")
        if self.misses:
            parts.append(f"misses: {listed(self.misses, most)}")
        return "; ".join(parts)


class PrecisionRecall(BaseModel):
    """The judge's precision and recall on "violated", overall and per thing judged, the least
    reliable first."""

    overall: Reliability = Field(default_factory=Reliability)
    things: dict[str, Reliability] = Field(default_factory=dict, description="Each thing judged (a "
                                           "subject and its value, the items' own outcomes): the ranked "
                                           "ones least reliable first, then the unranked.")
    min_ranked: int = MIN_RANKED
    definitions: str = DEFINITIONS

    @classmethod
    def of(cls, rows: list[tuple[str, str, str, str]]) -> "PrecisionRecall":
        """From (thing, item, item/subject, confusion field) rows."""
        tables: dict[str, Confusion] = {}
        overall = Confusion()
        alarms: dict[str, list[str]] = {"": []}
        misses: dict[str, list[str]] = {"": []}
        for thing, item, where, field in rows:
            for table in (overall, tables.setdefault(thing, Confusion())):
                setattr(table, field, getattr(table, field) + 1)
            for found, key in ((alarms, "judge_only"), (misses, "people_only")):
                if field == key:
                    found.setdefault(thing, []).append(item)
                    found[""].append(where)
        things = {name: Reliability.of(table, alarms.get(name, []), misses.get(name, []))
                  for name, table in tables.items()}
        ranked = sorted((name for name in things if things[name].worst() is not None),
                        key=lambda name: (things[name].worst(), -things[name].n, _natural(name)))
        for rank, name in enumerate(ranked, 1):
            things[name].rank = rank
        # the unranked after: those with too few labels, then those neither side calls violated
        unranked = sorted((name for name in things if things[name].rank is None),
                          key=lambda name: (not (things[name].precision_n or things[name].recall_n), _natural(name)))
        for name in unranked:
            things[name].unranked = things[name].why_unranked()
        return cls(overall=Reliability.of(overall, alarms[""], misses[""]),
                   things={name: things[name] for name in ranked + unranked})

    def lines(self, most: int = 10) -> list[str]:
        """The terminal's lines: overall, the ranked things (the least reliable first), those with
        too few labels to rank, and in one line those neither side calls violated."""
        head = "  the judge's 'violated' against people's, the least reliable first"
        if not self.overall.n:
            return [f"{head}: nothing compared"]
        width = max(len(name) for name in [*self.things, "overall"]) + 4
        out = [f"{head}:", f"    {'overall':<{width}}{self.overall.text(most)}"]
        few = [name for name, r in self.things.items() if r.rank is None and (r.precision_n or r.recall_n)]
        silent = [f"{name} (n={r.n})" for name, r in self.things.items()
                  if r.rank is None and not (r.precision_n or r.recall_n)]
        for name, found in self.things.items():
            if found.rank:
                out.append(f"    {f'{found.rank}. {name}':<{width}}{found.text(most)}")
        if few:
            out.append(f"    not ranked, too few labels (a thing ranks once the judge or people say "
                       f"violated {self.min_ranked} times):")
            out += [f"    {f'– {name}':<{width}}{self.things[name].text(most)}" for name in few]
        if silent:
            out.append(f"    not ranked, neither side says violated: {listed(silent, 3 * most)}")
        out.append(f"    ({self.definitions})")
        return out


class CalibrationReport(BaseModel):
    """How a run's judges agree with people's labels."""

    run_id: str
    labels_file: str = ""
    rows: int = Field(default=0, description="Rows of the labels file.")
    not_judged: list[str] = Field(default_factory=list, description="Rows no judge decided (the item "
                                  "or score did not finish, or the item never reached a judging step): "
                                  "item or item/subject.")
    left_out: list[str] = Field(default_factory=list, description="Rows left out of every figure "
                                "(agreement, kappa, the confusion counts, precision and recall) as no "
                                "judge looked: their status is one its step declares unjudged (the "
                                "simulated user broke the dialog first); item or item/subject, and the "
                                "status.")
    by: str = Field(default="category", description="The score label the groups are made by.")
    overall: Agreement = Field(default_factory=Agreement)
    groups: dict[str, Agreement] = Field(default_factory=dict)
    intervals: str = INTERVALS
    precision_recall: PrecisionRecall = Field(default_factory=PrecisionRecall, description="The "
                                              "judge's precision and recall on 'violated', overall and "
                                              "per thing judged.")
    # several labellers (absent with one: its output is as it was)
    labellers: list[str] = Field(default_factory=list, description="With two labellers or more: who "
                                 "(a file's labeller column, else its name's stem). Every figure above "
                                 "then compares the judge with people's majority per judgement.")
    judgements: int = Field(default=0, description="With several labellers: the judgements labelled "
                            "(each counted once, however many labelled it).")
    ties: list[str] = Field(default_factory=list, description="With several labellers: judgements "
                            "left out of the judge's figures as people split evenly (item or item/subject).")
    people: PeopleAgreement | None = Field(default=None, description="With several labellers: how "
                                           "they agree among themselves.")

    @model_serializer(mode="wrap")
    def _one_labeller_as_ever(self, handler: Any) -> dict[str, Any]:
        out = handler(self)
        if not self.labellers:  # one labeller: its JSON is what it was
            for key in ("labellers", "judgements", "ties", "people"):
                out.pop(key, None)
        return out

    def summary(self) -> str:
        rows = "judgement(s)" if self.labellers else "row(s)"
        skipped = f"; {len(self.not_judged)} {rows} the judge could not decide" if self.not_judged else ""
        if self.left_out:
            skipped += f"; {len(self.left_out)} {rows} left out, as no judge looked"
        if not self.labellers:
            return f"judges against {self.rows} people's label(s): {self.overall.text()}{skipped}"
        if self.ties:
            skipped += f"; {len(self.ties)} tie(s) among people left out"
        return (f"judges against the majority of {len(self.labellers)} labellers ({self.rows} label(s) on "
                f"{self.judgements} judgement(s)): {self.overall.text()}{skipped}")


def _violated(text: Any, where: str) -> bool:
    if isinstance(text, bool):
        return text
    word = str(text).strip().lower()
    if word in TRUE:
        return True
    if word in FALSE:
        return False
    raise IntellagentError(f"{where}: violated must be true or false, not {str(text)!r}")


def _rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line, row) of a CSV or JSONL labels file."""
    size = path.stat().st_size
    if size > MAX_LABEL_BYTES:
        raise IntellagentError(f"labels file of {size} bytes: at most {MAX_LABEL_BYTES}", file=path)
    text = _read_text(path, "labels").removeprefix("\ufeff")  # a spreadsheet's byte-order mark
    if path.suffix.lower() == ".csv":
        reader = csv.DictReader(io.StringIO(text))
        try:
            if not reader.fieldnames:
                raise IntellagentError("the labels file is empty (expected a header: item, violated and a "
                                       "subject column)", file=path, line=1)
            for row in reader:
                yield reader.line_num, {k: v for k, v in row.items() if k is not None}
        except csv.Error as exc:
            raise IntellagentError(f"not CSV: {exc}", file=path, line=reader.line_num) from None
    elif path.suffix.lower() in (".jsonl", ".json"):
        for number, row in json_lines(text, path, error=IntellagentError):
            if not isinstance(row, dict):
                raise IntellagentError("each line is a JSON object {item, violated, subject column}", file=path,
                                       line=number)
            yield number, row
    else:
        raise IntellagentError("labels are CSV (.csv) or JSON lines (.jsonl)", file=path)


Rows = list[tuple[int, dict[str, Any]]]


def label_rows(path: Path) -> Rows:
    """The rows of the labels file ``path``, each with its line: one at least, ``MAX_LABELS`` at
    most."""
    if not path.is_file():
        raise IntellagentError("labels file not found", file=path)
    rows: Rows = []
    for line, row in _rows(path):
        if len(rows) >= MAX_LABELS:
            raise IntellagentError(f"more than {MAX_LABELS} labels", file=path, line=line)
        rows.append((line, row))
    if not rows:  # nothing to compare: the run's stored calibration stays as it is
        raise IntellagentError("no labels in the file (one row per judgement: item, violated and a "
                               "subject column)", file=path)
    return rows


def _run_of(row: dict[str, Any]) -> str:
    return str(row.get("run") or "").strip()


def labelled_run(rows: Rows) -> tuple[str, int] | None:
    """The run the labels say they were made on and the line that says so (the first row
    naming one)."""
    return next(((_run_of(row), line) for line, row in rows if _run_of(row)), None)


def read_labels(path: Path, subjects: set[str], rows: Rows | None = None,
                seen: dict[tuple[str, Any, str], tuple[Path, int]] | None = None) -> list[Label]:
    """The labels in ``path`` (its ``rows``, when read already). ``subjects``: the labels the
    run's scores declare as their subject; a column naming one picks the score of that thing
    within the item. A row's labeller is its ``labeller`` column, else the file's stem; ``seen``:
    the judgements each labeller labelled in the files read before, a second label refused."""
    labels = []
    seen = {} if seen is None else seen  # (item, subject, labeller) → its file and line
    for line, row in label_rows(path) if rows is None else rows:
        item = str(row.get("item") or "").strip()
        if not item:
            raise IntellagentError("no item (columns: item, violated and a subject column)",
                                   file=path, line=line)
        if row.get("violated") in (None, ""):
            raise IntellagentError("no violated (true or false)", file=path, line=line)
        violated = _violated(row["violated"], f"{path}:{line}")
        named = [(k, str(v).strip()) for k, v in row.items()
                 if k not in ("item", "violated", "run", *IGNORED) and v not in (None, "") and str(v).strip()]
        unknown = [k for k, _ in named if k not in subjects]
        if unknown:
            raise IntellagentError(f"column '{unknown[0]}' names nothing the run's judges score one "
                                   f"by one (their subjects: {', '.join(sorted(subjects)) or 'none'}; "
                                   "leave it empty for the item's own outcome)", file=path, line=line)
        if len(named) > 1:
            raise IntellagentError(f"a row judges one thing: {', '.join(k for k, _ in named)} given",
                                   file=path, line=line)
        subject = named[0] if named else None
        column = " ".join(str(row.get("labeller") or "").split())
        if len(column) > MAX_LABELLER_NAME:
            raise IntellagentError(f"a labeller's name of {len(column)} characters: at most {MAX_LABELLER_NAME}",
                                   file=path, line=line)
        labeller = column or path.stem
        first = seen.setdefault((item, subject, labeller), (path, line))
        if first != (path, line):  # counted twice, one judgement would weigh double and narrow the intervals
            what = f"{subject[0]} {subject[1]}" if subject else "its outcome"
            by = f" by labeller '{labeller}'" if column or first[0] != path else ""
            at = f"line {first[1]}" if first[0] == path else f"{first[0]}:{first[1]}"
            raise IntellagentError(f"item '{item}' ({what}) is labelled already{by}, at {at}: one "
                                   "row per judgement (several people: a labeller column)", file=path, line=line)
        labels.append(Label(line=line, item=item, subject=subject, violated=violated, run=_run_of(row),
                            labeller=labeller, path=path))
    return labels


def read_all_labels(files: dict[Path, Rows], subjects: set[str]) -> list[Label]:
    """The labels of every file (``files``: each file's rows): ``MAX_LABELLERS`` people at
    most; a judgement one labeller labelled twice, in one file or two, is refused."""
    seen: dict[tuple[str, Any, str], tuple[Path, int]] = {}
    labels: list[Label] = []
    labellers: set[str] = set()
    for path, rows in files.items():
        for label in read_labels(path, subjects, rows, seen):
            labellers.add(label.labeller)
            if len(labellers) > MAX_LABELLERS:
                raise IntellagentError(f"more than {MAX_LABELLERS} labellers", file=path, line=label.line)
            labels.append(label)
    return labels


def subjects_of(plan: Any) -> dict[str, list[str]]:
    """Subject label → the names of the scores that declare it."""
    out: dict[str, list[str]] = {}
    for name, spec in plan.declared_scores().items():
        if spec.subject:
            out.setdefault(spec.subject, []).append(name)
    return out


def says_violated(statuses: Any, status: str | None) -> bool | None:
    """The judge's side of a label: a failed status (as declared) is violated, a passed or other
    one is not; None when it could not decide (an unfinished or undeclared status)."""
    if statuses is None or status is None:
        return None
    if status in statuses.failed:
        return True
    if status in statuses.passed or status in statuses.other:
        return False
    return None


#: Why a judgement says nothing of the judge: it could not decide (an unfinished status, or one
#: its step or score does not declare), or no judge looked (a status declared unjudged).
UNDECIDED, UNLOOKED = "the judge could not decide", "no judge looked"


def why_unjudged(statuses: Any, status: str | None) -> str | None:
    """Why calibrate counts no answer on the judgement of ``status`` (UNDECIDED or UNLOOKED), or
    None when it counts: one test for calibrate and for the labelling page, which asks nothing
    calibrate would drop."""
    if says_violated(statuses, status) is None:
        return UNDECIDED
    if status in statuses.unjudged:  # not the judge's "not violated": no judge looked
        return UNLOOKED
    return None


def outcome_statuses(plan: Any, final: Any) -> Any:
    """The statuses the item's own outcome was judged by: its last step's, when that step judges
    (a critic); None when the item never reached one (an invalid scenario, a pipeline whose first
    items are made rather than judged): nothing judged it."""
    step = plan.steps[final.step]
    return step.statuses if step.kind == "critic" else None


def _group_value(value: Any) -> str:
    return ", ".join(map(str, value)) if isinstance(value, list) else str(value)


def calibrate(data: Any, labels: list[Label], path: Path | list[Path], by: str = "category") -> CalibrationReport:
    """The agreement between the judgements of run ``data`` and people's ``labels`` (read from
    ``path``, the files errors name where a label does not say). With two labellers or more,
    the judge is compared with people's majority per judgement (a tie left out, and named), and
    the people with one another."""
    paths = path if isinstance(path, list) else [path]
    plan = data.plan
    declared = plan.declared_scores()
    subjects = subjects_of(plan)
    outcome = finals(data)
    wanted = {label.item for label in labels}
    scores: dict[str, list[Any]] = {}
    for item in data.items(scored=True):
        if item.item in wanted:
            scores.setdefault(item.item, []).extend(item.scores)
    used = {name for label in labels if label.subject for name in subjects.get(label.subject[0], [])}
    groupable = sorted({label for name in used for label in declared[name].labels})
    if used and by not in groupable:  # a typo would put every judgement in one group, '(no ...)'
        raise IntellagentError(f"the scores the labels name have no label '{by}' to group by (theirs: "
                               f"{', '.join(groupable) or 'none'})", item="--by")
    labellers = list(dict.fromkeys(label.labeller for label in labels))
    several = len(labellers) > 1
    votes: dict[tuple[str, Any], list[Label]] = {}  # each judgement's labels, in the files' order
    for label in labels:
        votes.setdefault(label.judgement, []).append(label)
    tables: dict[str, Confusion] = {}
    overall = Confusion()
    not_judged = []
    compared: list[tuple[str, str, str, str]] = []  # (thing, item, item/subject, confusion field)
    left_out, ties = [], []
    among: list[list[bool]] = []  # per judgement compared that every labeller labelled: their answers
    for said in votes.values():
        label = said[0]
        for one in said:
            if one.run and one.run != data.run_id:
                raise IntellagentError(f"labelled on run {one.run}, not on run {data.run_id}: its items are "
                                       f"other dialogs (intellagent calibrate {one.run} --labels ...)",
                                       file=one.path or paths[0], line=one.line)
        where_file = label.path or paths[0]
        final = outcome.get(label.item)
        if final is None:
            raise IntellagentError(f"no item '{label.item}' in run {data.run_id}", file=where_file, line=label.line)
        where = label.item + (f"/{label.subject[1]}" if label.subject else "")
        if label.subject is None:
            statuses, status = outcome_statuses(plan, final), final.status
            group = thing = ITEM_GROUP
        else:
            name, value = label.subject
            score = next((s for s in scores.get(label.item, []) if s.name in subjects[name]
                          and _group_value(s.labels.get(name)) == value), None)
            if score is None:
                raise IntellagentError(f"item '{label.item}' has no score for {name} '{value}' in run "
                                       f"{data.run_id}", file=where_file, line=label.line)
            spec = declared.get(score.name)
            statuses, status = (spec.statuses if spec is not None else None), score.status
            group = _group_value(score.labels[by]) if by in score.labels else f"(no {by})"
            thing = f"{name} {value}"
        why = why_unjudged(statuses, status)
        if why == UNDECIDED:
            not_judged.append(where)
            continue
        if why == UNLOOKED:
            left_out.append(f"{where} ({status})")
            continue
        judge = says_violated(statuses, status)
        if several and len(said) == len(labellers):
            by_labeller = {one.labeller: one.violated for one in said}
            among.append([by_labeller[name] for name in labellers])
        yes = sum(one.violated for one in said)
        if 2 * yes == len(said):  # people split evenly: no majority to hold the judge to
            ties.append(where)
            continue
        violated = 2 * yes > len(said)
        field = ("both" if violated else "judge_only") if judge else \
            ("people_only" if violated else "neither")
        for table in (overall, tables.setdefault(group, Confusion())):
            setattr(table, field, getattr(table, field) + 1)
        compared.append((thing, label.item, where, field))
    found = CalibrationReport(run_id=data.run_id, labels_file=", ".join(map(str, paths)), rows=len(labels),
                              not_judged=not_judged, left_out=left_out, by=by, overall=Agreement.of(overall),
                              groups={g: Agreement.of(tables[g]) for g in sorted(tables)},
                              precision_recall=PrecisionRecall.of(compared))
    if several:
        found.labellers, found.judgements, found.ties = labellers, len(votes), ties
        found.people = PeopleAgreement.of(labellers, among)
    return found
