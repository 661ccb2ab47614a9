"""The CLI reference, written at build time from the commands' own click help (an mkdocs hook),
so the page cannot drift from the code: ``<!-- cli-reference -->`` in ``cli.md`` becomes one
section per command, plugin commands included, each with its ``--help`` as the terminal prints it."""

from __future__ import annotations

import click

MARKER = "<!-- cli-reference -->"
WIDTH = 100  # the help's line width on the page, fixed so the page does not depend on the terminal


def commands(root: click.Group | None = None) -> list[tuple[str, click.Command, click.Context]]:
    """Every command of ``intellagent`` (groups before their subcommands), with the context its
    help is rendered in: ``[("intellagent", cli, ctx), ("intellagent run", run, ctx), ...]``."""
    from intellagent.cli import Context, cli

    root = root or cli
    top = click.Context(root, info_name="intellagent", obj=Context(), terminal_width=WIDTH,
                        max_content_width=WIDTH)
    found = []

    def walk(command: click.Command, ctx: click.Context) -> None:
        found.append((ctx.command_path, command, ctx))
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                if sub is not None and not sub.hidden:
                    walk(sub, click.Context(sub, info_name=name, parent=ctx))

    walk(root, top)
    return found


def reference() -> str:
    """The reference as Markdown: a section per command holding its whole help."""
    parts = []
    for path, command, ctx in commands():
        level = "##" if path.count(" ") <= 1 else "###"  # a group's subcommands one level down
        parts.append(f"{level} `{path}`\n\n```text\n{command.get_help(ctx)}\n```\n")
    return "\n".join(parts)


def on_page_markdown(markdown: str, page, config, files) -> str:
    """mkdocs: fill the marker of the page that holds it."""
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, reference())
