"""The plugin registry: a pluggy manager plus the named components its plugins registered."""

from __future__ import annotations

import functools
import importlib.metadata as md
import os
import re
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Callable, Iterable

import pluggy

from intellagent import hookspecs
from intellagent.errors import RegistryError

ENTRY_POINT_GROUP = "intellagent"
DEFAULT_NAMESPACE = "intellagent"

#: Registration hook per component kind; each kind has its own name space.
KINDS: dict[str, str] = {
    "environment": "register_environments",
    "stage": "register_stages",
    "agent": "register_agents",
    "mutant": "register_mutants",
    "llm-provider": "register_llm_providers",
    "executor": "register_executors",
    "env-template": "register_env_templates",
    "command": "register_commands",
    "pipeline": "register_pipelines",
    "metric": "register_metrics",
    "view": "register_views",
    "reporter": "register_reporters",
}

_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")


@dataclass(frozen=True)
class Provider:
    """Where a component came from: the plugin and, when installed, its distribution."""

    plugin: str
    distribution: str | None = None
    version: str | None = None

    def __str__(self) -> str:
        if self.distribution:
            return f"{self.distribution} {self.version} ({self.plugin})"
        return self.plugin


@dataclass(frozen=True)
class Component:
    kind: str
    name: str  # always namespaced: "package/name"
    value: Any
    provider: Provider
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def short_name(self) -> str:
        return self.name.split("/", 1)[1]

    @property
    def display_name(self) -> str:
        """The name to show: short in the default name space, whole elsewhere."""
        return self.short_name if self.name.startswith(DEFAULT_NAMESPACE + "/") else self.name


@dataclass
class PluginInfo:
    name: str
    provider: Provider
    hooks: list[str]
    registered: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class BrokenPlugin:
    """An installed plugin that failed to import: every command goes on without it."""

    name: str
    distribution: str
    version: str
    value: str
    error: str

    def line(self) -> str:
        return (f"plugin '{self.name}' ({self.value}) of {self.distribution} {self.version} failed "
                f"to import: {self.error}")


DISABLE_VARIABLE = "INTELLAGENT_DISABLE_PLUGINS"


class PluginManager(pluggy.PluginManager):
    """pluggy's manager, remembering the distribution behind each entry-point plugin, the ones
    that failed to import, and the ones disabled."""

    def __init__(self) -> None:
        super().__init__(ENTRY_POINT_GROUP)
        self.distributions: dict[int, tuple[str, str]] = {}
        self.broken: list[BrokenPlugin] = []
        self.disabled: list[str] = []


def disabled_plugins(extra: Iterable[str] = ()) -> set[str]:
    """Plugin names to skip: ``INTELLAGENT_DISABLE_PLUGINS=a,b`` and ``--disable-plugin``; a name
    is an entry point's (``tooltalk``), a distribution's (``acme-envs``) or both
    (``acme-envs:retail``)."""
    names = {n.strip() for n in os.environ.get(DISABLE_VARIABLE, "").split(",") if n.strip()}
    return names | {n.strip() for n in extra if n.strip()}


def get_plugin_manager(*, entry_points: bool = True, plugins: Iterable[Any] = (),
                       disable: Iterable[str] = ()) -> PluginManager:
    """A fresh plugin manager: the hook specs, installed plugins (entry points, but those named in
    ``disable`` or ``INTELLAGENT_DISABLE_PLUGINS``; one that fails to import is recorded as
    broken, not raised) and ``plugins``.

    A hook implementation whose name matches no spec is an error (``check_pending``).
    """
    pm = PluginManager()
    pm.add_hookspecs(hookspecs)
    if entry_points:
        _load_entry_points(pm, disabled_plugins(disable))
    try:
        for plugin in plugins:
            if not pm.is_registered(plugin):
                pm.register(plugin, name=getattr(plugin, "__name__", None) or repr(plugin))
        pm.check_pending()
    except ValueError as exc:  # pluggy: a plugin name or object registered twice
        raise RegistryError(f"plugin registered twice: {str(exc).splitlines()[0]}") from None
    except pluggy.PluginValidationError as exc:
        provider = _provider_of(pm, exc.plugin)
        detail = str(exc).split(" in plugin ")[0]
        if detail.startswith("unknown hook"):
            detail += f" (misspelled? hooks are: {', '.join(sorted(_hook_names()))})"
        raise RegistryError(f"plugin {provider}: {detail}") from None
    return pm


@functools.cache
def null_hooks() -> PluginManager:
    """A manager with the hook specs and no plugin: a hook called on it does nothing (the
    runner's observers when no plugin manager is given)."""
    return get_plugin_manager(entry_points=False)


def _hook_names() -> list[str]:
    return [n for n in dir(hookspecs) if hasattr(getattr(hookspecs, n), "intellagent_spec")]


def _load_entry_points(pm: PluginManager, disabled: set[str]) -> None:
    seen: set[str] = set()
    for dist in md.distributions():
        dist_name = dist.metadata["Name"]
        if dist_name is None or dist_name.lower() in seen:
            continue
        seen.add(dist_name.lower())
        for ep in dist.entry_points:
            if ep.group != ENTRY_POINT_GROUP:
                continue
            if {ep.name, dist_name, f"{dist_name}:{ep.name}"} & disabled:
                pm.disabled.append(f"{dist_name}:{ep.name}")
                continue
            try:
                plugin = ep.load()
            except Exception as exc:  # a broken plugin names itself, never a traceback
                pm.broken.append(BrokenPlugin(ep.name, dist_name, dist.version, ep.value,
                                              f"{type(exc).__name__}: {exc}"))
                continue
            if pm.is_registered(plugin):
                continue
            pm.distributions[id(plugin)] = (dist_name, dist.version)
            try:
                pm.register(plugin, name=f"{dist_name}:{ep.name}")
            except ValueError as exc:
                raise RegistryError(f"plugin '{ep.name}' of distribution {dist_name}: {exc}") from None


def _provider_of(pm: PluginManager, plugin: Any) -> Provider:
    plugin_name = pm.get_name(plugin) or repr(plugin)
    if id(plugin) in pm.distributions:
        dist, version = pm.distributions[id(plugin)]
        return Provider(plugin=plugin_name, distribution=dist, version=version)
    return Provider(plugin=plugin_name)


def namespace_of(plugin: Any, provider: Provider) -> str:
    """A plugin's name space: its ``INTELLAGENT_NAMESPACE``, else its distribution, else its
    top-level module."""
    explicit = getattr(plugin, "INTELLAGENT_NAMESPACE", None)
    if explicit:
        return str(explicit)
    if provider.distribution:
        return re.sub(r"[-.]+", "_", provider.distribution).lower()
    module = plugin.__name__ if isinstance(plugin, ModuleType) else type(plugin).__module__
    return module.split(".")[0]


class Registry:
    """Components by kind and namespaced name, with the provider of each."""

    def __init__(self, pm: PluginManager) -> None:
        self.pm = pm
        self.components: dict[str, dict[str, Component]] = {kind: {} for kind in KINDS}
        self._registered_by: dict[int, list[str]] = {}
        self.deprecations: list[str] = []  # lines to show once (old names, old registrations)
        self.on_deprecation: Callable[[str], None] | None = None  # shows a line as it comes
        self.aliases: dict[str, dict[str, str]] = {kind: {} for kind in KINDS}  # old → new name
        for kind, hook_name in KINDS.items():
            for impl in getattr(pm.hook, hook_name).get_hookimpls():
                self._collect(kind, impl)

    def _collect(self, kind: str, impl: pluggy.HookImpl) -> None:
        provider = _provider_of(self.pm, impl.plugin)
        namespace = namespace_of(impl.plugin, provider)

        def register(*args: Any, aliases: Iterable[str] = (), **kwargs: Any) -> None:
            name, value, extra = _split_registration(kind, args, kwargs, provider)
            target = kind
            if kind == "stage" and extra.get("stage_kind") == "reporter":  # the old way
                target, extra = "reporter", {}
                self.deprecate(f"{provider} registers reporter '{name}' with register_stages; "
                               "use register_reporters")
            full = name if "/" in name else f"{namespace}/{name}"
            short = full.split("/", 1)[1]
            if not _NAME.match(short):
                raise RegistryError(f"{kind} name '{full}' from {provider} is not a valid name "
                                    "(lower-case letters, digits, '-', '_' and '.')")
            previous = self.components[target].get(full)
            if previous is not None:
                raise RegistryError(f"{target} '{full}' is registered twice: by {previous.provider} "
                                    f"and by {provider}")
            self.components[target][full] = Component(target, full, value, provider, extra)
            for old in aliases:  # names it had before: they still resolve, with a warning
                self.aliases[target][old if "/" in old else f"{DEFAULT_NAMESPACE}/{old}"] = full
            label = extra.get("stage_kind") or target
            self._registered_by.setdefault(id(impl.plugin), []).append(f"{label} {full}")

        try:
            impl.function(register=register)
        except RegistryError:
            raise
        except Exception as exc:
            raise RegistryError(f"plugin {provider}: {impl.function.__name__} failed: "
                                f"{type(exc).__name__}: {exc}") from None

    def names(self, kind: str) -> list[str]:
        return sorted(self.components[kind])

    def resolve(self, kind: str, name: str) -> Component:
        """Find a component by full name, or by short name: first in the ``intellagent`` name
        space, then anywhere it is unique. A name that is a component of another kind says so."""
        found = self._find(kind, name)
        if found is not None:
            return found
        table = self.components[kind]
        for other in KINDS:
            try:
                elsewhere = self._find(other, name) if other != kind else None
            except RegistryError:
                elsewhere = None
            if elsewhere is not None:
                label = elsewhere.extra.get("stage_kind") or other
                shorts = ", ".join(sorted(c.display_name for c in table.values())) or "none"
                raise RegistryError(f"'{name}' is {_article(label)} {label}, not {_article(kind)} "
                                    f"{kind} ({kind}s: {shorts})")
        known = ", ".join(sorted(table)) or "none"
        broken = "".join(f"; {b.line()}, and it may provide it" for b in self.pm.broken)
        raise RegistryError(f"no {kind} named '{name}' (known: {known}){broken}")

    def _find(self, kind: str, name: str) -> Component | None:
        table = self.components[kind]
        if name in table:
            return table[name]
        if "/" not in name:
            if f"{DEFAULT_NAMESPACE}/{name}" in table:
                return table[f"{DEFAULT_NAMESPACE}/{name}"]
            matches = [c for c in table.values() if c.short_name == name]
            if len(matches) == 1:
                return matches[0]
            if len(matches) > 1:
                raise RegistryError(f"{kind} '{name}' is ambiguous: "
                                    + ", ".join(sorted(c.name for c in matches)))
        old = name if "/" in name else f"{DEFAULT_NAMESPACE}/{name}"
        new = self.aliases[kind].get(old)
        if new is not None:
            self.deprecate(f"{kind} '{name}' is now called '{new}'; the old name will go")
            return table[new]
        return None

    def deprecate(self, line: str) -> None:
        """Note a deprecation once (shown through ``on_deprecation`` when set)."""
        if line not in self.deprecations:
            self.deprecations.append(line)
            if self.on_deprecation is not None:
                self.on_deprecation(line)

    def plugins(self) -> list[PluginInfo]:
        out = []
        for plugin in self.pm.get_plugins():
            provider = _provider_of(self.pm, plugin)
            hooks = sorted(h.name for h in (self.pm.get_hookcallers(plugin) or []))
            out.append(PluginInfo(provider.plugin, provider, hooks,
                                  sorted(self._registered_by.get(id(plugin), []))))
        return sorted(out, key=lambda p: (p.provider.distribution or "~", p.name))


def _split_registration(kind: str, args: tuple, kwargs: dict, provider: Provider) -> tuple[str, Any, dict]:
    """Normalise the arguments of a ``register`` call into (name, value, extra)."""
    if kind == "stage":
        (cls,) = args or (kwargs.pop("stage"),)
        name = getattr(cls, "name", None)
        if not name:
            raise RegistryError(f"stage {cls!r} from {provider} has no 'name'")
        return name, cls, {"stage_kind": getattr(cls, "kind", None)}
    if kind == "command":
        (command,) = args or (kwargs.pop("command"),)
        return command.name, command, {}
    if len(args) == 2:
        return str(args[0]), args[1], kwargs
    if len(args) == 1 and "name" not in kwargs:
        value = args[0]
        name = getattr(value, "name", None)
        if not name:
            raise RegistryError(f"{kind} {value!r} from {provider} was registered without a name")
        return name, value, kwargs
    name = kwargs.pop("name")
    value = args[0] if args else kwargs.pop("value", kwargs.pop("path", None))
    return name, value, kwargs


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


def load_registry(*, entry_points: bool = True, plugins: Iterable[Any] = (),
                  disable: Iterable[str] = ()) -> Registry:
    """Build the registry from installed plugins (and any given plugin objects)."""
    return Registry(get_plugin_manager(entry_points=entry_points, plugins=plugins, disable=disable))
