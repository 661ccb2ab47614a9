"""``intellagent tooltalk export``: a run's generated conversations as ToolTalk's JSON files, one
per conversation, for ``--pipeline tooltalk --folder DIR`` or ToolTalk's own scripts."""

from __future__ import annotations

import json
from pathlib import Path

import click

from intellagent.errors import IntellagentError
from intellagent_plugins.tooltalk.artefacts import Conversation


@click.group("tooltalk")
def tooltalk_group() -> None:
    """ToolTalk's conversations."""


@tooltalk_group.command("export")
@click.argument("run", default="latest")
@click.option("--workspace", type=click.Path(path_type=Path), default=Path("workspace"), show_default=True)
@click.option("--out", type=click.Path(path_type=Path), required=True, help="Folder to write into.")
@click.pass_obj
def export(obj, run: str, workspace: Path, out: Path) -> None:
    """Write RUN's conversations (those made without a problem) as ToolTalk JSON files."""
    from intellagent.report import load_run
    from intellagent.store import open_existing

    store = open_existing(workspace)  # only read: a workspace the user may not write serves it
    plan, _, data = load_run(store, store.resolve_run(run), obj.registry)
    steps = [name for name, s in plan.steps.items()
             if s.output.base is Conversation and not s.output.many and s.each]
    if not steps:
        raise IntellagentError("this run made no conversations (no step writes one per item)", item=run)
    out.mkdir(parents=True, exist_ok=True)
    written = skipped = 0
    for item in data.items(steps[-1], payload=True):
        if item.status != "ok":
            skipped += 1
            continue
        conversation: Conversation = data.decode(steps[-1], item.payload)
        path = out / f"{conversation.name}.json"
        path.write_text(json.dumps(conversation.reference_json(), indent=2, ensure_ascii=False) + "\n",
                        encoding="utf-8")
        written += 1
    click.echo(f"wrote {written} conversation(s) to {out}" + (f"; {skipped} not made (see the report)" if skipped else ""))
