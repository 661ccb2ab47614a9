"""Resolving a pipeline spec into a plan: plugins found, options checked, every wire type-checked,
fan-out domains and the order of steps worked out. No model is called; a plan that resolves runs.

Wiring rules. A step without ``each`` runs once. A step with ``each: X`` runs once per item of
X's output: per element when X gives a list, per item when X itself runs per item. Items of a
list get keys from the elements' ``id`` (else their position); nested fan-outs join keys with
``/``. An input wired with ``from: Y`` receives:

- Y's output as it is, when Y runs once or per item of an enclosing fan-out (the item with the
  same key: an event's dialog meets that event);
- the list of all Y's outputs, gathered, when Y runs per item of a fan-out this step is not inside
  (a once-step consuming a per-item step waits for all of its items);
- its own element of Y's list, when this step runs inside Y's fan-out and the input takes an
  element (a call's replay meets the conversation it belongs to).
"""

from __future__ import annotations

import copy
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Literal

from pydantic import BaseModel, ValidationError

from intellagent.errors import ConfigError, IntellagentError
from intellagent.gates import Gate, gate_problem, parse_gate, path_problem
from intellagent.paths import PathRules
from intellagent.pipeline import LLMSettings, ModelSettings, PipelineSpec, PluginRef, StepSpec
from intellagent.prompts import check_prompt_folders
from intellagent.registry import Component, Registry
from intellagent.steps import MADE, STEP_KINDS, ScoreSpec, Statuses, merge_scores
from intellagent.yamlio import error_text, format_loc, line_of, read_yaml

OLD_FORMAT = ("this is the old pipeline format (`stages:` with fixed slots); name your steps "
              "under `steps:` and wire them with `from:`/`each:`, e.g. `drafts: {use: "
              "my-generator, each: items, from: catalogue}` (docs/writing/pipeline.md)")


@dataclass(frozen=True)
class TypeRef:
    """A declared input or output type: ``T``, ``list[T]``, optionally ``| None``."""

    base: Any
    many: bool = False
    optional: bool = False

    @classmethod
    def of(cls, annotation: Any) -> "TypeRef":
        optional = False
        origin = typing.get_origin(annotation)
        if origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(annotation) if a is not type(None)]
            optional = len(args) < len(typing.get_args(annotation))
            if len(args) != 1:
                raise TypeError(f"unsupported type {annotation!r}")
            annotation = args[0]
            origin = typing.get_origin(annotation)
        if origin in (list, typing.List):
            (item,) = typing.get_args(annotation) or (Any,)
            return cls(item, True, optional)
        return cls(annotation, False, optional)

    def accepts(self, other: "TypeRef") -> bool:
        if self.many != other.many:
            return False
        if self.base in (Any, object):
            return True
        try:
            return isinstance(other.base, type) and issubclass(other.base, self.base)
        except TypeError:
            return other.base == self.base

    @property
    def element(self) -> "TypeRef":
        return TypeRef(self.base, False)

    def __str__(self) -> str:
        name = getattr(self.base, "__name__", str(self.base))
        return f"list[{name}]" if self.many else name


@dataclass
class Wire:
    input: str
    source: str
    mode: Literal["item", "value", "gather"]


@dataclass
class PlannedStep:
    name: str
    component: Component
    plugin: Any  # the configured step instance
    spec: StepSpec
    output: TypeRef
    wires: list[Wire] = field(default_factory=list)
    each: str | None = None
    domain: tuple[str, ...] = ()
    line: int | None = None

    @property
    def use(self) -> str:
        return self.component.name

    @property
    def kind(self) -> str:
        return self.plugin.kind

    @property
    def roles(self) -> dict[str, str]:
        return dict(getattr(self.plugin, "roles", {}) or {})

    @property
    def uses_agent(self) -> bool:
        return bool(getattr(self.plugin, "uses_agent", False))

    @property
    def version(self) -> str:
        return str(getattr(self.plugin, "version", "1"))

    @property
    def config(self) -> Any:
        return self.plugin.config

    @property
    def statuses(self) -> Statuses:
        return getattr(self.plugin, "statuses", None) or MADE

    @property
    def scores(self) -> dict[str, ScoreSpec]:
        return dict(getattr(self.plugin, "scores", None) or {})


@dataclass
class Plan:
    """A resolved pipeline: what :class:`~intellagent.runner.Runner` executes."""

    spec: PipelineSpec
    source: Path
    name: str
    steps: dict[str, PlannedStep]  # in execution order
    agent: Component | None = None
    agent_config: Any = None
    mutant: Component | None = None  # a fault around the agent (``intellagent mutate`` sets it)
    metrics: dict[str, Any] = field(default_factory=dict)  # name → configured metric
    reporters: list[Any] = field(default_factory=list)
    gates: list[Gate] = field(default_factory=list)
    executor: Any = None
    roles: dict[str, str] = field(default_factory=dict)  # every declared role → description
    checker: Any = None  # says where a value came from: the file and line, or a flag
    flags: list[str] = field(default_factory=list)  # the flags that changed the file, in order
    rebuild: Callable[[int], "Plan"] | None = None  # the plan from the file and the first k flags

    def error(self, loc: tuple, message: str) -> IntellagentError:
        """An error about the value at ``loc``, blamed on the flag that set it or on the file and
        line that holds it."""
        if self.checker is None:
            return IntellagentError(message, item=format_loc(loc))
        return self.checker.error(loc, message)

    def origin(self, loc: tuple) -> dict[str, Any]:
        """Where the value at ``loc`` came from, as an error's ``file``, ``line`` and ``item``: the
        flag that set it (``--budget``, ``--set llm.budget_usd``), else its path in the file at
        its line."""
        flag = self.checker.flag_for(loc) if self.checker is not None else None
        if flag is not None:
            return {"item": flag}
        if self.checker is None:
            return {"item": format_loc(loc)}
        return {"item": format_loc(loc), "file": self.source, "line": line_of(self.checker.raw, loc)}

    def check_environment(self, env: Any, steps: list[str] | None = None, *, blame: bool = True) -> None:
        """Each step's ``check(env)`` (of ``steps``, all by default): options that do not fit the
        environment are refused in one line naming the step's options, before anything runs."""
        try:
            for name in steps if steps is not None else self.steps:
                check = getattr(self.steps[name].plugin, "check", None)
                problem = check(env) if check is not None else None
                if problem:
                    raise self.error(("steps", name, "with"), problem)
        except IntellagentError as exc:
            if self.rebuild is None or not blame:
                raise
            rebuild = self.rebuild
            raise _blamed(exc, self.source, [(None, None, f) for f in self.flags],  # type: ignore[misc]
                          lambda k: rebuild(k).check_environment(env, steps, blame=False)) from None

    def label_values(self, score: str, label: str, env: Any) -> list[Any] | None:
        """Every value label ``label`` of score ``score`` can take in a run on ``env``: those that
        each step giving the score with that label, or a step it depends on, fixes
        (:meth:`~intellagent.steps.Step.label_values`); None when any comes from the run."""
        fixed: dict[str, dict[str, list[Any]]] = {}

        def of(name: str) -> dict[str, list[Any]]:
            if name not in fixed:
                hook = getattr(self.steps[name].plugin, "label_values", None)
                fixed[name] = (hook(env) if hook is not None else None) or {}
            return fixed[name]

        values: list[Any] = []
        givers = [s for s in self.steps.values() if score in s.scores]
        for giver in givers:
            labels = giver.scores[score].labels
            if not labels:  # (it declares none: any may come)
                return None
            if label not in labels:
                continue
            found = [of(name)[label] for name in self.upstream(giver.name) if label in of(name)]
            if not found:
                return None
            values += [v for vs in found for v in vs if v not in values]
        return values if givers else None

    def check_gates(self, env: Any, gates: list[Gate] | None = None) -> None:
        """Each gate (the pipeline's by default) names a group and a value its metric can have in
        a run on ``env``, where the metric knows them before the run: one naming another could
        only fail once the run is paid for. Refused in one line naming the gate's line or flag."""
        for gate in self.gates if gates is None else gates:
            problem = path_problem(gate, self.metrics, self, env)
            if problem is None:
                continue
            if gate in self.gates:
                raise self.error(("gates", self.gates.index(gate)), problem)
            raise IntellagentError(problem, item=gate.source or None)

    def declared_scores(self) -> dict[str, ScoreSpec]:
        """Every score the steps declare, by name (two steps giving the same score: their
        statuses together)."""
        out: dict[str, ScoreSpec] = {}
        for s in self.steps.values():
            for name, spec in s.scores.items():
                out[name] = merge_scores(out[name], spec) if name in out else spec
        return out

    def roles_used(self, steps: list[str] | None = None) -> list[str]:
        """The model roles ``steps`` (all by default) call: their own and, where one talks to
        the agent under test, the agent's."""
        names = steps if steps is not None else list(self.steps)
        roles = {r for n in names for r in self.steps[n].roles}
        if any(self.steps[n].uses_agent for n in names) and self.agent is not None:
            roles |= set(getattr(self.agent.value, "roles", {}) or {})
        return sorted(roles)

    def check_providers(self, registry: Registry, steps: list[str] | None = None, *,
                        credentials: bool = True) -> dict[str, list[str]]:
        """Build the provider of every model role ``steps`` (all by default) use, so that what
        only this machine can say (a missing API key, a real model while offline) stops the run
        before it starts, naming the role, not at the role's first call. ``credentials=False``
        (an estimate, which calls no model): those two are returned instead of raised, each
        message with the roles it stops; a provider that cannot be built for any other reason
        still stops it."""
        from intellagent.llm.errors import RealModelForbidden

        llm = self.spec.llm
        missing: dict[str, list[str]] = {}
        for role in self.roles_used(steps):
            settings = llm.for_role(role)
            name = settings.provider_name
            try:
                registry.resolve("llm-provider", name).value(settings, seed=self.spec.seed)
            except RealModelForbidden as exc:
                if credentials:
                    raise self.error(self._model_loc(role), f"role {role}: {exc.message}") from None
                missing.setdefault(exc.message, []).append(role)
            except IntellagentError as exc:
                raise self.error(self._model_loc(role), f"role {role}: {exc.message}") from None
        return missing

    def _model_loc(self, role: str) -> tuple[str, ...]:
        return ("llm", "roles", role, "model") if role in self.spec.llm.roles else ("llm", "default", "model")

    def upstream(self, step: str) -> list[str]:
        """``step`` and every step it depends on, in execution order."""
        needed = {step}
        for name in reversed(list(self.steps)):
            if name in needed:
                s = self.steps[name]
                needed |= {w.source for w in s.wires} | ({s.each} if s.each else set())
        return [n for n in self.steps if n in needed]

    def domains(self) -> list[tuple[str, ...]]:
        """Every fan-out domain with at least one step, outermost first."""
        seen: list[tuple[str, ...]] = []
        for s in self.steps.values():
            if s.domain and s.domain not in seen:
                seen.append(s.domain)
        return sorted(seen, key=len)

    def describe(self) -> str:
        parts = []
        for s in self.steps.values():
            how = f" each {s.each}" if s.each else ""
            parts.append(f"{s.name} ({s.kind} {s.use}{how})")
        return " → ".join(parts)


def find_pipeline(registry: Registry, target: str | Path | None, default: str = "intellagent") -> Path:
    """A pipeline file: a path to a file, else a registered pipeline name."""
    if target is None:
        target = default
    path = Path(target)
    if path.is_file():
        return path
    try:
        return Path(registry.resolve("pipeline", str(target)).value)
    except IntellagentError as exc:
        if path.exists():
            raise ConfigError("is a folder, expected a pipeline YAML file", file=path) from None
        if path.suffix in (".yaml", ".yml"):
            raise ConfigError("pipeline file not found", file=path) from None
        raise IntellagentError(f"{exc.message}, and no file of that name", item="--pipeline") from None


def load_plan(target: str | Path | None, registry: Registry, *,
              overrides: list[tuple[str, Any, str]] | None = None,
              params: dict[str, str] | None = None, supplied: Iterable[str] = ()) -> Plan:
    """Read, override and resolve a pipeline (a file, or a registered name; the ``intellagent``
    pipeline by default). ``overrides`` are (dotted path, value, flag) from the command line;
    ``params`` are values of the pipeline's own ``params:`` shortcuts (``--events 40``). An error
    in an overridden value names the flag, not the file. ``supplied``: models whose provider the
    caller gives itself (a test's scripted model), which no provider needs to know."""
    source = find_pipeline(registry, target)
    raw = read_yaml(source)
    if raw is None:
        raise ConfigError("file is empty", file=source)
    return plan_from_data(raw, source, registry, overrides=overrides, params=params, supplied=supplied)


def plan_from_data(raw: Any, source: Path, registry: Registry, *,
                   overrides: list[tuple[str, Any, str]] | None = None,
                   params: dict[str, str] | None = None, trusted: bool = False,
                   supplied: Iterable[str] = ()) -> Plan:
    """Resolve parsed pipeline YAML read from ``source``. ``trusted``: a spec whose paths need no
    containment check (one a run recorded, checked when it started; one a test builds in code)."""
    if not isinstance(raw, dict):
        kind = "list" if isinstance(raw, list) else type(raw).__name__
        raise ConfigError("a pipeline is a mapping (steps:, agent:, llm:, metrics:, report:, "
                          f"seed:), not a {kind}", file=source, line=1)
    if "stages" in raw:
        raise ConfigError(OLD_FORMAT, file=source, line=line_of(raw, ("stages",)))
    if overrides or params:  # the file as written first: its own faults before a flag's
        _Checker(raw, source, {}, trusted=trusted).validate(PipelineSpec, raw, ())
    overrides = list(overrides or [])
    declared = raw.get("params") if isinstance(raw.get("params"), dict) else {}
    for name, text in (params or {}).items():
        if name not in declared:
            known = ", ".join(f"--{p}" for p in declared) or "none"
            raise IntellagentError(f"no such option (this pipeline's parameters: {known})",
                                   item=f"--{name}")
        overrides.insert(0, (str(declared[name]), parse_value(text, f"--{name}"), f"--{name}"))
    overrides = _expand(raw, overrides)
    original = copy.deepcopy(raw) if overrides else raw  # what the file itself says
    supplied = frozenset(supplied)
    try:
        return _resolve_plan(raw, source, registry, overrides, trusted, original, supplied)
    except IntellagentError as exc:
        raise _blamed(exc, source, overrides, lambda k: _resolve_plan(
            copy.deepcopy(original), source, registry, overrides[:k], trusted, original,
            supplied)) from None


def _resolve_plan(raw: Any, source: Path, registry: Registry, overrides: list[tuple[str, Any, str]],
                  trusted: bool, original: Any, supplied: frozenset[str] = frozenset()) -> Plan:
    flags = _apply_overrides(raw, overrides, source)
    name = source.stem
    for comp in registry.components.get("pipeline", {}).values():
        try:
            if Path(comp.value).resolve() == source.resolve():
                name = comp.name
        except OSError:
            pass
    checker = _Checker(raw, source, flags, trusted=trusted, original=original)
    checker.supplied = supplied
    spec = checker.validate(PipelineSpec, raw, ())
    plan = Plan(spec=spec, source=source, name=name, steps={}, checker=checker)
    _resolve_steps(plan, raw, checker, registry)
    if not trusted:  # (a recorded run's spec: its report does not hang on the folder as it is now)
        check_prompt_folders({name: s.plugin for name, s in plan.steps.items()})
    _resolve_rest(plan, raw, checker, registry)
    if overrides:
        plan.rebuild = lambda k: _resolve_plan(copy.deepcopy(original), source, registry,
                                               overrides[:k], trusted, original, supplied)
        plan.flags = [flag for _, _, flag in overrides]
    return plan


def _blamed(exc: IntellagentError, source: Path, overrides: list[tuple[str, Any, str]],
            attempt: Callable[[int], Any]) -> IntellagentError:
    """``exc`` blamed on its true source. An error the pipeline file is blamed for, found with
    flags applied, is the file's when the file alone has it, else the first flag that brings it
    in (the file with the first k flags applied, k = 1, 2, ...): a flag that changes one step can
    break the wiring of another."""
    flags = [flag for _, _, flag in overrides]
    if not flags or exc.item is not None or exc.file != str(source):
        return exc
    for k in range(len(flags) + 1):
        try:
            attempt(k)
        except IntellagentError as again:
            if again.message == exc.message:
                return exc if k == 0 else ConfigError(exc.message, item=flags[k - 1])
    return exc


def parse_value(text: str, flag: str | None = None) -> Any:
    """A command-line value as YAML would read it (``40`` → 40, ``[2, 9]`` → a list); one whose
    aliases expand past the bound of a YAML file is refused naming ``flag``."""
    from ruamel.yaml.error import YAMLError

    from intellagent.yamlio import check_expansion, safe_yaml

    try:
        value = safe_yaml().load(text)
    except YAMLError:
        return text
    try:
        return check_expansion(value, None)
    except ConfigError as exc:
        raise ConfigError(exc.message, item=flag) from None


def model_overrides(model: str, flag: str = "--model") -> list[tuple[str, Any, str]]:
    """``--model``: every role's model, the default's and each the file names (a more specific
    override given after it, ``--set llm.roles.agent.model=...``, wins)."""
    return [("llm.default.model", model, flag), ("llm.roles.*.model", model, flag)]


def split_path(dotted: str) -> list[str]:
    """The parts of a ``--set`` path; a part in double quotes may hold dots, as a model's name
    does (``llm.prices."qwen2.5:7b"``)."""
    if '"' not in dotted:
        return dotted.split(".")
    parts, part, quoted = [], "", False
    for char in dotted:
        if char == '"':
            quoted = not quoted
        elif char == "." and not quoted:
            parts.append(part)
            part = ""
        else:
            part += char
    return [*parts, part]


def _expand(raw: Any, overrides: list[tuple[str, Any, str]]) -> list[tuple[str, Any, str]]:
    """Overrides with a ``*`` part made one per key the file has there."""
    out = []
    for dotted, value, flag in overrides:
        if "*" not in split_path(dotted):
            out.append((dotted, value, flag))
            continue
        head, _, tail = dotted.partition(".*.")
        node: Any = raw
        for part in head.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        for key in (node if isinstance(node, dict) else {}):
            out.append((f"{head}.{key}.{tail}", value, flag))
    return out


def _apply_overrides(raw: Any, overrides: list[tuple[str, Any, str]], source: Path) -> dict[tuple, str]:
    """Set each (dotted path, value, flag) in ``raw``; {path: flag} of what the flags set. A path
    that leads into a value that is no mapping is the flag's fault: it names something the
    pipeline does not have."""
    flags: dict[tuple, str] = {}
    for dotted, value, flag in overrides:
        node = raw
        parts = split_path(dotted)
        if not all(parts):
            raise IntellagentError(f"cannot set '{dotted}': a part of the path is empty", item=flag)
        for i, part in enumerate(parts[:-1]):
            if not isinstance(node.get(part), dict):
                if part in node:
                    where = ".".join(parts[:i + 1])
                    line = line_of(raw, tuple(parts[:i + 1]))
                    raise IntellagentError(f"cannot set '{dotted}': {where} is {node[part]!r}"
                                           f"{f' ({source}:{line})' if line else ''}, not a mapping",
                                           item=flag)
                node[part] = {}
            node = node[part]
        node[parts[-1]] = value
        flags[tuple(parts)] = flag
    return flags


class _Checker:
    """Validation that reports the file and line, or the command-line flag that set a value."""

    def __init__(self, raw: Any, source: Path, flags: dict[tuple, str], *, trusted: bool = False,
                 original: Any = None) -> None:
        self.raw = raw
        self.source = source
        self.flags = flags
        self.trusted = trusted
        self.original = raw if original is None else original
        self.supplied: frozenset[str] = frozenset()  # models whose provider the caller gives

    def flag_for(self, loc: tuple) -> str | None:
        """The flag to blame for the value at ``loc``: the one that set it or what holds it (the
        most specific), else, when the file has no such value, the flag that made it; None
        when the value is the file's."""
        holders = [(len(path), flag) for path, flag in self.flags.items() if tuple(loc[:len(path)]) == path]
        if holders:
            return max(holders)[1]
        node = self.original
        for depth, key in enumerate(loc):
            if isinstance(node, dict) and key in node:
                node = node[key]
            elif isinstance(node, list) and isinstance(key, int) and 0 <= key < len(node):
                node = node[key]
            else:  # the file stops here: a flag that set something below made the rest
                made = [flag for path, flag in self.flags.items() if path[:depth + 1] == tuple(loc[:depth + 1])]
                return made[0] if made else None
        return None

    def path_rules(self, loc: tuple) -> PathRules:
        """How the path options of the options at ``loc`` are checked: those a flag set (or all,
        when a flag set the whole block, or for a trusted spec) may point anywhere."""
        if self.trusted or any(tuple(loc[:len(path)]) == path for path in self.flags):
            return PathRules(flagged=True)
        return PathRules(flagged=frozenset(str(path[len(loc)]) for path in self.flags
                                           if len(path) > len(loc) and path[:len(loc)] == tuple(loc)))

    def error(self, loc: tuple, message: str) -> ConfigError:
        flag = self.flag_for(loc)
        if flag is not None:
            return ConfigError(f"{format_loc(loc)}: {message}", item=flag)
        return ConfigError(f"{format_loc(loc)}: {message}" if loc else message, file=self.source,
                           line=line_of(self.raw, loc))

    def validate(self, model: type[BaseModel], data: Any, loc: tuple, owner: str = "") -> Any:
        try:
            return model.model_validate(data, context={"paths": self.path_rules(loc)})
        except ValidationError as exc:
            err = exc.errors()[0]
            where = loc + tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
            if err["type"] == "extra_forbidden":
                msg = f"unknown key '{where[-1]}'"
                where = where[:-1]
            elif err["type"] == "missing":
                msg = f"missing required key '{where[-1]}'"
                where = where[:-1]
            else:
                msg = error_text(err)
            if owner:
                msg += f" (options of {owner})"
            raise self.error(where, msg) from None


def _resolve(registry: Registry, checker: _Checker, kind: str, ref: PluginRef, loc: tuple,
             want: str | None = None) -> tuple[Component, Any]:
    """A component and its validated options."""
    try:
        component = registry.resolve(kind, ref.use)
    except IntellagentError as exc:
        raise checker.error(loc + ("use",), exc.message) from None
    cls = component.value
    if want is not None:
        got = getattr(cls, "kind", None)
        if got != want and not (want == "step" and got in STEP_KINDS):
            article = "an" if str(got)[:1] in "aeiou" else "a"
            raise checker.error(loc + ("use",), f"'{ref.use}' is {article} {got}, not "
                                + ("a step" if want == "step" else f"a {want}"))
    config_model = getattr(cls, "Config", None)
    config = checker.validate(config_model, ref.with_, loc + ("with",), component.name) \
        if config_model is not None else None
    return component, config


def _resolve_steps(plan: Plan, raw: Any, checker: _Checker, registry: Registry) -> None:
    spec = plan.spec
    planned: dict[str, PlannedStep] = {}
    for name, step in spec.steps.items():
        loc = ("steps", name)
        if not _valid_step_name(name):
            raise checker.error(loc, f"step name '{name}' must be lower-case letters, digits, '-' or '_'")
        component, config = _resolve(registry, checker, "stage", step, loc, want="step")
        try:
            output = TypeRef.of(component.value.output)
        except TypeError as exc:
            raise checker.error(loc, f"'{component.name}' declares an unsupported output: {exc}") from None
        planned[name] = PlannedStep(name=name, component=component, plugin=component.value(config),
                                    spec=step, output=output, line=line_of(raw, loc))
    order = _order(planned, checker)
    for name in order:
        _wire(planned[name], planned, checker)
    plan.steps = {name: planned[name] for name in order}


def _valid_step_name(name: str) -> bool:
    return bool(name) and name[0].isalnum() and all(c.isalnum() or c in "-_" for c in name) \
        and name == name.lower()


def _sources(step: StepSpec) -> tuple[dict[str, str] | None, list[str]]:
    """(explicit {input: source} or None, the named sources)."""
    value = step.from_
    if value is None:
        return None, []
    if isinstance(value, str):
        return None, [value]
    if isinstance(value, list):
        return None, list(value)
    return dict(value), list(value.values())


def _order(steps: dict[str, PlannedStep], checker: _Checker) -> list[str]:
    """Steps in an order where every source comes first (spec order among independent ones)."""
    deps: dict[str, list[str]] = {}
    for name, s in steps.items():
        _, sources = _sources(s.spec)
        each = s.spec.each
        if isinstance(each, dict):
            each_sources = list(each.values())
            if len(each_sources) != 1:
                raise checker.error(("steps", name, "each"), "each: names exactly one step")
            sources = sources + each_sources
        elif each:
            sources = sources + [each]
        each_names = [each] if isinstance(each, str) else list((each or {}).values())
        for src in sources:
            if src not in steps:
                field_name = "each" if src in each_names else "from"
                known = ", ".join(n for n in steps if n != name) or "none"
                raise checker.error(("steps", name, field_name), f"no step named '{src}' (steps: {known})")
            if src == name:
                raise checker.error(("steps", name), "a step cannot consume its own output")
        deps[name] = sources
    order: list[str] = []
    pending = list(steps)
    while pending:
        ready = [n for n in pending if all(d in order for d in deps[n])]
        if not ready:
            cycle = " → ".join(pending)
            raise checker.error(("steps", pending[0]), f"steps depend on each other in a circle: {cycle}")
        order.append(ready[0])
        pending.remove(ready[0])
    return order


def _wire(step: PlannedStep, steps: dict[str, PlannedStep], checker: _Checker) -> None:
    loc = ("steps", step.name)
    try:
        inputs = {n: TypeRef.of(t) for n, t in (getattr(step.plugin, "inputs", {}) or {}).items()}
    except TypeError as exc:
        raise checker.error(loc, f"'{step.use}' declares an unsupported input: {exc}") from None
    bound: dict[str, Wire] = {}

    def bind(source: str, offered: TypeRef, mode: str, explicit: str | None, field_name: str) -> None:
        if explicit is not None:
            wanted = inputs.get(explicit)
            if wanted is None:
                raise checker.error(loc + (field_name,), f"'{step.use}' has no input '{explicit}' "
                                    f"(inputs: {_listing(inputs)})")
            if not wanted.accepts(offered):
                raise checker.error(loc + (field_name,), f"input '{explicit}' of '{step.use}' takes "
                                    f"{wanted}, but '{source}' gives {offered}")
            name = explicit
        else:
            fits = [n for n, t in inputs.items() if n not in bound and t.accepts(offered)]
            if not fits:
                raise checker.error(loc + (field_name,), f"'{source}' gives {offered}, which no input "
                                    f"of '{step.use}' takes (inputs: {_listing(inputs)})")
            if len(fits) > 1:
                raise checker.error(loc + (field_name,), f"'{source}' gives {offered}, which several "
                                    f"inputs of '{step.use}' take ({', '.join(fits)}): write "
                                    f"{field_name}: {{input: {source}}}")
            name = fits[0]
        if name in bound:
            raise checker.error(loc + (field_name,), f"input '{name}' is wired twice")
        bound[name] = Wire(input=name, source=source, mode=mode)  # type: ignore[arg-type]

    each = step.spec.each
    if each is not None:
        explicit_each, source = (next(iter(each.items())) if isinstance(each, dict) else (None, each))
        src = steps[source]
        if src.output.many:
            step.domain = src.domain + (source,)
        elif src.domain:
            step.domain = src.domain
        else:
            raise checker.error(loc + ("each",), f"'{source}' runs once and gives one {src.output}: "
                                "each needs a step that gives a list or runs per item")
        step.each = source
        bind(source, src.output.element, "item", explicit_each, "each")

    explicit, sources = _sources(step.spec)
    pairs = list(explicit.items()) if explicit is not None else [(None, s) for s in sources]
    for input_name, source in pairs:
        src = steps[source]
        if step.domain[:len(src.domain)] == src.domain:
            offers = [(src.output, "value")]
            if src.output.many and source in step.domain:  # inside its fan-out: this item's element
                offers.insert(0, (src.output.element, "item"))
        else:
            offers = [(TypeRef(src.output.base, True), "gather")]
        takes = [(o, m) for o, m in offers if any(t.accepts(o) for n, t in inputs.items()
                                                   if n not in bound and input_name in (None, n))]
        offered, mode = (takes or offers)[0]
        bind(source, offered, mode, input_name, "from")

    missing = [n for n, t in inputs.items() if n not in bound and not t.optional]
    if missing:
        wanted = inputs[missing[0]]
        givers = [s.name for s in steps.values() if s.name != step.name
                  and (wanted.base in (Any, object) or isinstance(s.output.base, type)
                       and isinstance(wanted.base, type) and issubclass(s.output.base, wanted.base))]
        hint = f" (steps giving {wanted.base.__name__}: {', '.join(givers)})" if givers else \
            f"; no step of this pipeline gives {wanted.base.__name__}"
        raise checker.error(loc, f"input '{missing[0]}' ({wanted}) of '{step.use}' is not wired: "
                            f"add it to from:{hint}")
    step.wires = [bound[n] for n in inputs if n in bound]


def _unknown_scores(metric: Any, declared: dict[str, ScoreSpec]) -> str | None:
    """A score the metric reads, or a status it names, that no step declares."""
    reads = metric.reads() if hasattr(metric, "reads") else {}
    for score, named in reads.items():
        spec = declared.get(score)
        if spec is None:
            return (f"reads score '{score}', which no step of this pipeline declares (declared: "
                    f"{', '.join(sorted(declared)) or 'none'})")
        known = spec.statuses.all() if spec.statuses is not None else []
        for status in named:
            if status not in known:
                return (f"names status '{status}' of score '{score}', which no step declares "
                        f"(its statuses: {', '.join(known) or 'none: it is a value'})")
    labels = {label for score in reads for label in declared[score].labels}
    if labels:  # (a score declaring no labels is not checked)
        for label, otherwise in (metric.labels() if hasattr(metric, "labels") else {}).items():
            if label not in labels:
                return (f"reads label '{label}', which no score it reads carries (their labels: "
                        f"{', '.join(sorted(labels))}): {otherwise}")
    return None


def _listing(inputs: dict[str, TypeRef]) -> str:
    return ", ".join(f"{n}: {t}" for n, t in inputs.items()) or "none"


def _check_models(plan: Plan, checker: _Checker, registry: Registry) -> None:
    """Every model a role of this pipeline uses has a provider, and its provider's ``check``
    (when it has one: the mock provider knows its models) finds nothing wrong, before any call."""
    llm = plan.spec.llm
    used = {role: ("llm", "roles", role) if role in llm.roles else ("llm", "default")
            for role in sorted(plan.roles)}
    for loc in dict.fromkeys(used.values()):
        settings = llm.roles[loc[2]] if len(loc) == 3 else llm.default
        if settings.model in checker.supplied:
            continue
        name = settings.provider_name
        try:
            factory = registry.resolve("llm-provider", name).value
        except IntellagentError as exc:
            raise checker.error(loc + ("provider",) if settings.provider else loc + ("model",),
                                exc.message) from None
        check = getattr(factory, "check", None)
        problem = check(settings) if check is not None else None
        if problem:
            raise checker.error(loc + ("model",), problem)


def _check_prices(plan: Plan, checker: _Checker) -> None:
    """A price of ``llm.prices`` that leaves out input or output is merged over the genai-prices
    table's price of each model it prices: one for a model the table does not know has nothing
    to be merged over, and is refused before anything runs."""
    llm = plan.spec.llm
    if all(p.input is not None and p.output is not None for p in llm.prices.values()):
        return
    from intellagent.llm.prices import PriceTable  # the table's data: only for a partial price

    table = PriceTable(llm.prices)
    for model in sorted({llm.for_role(role).model for role in plan.roles}):
        found = table.missing(model)
        if found:
            key, lacks = found
            raise checker.error(("llm", "prices", key), f"no {' or '.join(lacks)} price, and genai-prices "
                                f"has none for {model} to take {'it' if len(lacks) == 1 else 'them'} "
                                f"from: give {' and '.join(lacks)} (dollars per million tokens)")


def _resolve_rest(plan: Plan, raw: Any, checker: _Checker, registry: Registry) -> None:
    spec = plan.spec
    roles: dict[str, str] = {}
    for s in plan.steps.values():
        roles.update(s.roles)
    if any(s.uses_agent for s in plan.steps.values()):
        plan.agent, plan.agent_config = _resolve(registry, checker, "agent", spec.agent, ("agent",))
        check = getattr(plan.agent.value, "check", None)
        problem = check(plan.agent_config) if check is not None else None
        if problem:
            raise checker.error(("agent", "with"), problem)
        roles.update(getattr(plan.agent.value, "roles", {}) or {})
    plan.roles = roles
    for role in spec.llm.roles:
        if role not in roles:
            known = ", ".join(sorted(roles)) or "none"
            raise checker.error(("llm", "roles", role), f"no step of this pipeline uses a model role "
                                f"'{role}' (its roles: {known})")
    _check_models(plan, checker, registry)
    _check_prices(plan, checker)

    refs = spec.metric_refs()
    declared = plan.declared_scores()
    for name, ref in refs.items():
        loc = ("metrics", name) if isinstance(spec.metrics, dict) else \
            ("metrics", list(refs).index(name))
        component, config = _resolve(registry, checker, "metric", ref, loc)
        metric = component.value(config)
        metric.name = name
        problem = metric.check(plan) if hasattr(metric, "check") else None
        if problem:
            raise checker.error(loc, problem)
        problem = _unknown_scores(metric, declared)
        if problem:
            raise checker.error(loc, problem)
        plan.metrics[name] = metric
    for i, text in enumerate(spec.gates):
        try:
            gate = parse_gate(text, f"gates[{i}]")
        except IntellagentError as exc:
            raise checker.error(("gates", i), exc.message) from None
        problem = gate_problem(gate, plan.metrics)
        if problem:
            raise checker.error(("gates", i), problem)
        plan.gates.append(gate)
    for i, entry in enumerate(spec.report):
        ref = entry if isinstance(entry, PluginRef) else PluginRef(use=entry)
        component, config = _resolve(registry, checker, "reporter", ref, ("report", i))
        if any(type(r) is component.value for r in plan.reporters):
            raise checker.error(("report", i), f"'{ref.use}' is named twice (one reporter writes one "
                                "report)")
        plan.reporters.append(component.value(config))
    component, config = _resolve(registry, checker, "executor", spec.executor, ("executor",))
    plan.executor = component.value(config)
    for param, dotted in spec.params.items():
        if not _valid_param_name(param):
            raise checker.error(("params", param), f"parameter name '{param}' must be lower-case "
                                "letters, digits and '-' (it becomes the option --NAME)")
        problem = _param_problem(plan, dotted)
        if problem:
            raise checker.error(("params", param), f"'{dotted}' is not a path into this pipeline: "
                                f"{problem}")


def _valid_param_name(name: str) -> bool:
    return bool(name) and name[0].isalpha() and name == name.lower() \
        and all(c.isalnum() or c == "-" for c in name)


def _param_problem(plan: Plan, dotted: str) -> str | None:
    """Why ``dotted`` (a ``params:`` entry) names nothing this pipeline has, or None: a step, one
    of its options (as its plugin's options model declares them), a declared model role, a field
    of the models' settings, the agent's or the executor's options, or the seed."""
    head, *rest = dotted.split(".")
    if head == "seed":
        return "seed has no parts" if rest else None
    if head == "steps":
        if not rest or rest[0] not in plan.steps:
            return f"no step named '{rest[0] if rest else ''}' (steps: {', '.join(plan.steps)})"
        step = plan.steps[rest[0]]
        return _path_problem(StepSpec, rest[1:], getattr(step.plugin, "Config", None), step.use)
    if head == "agent":
        if plan.agent is None:
            return "no step of this pipeline talks to the agent under test"
        return _path_problem(PluginRef, rest, getattr(plan.agent.value, "Config", None), plan.agent.name)
    if head == "executor":
        return _path_problem(PluginRef, rest, getattr(type(plan.executor), "Config", None), "the executor")
    if head == "llm":
        if rest[:1] == ["roles"]:
            if len(rest) < 2 or rest[1] not in plan.roles:
                return f"no model role '{rest[1] if len(rest) > 1 else ''}' (roles: " \
                       f"{', '.join(sorted(plan.roles)) or 'none'})"
            return _path_problem(ModelSettings, rest[2:])
        return _path_problem(LLMSettings, rest)
    return f"'{head}' is none of steps, llm, agent, executor, seed"


def _path_problem(model: type[BaseModel] | None, parts: list[str], options: Any = None,
                  owner: str = "") -> str | None:
    """Why ``parts`` is no path of fields into ``model``, or None. ``with`` leads into
    ``options`` (a plugin's options model)."""
    if model is None or not parts:
        return None
    fields = {(f.alias or n): f for n, f in model.model_fields.items()} | dict(model.model_fields)
    field_info = fields.get(parts[0])
    if field_info is None:
        known = ", ".join(f.alias or n for n, f in model.model_fields.items())
        return f"'{parts[0]}' is not an option{f' of {owner}' if owner else ''} (options: {known or 'none'})"
    if parts[0] == "with" and options is not None:
        return _path_problem(options, parts[1:], None, owner)
    inner = _model_in(field_info.annotation)
    if inner is not None:
        return _path_problem(inner, parts[1:])
    if len(parts) > 1 and typing.get_origin(field_info.annotation) not in (dict, typing.Union, types.UnionType) \
            and field_info.annotation not in (dict, Any):
        return f"'{parts[0]}' holds a single value, not '{'.'.join(parts[1:])}'"
    return None


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model ``annotation`` is (or is optionally), else None."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)] \
        if typing.get_origin(annotation) in (typing.Union, types.UnionType) else [annotation]
    models = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
    return models[0] if len(models) == 1 and len(args) == 1 else None
