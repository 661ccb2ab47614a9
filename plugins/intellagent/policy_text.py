"""What the policy extractor keeps of a model's list: statements that are rules, each once.

Models extracting policies from a prompt list the same rule in several flows (reworded, or with
and without its section's label) and take non-rules for rules: section headings ("P6 Changing a
reservation:") and the agent's description of itself ("I am Pip, a homework helper"). Here a
heading or self-description is recognised by its form, and two rules are one when their
normalised texts are at least ``similarity`` alike (rapidfuzz's ratio, which minds the order of
the words: "hints, not answers" is not "answers, not hints") and agree on every number and
negation.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

from rapidfuzz import fuzz

from intellagent_plugins.intellagent.artefacts import Policy

LABEL = re.compile(r"^\s*(?:#+\s*|[-*•]\s*|(?:p|rule|policy|section|§)?\s*\d+(?:\.\d+)*[.):]?\s+)", re.I)
"""A leading list marker, markdown heading mark or section number ("P6 ", "3.2 ", "- ")."""
SECTION = re.compile(r"^\s*(?:#+|(?:p|rule|policy|section|§)\s*\d+(?:\.\d+)*[.):]?)\s+", re.I)
"""A section's own label ("P6 ", "Section 3 ", "## "): a list item's "1." or "-" is not one."""
HEAD = re.compile(r"^(?P<head>[^.:!?]{1,60}):\s*(?P<body>\S.*)$", re.S)
"""A label before a colon ("Changing a reservation: the user may ..."), then the rule."""
SELF = re.compile(r"^\s*(?:i am|i'm|my name is|this (?:agent|assistant|bot) is|"
                  r"you are (?:[A-Z][\w-]*,|an? [\w -]{0,40}(?:assistant|agent|helper|bot)\b))", re.I)
NORMATIVE = re.compile(r"\b(?:must|should|shall|never|always|only|do not|don't|cannot|can't|may not|"
                       r"need to|required?|forbidden|refuse|ask|verify|confirm|check)\b", re.I)
NEGATIONS = {"not", "no", "never", "nor", "none", "cannot", "cant", "dont", "doesnt", "wont",
             "without", "unless", "except", "only", "neither"}
OPPOSITE_PREFIXES = ("un", "non", "dis", "in", "im", "ir", "il")
STOPWORDS = {"a", "an", "the", "to", "of", "and", "or", "for", "is", "are", "be", "that", "this",
             "it", "its", "their", "they", "them", "in", "on", "at", "by", "with", "as", "any",
             "all", "must", "should", "shall", "will", "please", "agent", "assistant", "you", "your"}


def not_a_rule(text: str) -> str | None:
    """Why ``text`` is not a rule (a heading, the agent describing itself, empty), or None."""
    stripped = text.strip()
    if not stripped:
        return "empty"
    if stripped.endswith(":") or re.match(r"^#+\s", stripped):
        return "a heading"
    unlabelled = SECTION.sub("", stripped, count=1)
    if unlabelled != stripped and len(unlabelled.split()) <= 6 and not re.search(r"[.!?]$", unlabelled) \
            and not NORMATIVE.search(unlabelled):
        return "a heading"  # "P6 Changing a reservation"
    if SELF.match(stripped) and not NORMATIVE.search(stripped):
        return "the agent describing itself"
    return None


def normalise(text: str) -> list[str]:
    """The words that carry a rule's meaning: lower case, no label, marker or punctuation, no
    article or filler word."""
    text = unicodedata.normalize("NFKC", text).replace("’", "'").strip()
    text = LABEL.sub("", text, count=1)
    head = HEAD.match(text)
    if head and len(head.group("head").split()) <= 6:
        text = head.group("body")
    words = re.findall(r"[a-z0-9]+(?:'[a-z]+)?", text.lower())
    return [w.replace("'", "") for w in words if w not in STOPWORDS]


def _compatible(a: list[str], b: list[str]) -> bool:
    """Two rules differing by a number (or a word holding one: an id), a negation or a word and
    its opposite (used/unused) are different rules, however alike their texts."""
    sa, sb = set(a), set(b)
    if {w for w in sa if any(c.isdigit() for c in w)} != {w for w in sb if any(c.isdigit() for c in w)}:
        return False
    if sa & NEGATIONS != sb & NEGATIONS:
        return False
    only_a, only_b = sa - sb, sb - sa
    return not any(x == p + y or y == p + x for x in only_a for y in only_b for p in OPPOSITE_PREFIXES)


def alike(a: list[str], b: list[str], similarity: float) -> bool:
    if a == b:
        return True
    return _compatible(a, b) and fuzz.ratio(" ".join(a), " ".join(b)) >= 100 * similarity


@dataclass
class Kept:
    """The outcome of cleaning a list of policies: what is left, and what happened."""

    policies: list[Policy]
    merged: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)

    def notes(self) -> list[str]:
        notes = []
        if self.merged:
            notes.append(f"merged near-duplicate policies: {'; '.join(self.merged)}")
        if self.dropped:
            notes.append(f"dropped {len(self.dropped)} statement(s) that are not rules: "
                         f"{'; '.join(self.dropped)}")
        return notes


def clean(policies: list[Policy], *, similarity: float, drop_non_rules: bool = True) -> Kept:
    """``policies`` without non-rules and with near-duplicates merged into their most complete
    wording (the longest text, the highest challenge, every flow each came from), numbered
    again P1, P2, … in the order they first appeared."""
    kept = Kept(policies=[])
    groups: list[tuple[list[str], list[Policy]]] = []
    for policy in policies:
        why = not_a_rule(policy.text) if drop_non_rules else None
        if why is not None:
            kept.dropped.append(f"{_quote(policy.text)} ({why})")
            continue
        words = normalise(policy.text) or [policy.text.strip().lower()]
        for group_words, members in groups:
            if alike(words, group_words, similarity):
                members.append(policy)
                break
        else:
            groups.append((words, [policy]))
    for words, members in groups:
        best = max(members, key=lambda p: len(p.text.strip()))
        flows = list(dict.fromkeys(f for p in members for f in (p.flows or [p.flow])))
        merged = best.model_copy(update={"id": f"P{len(kept.policies) + 1}", "flow": flows[0],
                                         "flows": flows, "challenge": max(p.challenge for p in members)})
        kept.policies.append(merged)
        if len(members) > 1:
            kept.merged.append(f"{merged.id} {_quote(best.text)} stands for "
                               + ", ".join(_quote(p.text) for p in members if p is not best)
                               + f" (flows: {', '.join(flows)})")
    return kept


def _quote(text: str, width: int = 80) -> str:
    text = " ".join(text.split())
    return f"'{text if len(text) <= width else text[:width - 1] + '…'}'"
