"""Finding a report's items by what its figures are about. Each value a metric's column links to
the items (``Column.items_by``: a policy, a category, a complexity level) and each final status
gets a short CSS class, put on the rows of the items that carry it. A link to ``#only-CLASS``
shows those rows alone by CSS (``:target``), so it works with scripts off; the search bar (shown
by the page's script) filters by text and by the same classes."""

from __future__ import annotations

from collections import Counter
from typing import Any

from intellagent.report import RunReport
from intellagent_plugins.reporters.html_page import css_status, e

STATUS = "status"


class ItemFilters:
    """The classes of a report: ``label → value → class``, statuses under ``status``."""

    def __init__(self, report: RunReport, finals: Counter) -> None:
        self.classes: dict[str, dict[str, str]] = {STATUS: {st: f"s{i}" for i, st in enumerate(sorted(finals))}}
        self.counts: Counter = Counter()
        made = 0
        for result in report.metrics.values():
            for column in result.columns:
                if not column.items_by or column.items_by == STATUS:
                    continue
                values = self.classes.setdefault(column.items_by, {})
                for row in result.rows:
                    value = row.get(column.key)
                    if value is not None and str(value) not in values:
                        values[str(value)] = f"t{made:x}"
                        made += 1

    def of(self, status: str, scores: list[Any]) -> list[str]:
        """The classes of an item that ended with ``status`` and carries ``scores`` (of all its
        steps), counted."""
        found = {self.classes[STATUS][status]}
        for score in scores:
            for label, value in score.labels.items():
                values = self.classes.get(label)
                if values is None or label == STATUS:
                    continue
                for one in value if isinstance(value, list) else [value]:
                    if str(one) in values:
                        found.add(values[str(one)])
        self.counts.update(found)
        return sorted(found)

    def href(self, label: str, value: Any) -> str | None:
        """The link to the items carrying ``label`` = ``value`` (None when nothing links it)."""
        found = self.classes.get(label, {}).get(str(value))
        return f"#only-{found}" if found else None

    def css(self) -> str:
        """One rule a class: while ``#only-CLASS`` is the target, the other rows are hidden; and
        each status's colour on its rows' status cell."""
        colours = "".join(f"#index .{c}>i" + "{color:var(--" + css_status(status) + ")}"
                          for status, c in self.classes[STATUS].items())
        return colours + "".join(f"#only-{c}:target~* .item:not(.{c})" + "{display:none}"
                                 for values in self.classes.values() for c in values.values())

    def banners(self) -> str:
        """What each link shows, above the list (only the one targeted is visible)."""
        parts = []
        for label, values in self.classes.items():
            for value, c in values.items():
                n = self.counts[c]
                what = f"that ended <b>{e(value)}</b>" if label == STATUS else f"with {e(label)} <b>{e(value)}</b>"
                parts.append(f"<p class=only id=only-{c}>Showing the {n} item{'s' * (n != 1)} {what}. "
                             "<a href=#items>Show all</a></p>")
        return "".join(parts)

    def search_bar(self, total: int) -> str:
        """Text search and one select a label (hidden until the page's script shows it)."""
        selects = []
        for label, values in self.classes.items():
            if not values:
                continue
            options = "".join(f"<option value={c}>{e(value)} ({self.counts[c]})</option>"
                              for value, c in values.items())
            selects.append(f"<select aria-label='{e(label)}'><option value=''>any {e(label)}</option>{options}</select>")
        return (f"<div id=search hidden><input type=search placeholder='Search the {total} items: "
                f"words of their summary' aria-label=search>{''.join(selects)}"
                "<span id=shown class=muted></span></div>")

    def status_links(self, finals: Counter) -> str:
        """Each final status with its count, linked to its items."""
        return ", ".join(f"<a href=#only-{self.classes[STATUS][st]}><b>{n} {e(st)}</b></a>"
                         for st, n in sorted(finals.items(), key=lambda kv: -kv[1]))
