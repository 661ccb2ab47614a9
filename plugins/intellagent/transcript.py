"""A dialog as text for the models that judge it: turns, tool calls with their results, and the
database changes."""

from __future__ import annotations

import json

from intellagent.conversation import Dialog


def transcript(dialog: Dialog, limit: int) -> str:
    lines = []
    for t in dialog.turns:
        if t.role == "user":
            lines.append(f"USER: {t.content}")
        elif t.role == "assistant":
            for c in t.tool_calls:
                lines.append(f"AGENT calls {c.name}({c.arguments}) → {c.output[:400]}")
            lines.append(f"AGENT: {t.content}")
        elif t.role == "critic":
            lines.append(f"(reviewer: {t.content})")
    text = "\n".join(lines)
    if dialog.db_diff and dialog.db_diff.get("tables"):
        text += "\n\nDATABASE CHANGES:\n" + json.dumps(dialog.db_diff)[:3000]
    return text[-limit:]
