"""A dialog as text for the models that judge it: every turn, every tool call with its full
result, and the database changes. Over the budget, the middle is cut (the opening request and
the ending are what a judge needs most), and the cut is marked."""

from __future__ import annotations

import json

from intellagent_plugins.dialogue.dialog import Dialog

TOOL_RESULT_CHARS = 20_000  # one result longer than this is pathological; everything else is whole


def transcript(dialog: Dialog, limit: int) -> str:
    lines = []
    for t in dialog.turns:
        if t.role == "user":
            lines.append(f"USER: {t.content}" + ("" if t.delivered else "  [ending message, not sent to the agent]"))
        elif t.role == "assistant":
            for c in t.tool_calls:
                output = c.output if len(c.output) <= TOOL_RESULT_CHARS else \
                    c.output[:TOOL_RESULT_CHARS] + f" […{len(c.output) - TOOL_RESULT_CHARS} characters more]"
                lines.append(f"AGENT calls {c.name}({c.arguments}) → {output}")
            if t.content:
                lines.append(f"AGENT: {t.content}")
        elif t.role == "critic":
            lines.append(f"(reviewer to the user: {t.content})")
    text = "\n".join(lines)
    if dialog.db_diff and dialog.db_diff.get("tables"):
        text += "\n\nDATABASE CHANGES (before → after):\n" + json.dumps(dialog.db_diff["tables"], ensure_ascii=False)
    else:
        text += "\n\nDATABASE CHANGES: none"
    if len(text) <= limit:
        return text
    head = limit // 3
    tail = limit - head
    return text[:head] + f"\n[… {len(text) - limit} characters of the middle cut …]\n" + text[-tail:]
