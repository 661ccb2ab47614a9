"""A step's prompt files: the user's folder replaces a template by name, and the text read is
what the step's cache key holds."""

from __future__ import annotations

import os

import jinja2
import pytest
from jinja2 import UndefinedError
from pydantic import BaseModel, ValidationError

from intellagent.prompts import BoundedSandbox, PromptFiles, PromptsFolder


def test_a_users_file_replaces_the_builtin_one_of_that_name_and_changes_the_fingerprint(tmp_path):
    builtin, mine = tmp_path / "builtin", tmp_path / "mine"
    builtin.mkdir(), mine.mkdir()
    (builtin / "ask.md").write_text("Ask about {{ topic }}.\n")
    (builtin / "system.md").write_text("Be brief.")
    shipped = PromptFiles(builtin, ["ask.md", "system.md"])
    assert shipped.render("ask.md", topic="refunds") == "Ask about refunds."
    (mine / "ask.md").write_text("Question on {{ topic }}, please.")
    edited = PromptFiles(builtin, ["ask.md", "system.md"], str(mine))
    assert edited.render("ask.md", topic="refunds") == "Question on refunds, please."
    assert edited.render("system.md") == "Be brief."  # not replaced: the shipped one
    before, after = shipped.fingerprint(), edited.fingerprint()
    assert before["system.md"] == after["system.md"] and before["ask.md"] != after["ask.md"]
    with pytest.raises(UndefinedError):
        shipped.render("ask.md")  # a missing value is an error, never a blank in a prompt
    with pytest.raises(KeyError, match="not among this step's prompt files"):
        shipped.render("other.md")


def test_a_prompts_option_must_name_a_folder(tmp_path):
    class Options(BaseModel):
        prompts: PromptsFolder = None

    assert Options(prompts=str(tmp_path)).prompts == str(tmp_path)
    with pytest.raises(ValidationError, match="prompts folder .* not found"):
        Options(prompts=str(tmp_path / "nope"))


def test_a_template_a_prompt_includes_is_in_the_fingerprint(tmp_path):
    """An edited partial changes what the step renders, so its items are made again (the
    fingerprint held the named templates alone); a prompt including nothing keeps its key."""
    builtin, mine = tmp_path / "builtin", tmp_path / "mine"
    builtin.mkdir(), mine.mkdir()
    (builtin / "ask.md").write_text("Ask about {{ topic }}.")
    assert set(PromptFiles(builtin, ["ask.md"], str(mine)).fingerprint()) == {"ask.md"}
    (mine / "ask.md").write_text('{% include "tone.md" %} Ask about {{ topic }}.')
    (mine / "tone.md").write_text("Politely.")
    files = PromptFiles(builtin, ["ask.md"], str(mine))
    polite = files.render("ask.md", topic="x"), files.fingerprint()
    (mine / "tone.md").write_text("Rudely.")
    rude = files.render("ask.md", topic="x"), files.fingerprint()
    assert polite[0] != rude[0] and polite[1] != rude[1]


def test_a_template_with_no_values_is_filled_once_and_again_when_its_file_changes(tmp_path, monkeypatch):
    folder = tmp_path / "p"
    folder.mkdir()
    (folder / "system.md").write_text("You judge {{ 'dialogs' | upper }}.\n")
    files = PromptFiles(folder, ["system.md"])
    renders = []
    real = jinja2.Template.render
    monkeypatch.setattr(jinja2.Template, "render", lambda self, *a, **k: (  # (the sandbox's renders only)
        isinstance(self.environment, BoundedSandbox) and renders.append(k)) or real(self, *a, **k))
    assert files.render("system.md") == files.render("system.md") == "You judge DIALOGS."
    assert PromptFiles(folder, ["system.md"]).render("system.md") == "You judge DIALOGS."
    assert len(renders) == 1  # the same template's text, whoever asks
    (folder / "system.md").write_text("You judge {{ 'events' | upper }}.\n")
    later = os.stat(folder / "system.md").st_mtime + 5  # (a file system's coarse clock)
    os.utime(folder / "system.md", (later, later))
    assert files.render("system.md") == "You judge EVENTS."
    assert len(renders) == 2
