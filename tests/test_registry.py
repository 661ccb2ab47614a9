"""The plugin registry: entry points, namespaced names, duplicates, misspelled hooks."""

from __future__ import annotations

import inspect
import types

import pytest

from intellagent import hookimpl, hookspecs
from intellagent.errors import RegistryError
from intellagent.registry import KINDS, load_registry


def make_plugin(name: str, **hooks) -> types.ModuleType:
    module = types.ModuleType(name)
    for hook_name, fn in hooks.items():
        fn.__name__ = hook_name
        setattr(module, hook_name, hookimpl(fn))
    return module


def test_builtins_come_through_entry_points():
    registry = load_registry()
    assert {"intellagent/airline", "intellagent/retail", "intellagent/education"} <= set(
        registry.names("environment"))
    providers = {c.provider.distribution for c in registry.components["environment"].values()}
    assert "intellagent" in providers
    assert registry.resolve("environment", "airline").name == "intellagent/airline"
    assert registry.resolve("env-template", "environment").name == "intellagent/environment"


def test_short_names_resolve_in_own_namespace_then_uniquely(tmp_path):
    plugin = make_plugin("acme", register_environments=lambda register: (
        register("retail", tmp_path), register("garage", tmp_path)))
    registry = load_registry(entry_points=False, plugins=[plugin])
    assert registry.resolve("environment", "acme/retail").name == "acme/retail"
    assert registry.resolve("environment", "garage").name == "acme/garage"
    with pytest.raises(RegistryError, match="no environment named 'boat'"):
        registry.resolve("environment", "boat")
    other = make_plugin("zeta", register_environments=lambda register: register("garage", tmp_path))
    both = load_registry(entry_points=False, plugins=[plugin, other])
    with pytest.raises(RegistryError, match="ambiguous: acme/garage, zeta/garage"):
        both.resolve("environment", "garage")


def test_duplicate_names_are_an_error_naming_both_providers(tmp_path):
    one = make_plugin("acme", register_environments=lambda register: register("shop", tmp_path))
    two = make_plugin("acme_fork", register_environments=lambda register: register("acme/shop", tmp_path))
    with pytest.raises(RegistryError, match="registered twice: by acme and by acme_fork"):
        load_registry(entry_points=False, plugins=[one, two])


def test_misspelled_hook_implementation_fails():
    bad = make_plugin("typo", register_enviroments=lambda register: None)
    with pytest.raises(RegistryError, match="register_enviroments"):
        load_registry(entry_points=False, plugins=[bad])


def test_plugins_report_hooks_and_names(tmp_path):
    plugin = make_plugin("acme", register_environments=lambda register: register("shop", tmp_path))
    registry = load_registry(entry_points=False, plugins=[plugin])
    [info] = registry.plugins()
    assert info.hooks == ["register_environments"]
    assert info.registered == ["environment acme/shop"]


def test_every_registration_hook_reaches_its_kind(tmp_path):
    class FakeStage:
        kind, name = "sampler", "coin-flip"

    class FakeReporter:
        name = "pdf"

    import click

    plugin = make_plugin(
        "acme",
        register_environments=lambda register: register("e", tmp_path),
        register_stages=lambda register: register(FakeStage),
        register_agents=lambda register: register("echo", object),
        register_llm_providers=lambda register: register("fake", object),
        register_executors=lambda register: register("serial", object),
        register_env_templates=lambda register: register("t", tmp_path),
        register_commands=lambda register: register(click.Command("hello")),
        register_pipelines=lambda register: register("flow", tmp_path / "flow.yaml"),
        register_metrics=lambda register: register("score-sum", object),
        register_views=lambda register: register("card", object),
        register_reporters=lambda register: register(FakeReporter),
        register_mutants=lambda register: register("slow", object),
    )
    registry = load_registry(entry_points=False, plugins=[plugin])
    expected = {"environment": "acme/e", "stage": "acme/coin-flip", "agent": "acme/echo",
                "llm-provider": "acme/fake", "executor": "acme/serial", "env-template": "acme/t",
                "command": "acme/hello", "pipeline": "acme/flow", "metric": "acme/score-sum",
                "view": "acme/card", "reporter": "acme/pdf", "mutant": "acme/slow"}
    assert set(expected) == set(KINDS)
    for kind, name in expected.items():
        assert registry.names(kind) == [name]
    assert registry.components["stage"]["acme/coin-flip"].extra["stage_kind"] == "sampler"


def test_invalid_component_names_are_refused(tmp_path):
    plugin = make_plugin("acme", register_environments=lambda register: register("Bad Name", tmp_path))
    with pytest.raises(RegistryError, match="not a valid name"):
        load_registry(entry_points=False, plugins=[plugin])


def test_every_hook_is_documented():
    hooks = [(n, f) for n, f in inspect.getmembers(hookspecs, inspect.isfunction)
             if hasattr(f, "intellagent_spec")]
    assert len(hooks) >= 16
    for name, fn in hooks:
        doc = inspect.getdoc(fn) or ""
        assert len(doc) > 60, f"hook {name} needs a docstring saying its arguments and contract"
        for param in inspect.signature(fn).parameters:
            assert f"``{param}``" in doc, f"hook {name}: document its argument ``{param}``"
        assert "implementation" in doc, f"hook {name}: say which implementations are called"
