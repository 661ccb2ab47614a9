"""Reading what a request says: the agent's prompt as sections of rules, the policies a prompt
lists, the records a simulated user was given, and a judged transcript as a list of events."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

MARKERS = ("\n\nTask:", "\n\nFlow:", "\n\nPolicy under study", "\n\nPolicy A", "\n\nPolicies to test",
           "\n\nThe scenario the user", "\n\nLet ")


def between(text: str, start: str, ends: tuple[str, ...] = MARKERS) -> str:
    """The text after ``start`` up to the first of ``ends`` (empty when ``start`` is absent)."""
    at = text.find(start)
    if at < 0:
        return ""
    rest = text[at + len(start):]
    cut = min([i for i in (rest.find(e) for e in ends) if i >= 0], default=len(rest))
    return rest[:cut].strip()


@dataclass
class Section:
    heading: str
    rules: list[str] = field(default_factory=list)


def plain(text: str) -> str:
    """Markdown emphasis and code marks removed, whitespace collapsed."""
    return " ".join(re.sub(r"(\*\*|\*|`)(.+?)\1", r"\2", text).split())


def _table(rows: list[str], lead: str) -> str:
    """A markdown table as sentences: "regular: 0 in basic economy, 1 in economy, ..."."""
    cells = [[plain(c) for c in row.strip().strip("|").split("|")] for row in rows
             if not re.match(r"^\s*\|?\s*:?-{2,}", row)]
    if len(cells) < 2:
        return lead
    head, body = cells[0], cells[1:]
    rows = "; ".join(f"{row[0]}: " + ", ".join(f"{value} in {name}" for name, value in zip(head[1:], row[1:]))
                     for row in body)
    return f"{lead.rstrip(':')} by {head[0]}, {rows}."


def sections(prompt: str) -> tuple[str, list[Section]]:
    """The prompt's opening paragraph and its ``##`` sections, each with its rules (bullets, a
    table folded into the bullet that introduces it, indented lines joined to their bullet)."""
    intro: list[str] = []
    found: list[Section] = []
    bullet: list[str] | None = None
    table: list[str] = []

    def close() -> None:
        nonlocal bullet, table
        if bullet is not None and found:
            text = " ".join(bullet)
            if table:
                head, _, tail = text.partition(":")
                text = _table(table, head + ":") + (" " + tail.strip() if tail.strip() else "")
            found[-1].rules.append(plain(text))
        bullet, table = None, []

    for line in prompt.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            close()
            if stripped.startswith("## "):
                found.append(Section(plain(stripped.lstrip("#").strip())))
        elif re.match(r"^[-*•]\s+", stripped) and not line.startswith("    "):
            close()
            bullet = [re.sub(r"^[-*•]\s+", "", stripped)]
        elif stripped.startswith("|") and bullet is not None:
            table.append(stripped)
        elif stripped and bullet is not None:
            bullet.append(stripped)
        elif stripped and not found:
            intro.append(stripped)
    close()
    return plain(" ".join(intro)), [s for s in found if s.rules]


POLICY_LINE = re.compile(r"^(?:- )?(?P<id>[A-Za-z][\w-]*)(?: \[(?P<category>[^\]]+), challenge "
                         r"(?P<challenge>\d+)\])?: (?P<text>.+?)(?: → expected: (?P<expected>.*))?$",
                         re.M)


@dataclass
class Listed:
    """A policy as a prompt lists it."""

    id: str
    text: str
    challenge: int = 0
    expected: str = ""


def listed_policies(text: str, ids: list[str] | None = None, any_id: bool = False) -> list[Listed]:
    """The policies a prompt lists ("P3 [category, challenge 4]: text" or "- P3: text → expected:
    ..."), only those of ``ids`` when given."""
    out = []
    for m in POLICY_LINE.finditer(text):
        if ids is not None and m.group("id") not in ids:
            continue
        if ids is None and not any_id and not re.match(r"^P\d+$", m.group("id")):
            continue
        out.append(Listed(m.group("id"), m.group("text").strip(), int(m.group("challenge") or 0),
                          (m.group("expected") or "").strip()))
    return out


def records(text: str) -> dict[str, Any]:
    """The records a simulated user was given ("Records involved:" and a JSON object)."""
    raw = between(text, "Records involved:", ("\n\nPolicies under test", "\n\nSteer", "\nPolicies"))
    try:
        value = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


# -- transcripts ---------------------------------------------------------------------------------

@dataclass
class Call:
    name: str
    arguments: dict[str, Any]
    output: Any  # the decoded result, or the error text
    error: bool
    at: int  # position among the transcript's events


@dataclass
class Said:
    who: str  # user, agent, reviewer
    text: str
    at: int


@dataclass
class Transcript:
    """A dialog as a judge reads it: what each side said and every tool call, in order."""

    events: list[Call | Said] = field(default_factory=list)
    changes: dict[str, Any] = field(default_factory=dict)

    @property
    def calls(self) -> list[Call]:
        return [e for e in self.events if isinstance(e, Call)]

    def said(self, who: str) -> list[Said]:
        return [e for e in self.events if isinstance(e, Said) and e.who == who]

    def before(self, at: int, who: str) -> list[Said]:
        return [e for e in self.said(who) if e.at < at]

    def calls_of(self, *names: str) -> list[Call]:
        return [c for c in self.calls if c.name in names and not c.error]

    def last_output(self, name: str, **match: Any) -> Any:
        """The last successful result of tool ``name`` whose arguments include ``match``."""
        for c in reversed(self.calls_of(name)):
            if all(c.arguments.get(k) == v for k, v in match.items()) and isinstance(c.output, (dict, list)):
                return c.output
        return None


CALL = re.compile(r"^AGENT calls (?P<name>[\w.-]+)\((?P<args>.*?)\) → (?P<out>.*)$", re.S)


def _decode(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def transcript(text: str) -> Transcript:
    """``text`` as written by the dialogue kit's ``transcript`` (USER:, AGENT calls ... → ...,
    AGENT:, reviewer lines, then the database changes)."""
    body, _, changes = text.partition("\n\nDATABASE CHANGES")
    out = Transcript()
    if changes.startswith(" (before → after):"):
        decoded = _decode(changes.split(":", 1)[1].strip())
        out.changes = decoded if isinstance(decoded, dict) else {}
    entries: list[str] = []
    for line in body.splitlines():
        if line.startswith(("USER: ", "AGENT: ", "AGENT calls ", "(reviewer to the user: ")) or not entries:
            entries.append(line)
        else:
            entries[-1] += "\n" + line
    for i, entry in enumerate(entries):
        if entry.startswith("USER: "):
            out.events.append(Said("user", entry[6:].replace("  [ending message, not sent to the agent]", ""), i))
        elif entry.startswith("AGENT: "):
            out.events.append(Said("agent", entry[7:], i))
        elif entry.startswith("(reviewer"):
            out.events.append(Said("reviewer", entry, i))
        elif (m := CALL.match(entry)) is not None:
            args = _decode(m.group("args"))
            output = m.group("out")
            out.events.append(Call(m.group("name"), args if isinstance(args, dict) else {},
                                   _decode(output), output.startswith("Error"), i))
    return out
