"""A step's prompt files: Jinja2 templates in the folders the step ships (a subclass's own
before its base's), each replaceable by a file of the same name in a folder the user names (a
step's ``prompts:`` option). The text of every
template a step renders belongs in its cache key (:meth:`PromptFiles.fingerprint`, returned from
the step's ``fingerprint()``), so an edited prompt re-runs exactly what it shapes. A file in such
a folder that no step reading it renders (a misspelt name) is refused when the plan is made
(:func:`check_prompt_folders`): it would be ignored while its author believes it tested.

Templates render in Jinja2's sandbox: a prompt file can fill in values, loop and branch, but
cannot reach Python's internals (``__class__``, ``__globals__``, ...) to run code. A user's file
that tries is refused when the step is set up, naming the file and line; anything the static
check cannot see is stopped by the sandbox when it renders, naming the file too."""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import math
import weakref
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Sequence

import jinja2
from jinja2 import meta, nodes
from jinja2.compiler import CodeGenerator
from jinja2.sandbox import SandboxedEnvironment

from intellagent.bounds import MAX_CHARS
from intellagent.errors import ConfigError, closest, listed
from intellagent.paths import path_option

#: Attributes a template may not name even when they do not start with "_" (Jinja2's sandbox
#: refuses them on the objects that have them: frames, code, generators, types).
UNSAFE_NAMES = frozenset({"mro", "gi_frame", "gi_code", "cr_frame", "cr_code", "ag_frame",
                          "ag_code", "f_globals", "f_locals", "f_builtins", "f_back", "f_code",
                          "tb_frame", "tb_next", "co_code"})


#: The most digits a power may have in a template (a prompt has no use for larger numbers).
MAX_DIGITS = 4_300


#: Filters and str methods whose integer arguments are a size to allocate.
SIZED = frozenset({"center", "indent", "wordwrap", "truncate", "ljust", "rjust", "zfill", "expandtabs"})

_Sized = (str, list, tuple)


def _too_big(size: int, what: str) -> None:
    if size > MAX_CHARS:
        raise jinja2.exceptions.SecurityError(f"{what} would make {size:,} characters or elements, "
                                              f"past the bound of {MAX_CHARS:,}")


class _BoundedConcat(CodeGenerator):
    """``~`` through the environment's :meth:`BoundedSandbox.concat_bounded` (Jinja2 joins in
    place, where no sandbox hook sees it: a loop doubling a string grows without bound)."""

    def visit_Concat(self, node: nodes.Concat, frame: Any) -> None:
        self.write("environment.concat_bounded((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


class BoundedSandbox(SandboxedEnvironment):
    """Jinja2's sandbox, with the sizes a template can make bounded (the sandbox bounds ``range``
    alone): ``{{ "x" * 10**10 }}`` would take 10 GB before any check of the prompt's size could
    see it. ``*``, ``+`` and ``~`` of text or lists, the size arguments of ``center``, ``indent``
    and the like, are kept within :data:`~intellagent.bounds.MAX_CHARS`; ``**`` within
    :data:`MAX_DIGITS` digits."""

    intercepted_binops = frozenset({"*", "**", "+"})
    code_generator_class = _BoundedConcat

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name in SIZED & set(self.filters):
            self.filters[name] = self._sized(self.filters[name], name)

    @staticmethod
    def _sized(function: Any, name: str) -> Any:
        def bounded(*args: Any, **kwargs: Any) -> Any:
            for value in (*args, *kwargs.values()):
                if isinstance(value, int) and not isinstance(value, bool):
                    _too_big(value, f"'{name}'")
            return function(*args, **kwargs)
        return functools.update_wrapper(bounded, function)

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
        if getattr(__obj, "__name__", None) in SIZED and isinstance(getattr(__obj, "__self__", None), str):
            __self._sized(lambda *a, **k: None, __obj.__name__)(*args, **kwargs)
        return super().call(__context, __obj, *args, **kwargs)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "*":
            for seq, times in ((left, right), (right, left)):
                if isinstance(seq, _Sized) and isinstance(times, int):
                    _too_big(len(seq) * times, "'*'")
        elif operator == "+":
            if isinstance(left, _Sized) and isinstance(right, _Sized):
                _too_big(len(left) + len(right), "'+'")
        elif isinstance(left, int) and isinstance(right, int) and abs(left) > 1 and right > 0 \
                and right * math.log10(abs(left)) > MAX_DIGITS:
            raise jinja2.exceptions.SecurityError(f"'**' would make a number of more than "
                                                  f"{MAX_DIGITS:,} digits")
        return super().call_binop(context, operator, left, right)

    def concat_bounded(self, values: tuple[Any, ...]) -> str:
        text = "".join(map(str, values))
        _too_big(len(text), "'~'")
        return text


@lru_cache(maxsize=64)
def _environment(builtin: tuple[str, ...], override: str | None) -> jinja2.Environment:
    folders = ([override] if override else []) + list(builtin)
    return BoundedSandbox(loader=jinja2.FileSystemLoader(folders), undefined=jinja2.StrictUndefined,
                          autoescape=False, keep_trailing_newline=False)


def unsafe_access(source: str, env: jinja2.Environment) -> tuple[str, int] | None:
    """The first attribute or item of Python's internals a template names, with its line (None
    when it names none). Raises jinja2.TemplateSyntaxError for a template that does not parse."""
    tree = env.parse(source)
    for node in tree.find_all((nodes.Getattr, nodes.Getitem, nodes.Filter)):
        if isinstance(node, nodes.Getattr):
            name: Any = node.attr
        elif isinstance(node, nodes.Getitem):
            name = node.arg.value if isinstance(node.arg, nodes.Const) else None
        else:  # {{ x | attr("__class__") }}
            name = node.args[0].value if node.name == "attr" and node.args \
                and isinstance(node.args[0], nodes.Const) else None
        if isinstance(name, str) and (name.startswith("_") or name in UNSAFE_NAMES):
            return name, node.lineno
    return None


_FILLED: "weakref.WeakKeyDictionary[jinja2.Template, str]" = weakref.WeakKeyDictionary()
"""The text of each template rendered with no values (a system prompt), by template: it is the
same every time (a template changed on disk is read as another), and a step renders its own once
per item (judge.system.md: 500 times in a 200-event run, 80 µs each)."""


class PromptFiles:
    """The templates ``names`` of one step: read from ``override`` (a folder of the user's, or
    None) where it has a file of that name, else from the first of the ``builtin`` folders (one
    folder, or several in order) that has it. The user's files are checked when this is made:
    each must parse, hold some text and name none of Python's internals. ``also``: patterns
    (``user.*.md``) of files the step would read under other options (a persona it is not set
    to), which the user's folder may hold unused."""

    def __init__(self, builtin: Path | Sequence[Path], names: Iterable[str],
                 override: str | None = None, also: Iterable[str] = ()) -> None:
        folders = [builtin] if isinstance(builtin, (str, Path)) else list(builtin)
        self.builtin = tuple(str(Path(f).resolve()) for f in folders)
        self.override = str(Path(override).resolve()) if override else None
        self.given = override  # the folder as the options name it, for messages
        self.names = tuple(names)
        self.also = tuple(also)
        self._loaded: dict[str, jinja2.Template] = {}
        if self.override:
            for name in self.names:
                path = Path(self.override) / name
                if path.is_file():
                    self._check(path)

    def _check(self, path: Path) -> None:
        try:
            source = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError(f"prompt file is not UTF-8 text (byte {exc.start})", file=path) from None
        if not source.strip():
            raise ConfigError("prompt file is empty (delete it to keep the built-in prompt)", file=path)
        try:
            found = unsafe_access(source, self._env)
        except jinja2.TemplateSyntaxError as exc:
            raise ConfigError(f"invalid template: {exc.message}", file=path, line=exc.lineno) from None
        if found is not None:
            raise ConfigError(f"prompt file uses '{found[0]}': templates may not reach Python's "
                              "internals", file=path, line=found[1])

    @property
    def _env(self) -> jinja2.Environment:
        return _environment(self.builtin, self.override)

    def file(self, name: str) -> Path:
        """Where template ``name`` is read from: the user's folder, else the first built-in
        folder that has it."""
        folders = ([self.override] if self.override else []) + list(self.builtin)
        return next((Path(f) / name for f in folders if (Path(f) / name).is_file()),
                    Path(self.builtin[0]) / name)

    def render(self, name: str, **values: Any) -> str:
        """Template ``name`` filled with ``values`` (a missing value is an error, not a blank)."""
        if name not in self.names:
            raise KeyError(f"'{name}' is not among this step's prompt files ({', '.join(self.names)})")
        try:
            template = self._template(name)
            if values:
                return template.render(**values).strip()
            text = _FILLED.get(template)
            if text is None:
                text = _FILLED[template] = template.render().strip()
            return text
        except (jinja2.exceptions.SecurityError, OverflowError) as exc:  # (a range past its bound)
            raise ConfigError(f"prompt file refused by the sandbox: {exc}", file=self.file(name)) from None
        except (jinja2.TemplateError, RecursionError) as exc:  # (a macro calling itself without end)
            path = self.file(name)
            if not self.override or not path.is_relative_to(self.override):
                raise  # a built-in template's fault is a bug, not bad input
            line = getattr(exc, "lineno", None)
            why = "a macro calls itself without end" if isinstance(exc, RecursionError) else exc
            raise ConfigError(f"prompt file failed to render: {why}", file=path, line=line) from None

    def _template(self, name: str) -> jinja2.Template:
        """Template ``name``, kept here while its file is the one it was read from (jinja2's own
        check, its modification time): jinja2's ``get_template`` makes the same check behind a
        lock, a weak reference and its cache's bookkeeping, about 50 µs a render in a run, where a
        system prompt's whole render is a look-up (``_FILLED``). A template it includes is read
        as jinja2 reads it, checked as it renders."""
        template = self._loaded.get(name)
        if template is None or not template.is_up_to_date:
            template = self._loaded[name] = self._env.get_template(name)
        return template

    def source(self, name: str) -> str:
        """Template ``name``'s text as written (for an estimate of its size, no value filled)."""
        return self._env.loader.get_source(self._env, name)[0]

    def has(self, name: str) -> bool:
        """Whether a template ``name`` is there to read (the user's folder or a built-in one)."""
        try:
            self._env.loader.get_source(self._env, name)
        except jinja2.TemplateNotFound:
            return False
        return True

    def read(self) -> tuple[list[str], bool]:
        """Every template this step reads: its ``names`` and, through them, the templates they
        include, import or extend (as they will be read: the user's first); and whether one
        names a template only as it renders (a computed name), which no list can hold."""
        env = self._env
        seen: list[str] = []
        todo = list(self.names)
        computed = False
        while todo:
            name = todo.pop(0)
            if name in seen:
                continue
            seen.append(name)
            try:
                source, filename, _ = env.loader.get_source(env, name)
            except jinja2.TemplateNotFound:
                continue  # (rendering says so, naming it)
            try:
                tree = env.parse(source)
            except jinja2.TemplateSyntaxError as exc:
                raise ConfigError(f"invalid template: {exc.message}", file=filename, line=exc.lineno) from None
            for found in meta.find_referenced_templates(tree):
                if found is None:
                    computed = True
                else:
                    todo.append(found)
        return seen, computed

    def fingerprint(self) -> dict[str, str]:
        """The hash of every template this step renders, as it will be read, and of those they
        include or import (a prompt that includes none keeps the key it had)."""
        env = self._env
        return {name: hashlib.sha256(env.loader.get_source(env, name)[0].encode("utf-8")).hexdigest()[:16]
                for name in self.read()[0] if name in self.names or self.has(name)}


#: The type of a step's ``prompts:`` option: a folder that exists (inside the current folder when
#: a pipeline file names it), or None.
PromptsFolder = path_option("folder", "prompts folder")
_FOLDER_CHECK = PromptsFolder.__metadata__[0]  # how a model's field typed PromptsFolder is known


def held_by(step: Any) -> list[PromptFiles]:
    """The :class:`PromptFiles` an object holds as attributes (a step's, by default)."""
    return [value for value in vars(step).values() if isinstance(value, PromptFiles)]


def prompt_files_of(step: Any) -> list[PromptFiles]:
    """The prompt files a step renders: its ``prompt_files()``, else those it holds."""
    own = getattr(step, "prompt_files", None)
    return list(own()) if callable(own) else held_by(step)


def _folders_named(config: Any) -> list[str]:
    """The prompts folders a step's options name."""
    fields = getattr(type(config), "model_fields", {})
    return [getattr(config, name) for name, field in fields.items()
            if any(m is _FOLDER_CHECK for m in field.metadata) and getattr(config, name)]


def _not_a_prompt(name: str) -> bool:
    """A file a prompts folder may hold besides prompts: a hidden one, a README, an editor's backup."""
    return name.startswith(".") or name.upper().startswith("README") or name.endswith("~")


def check_prompt_folders(steps: dict[str, Any]) -> None:
    """Refuse a file in a prompts folder that no step reading the folder renders (``steps``:
    name → configured step): the built-in prompt would be used and the file ignored while its
    author believes it tested. A folder may serve several steps: its names are those of every
    step reading it, with the templates they include or import. A file that is another step's
    prompt is refused too unless it holds what that step reads anyway (a copy of the built-in
    folder). Not checked: a folder a step reads without :class:`PromptFiles` over it (its names
    are unknown), or whose templates compute a template's name as they render."""
    readers: dict[str, list[tuple[str, PromptFiles]]] = {}
    every: list[tuple[str, PromptFiles]] = []
    unknown: set[str] = set()
    for name, step in steps.items():
        files = prompt_files_of(step)
        every += [(name, f) for f in files]
        for f in files:
            if f.override:
                readers.setdefault(f.override, []).append((name, f))
        known = {f.override for f in files}
        unknown |= {str(Path(folder).resolve()) for folder in _folders_named(getattr(step, "config", None))
                    if str(Path(folder).resolve()) not in known}
    for folder, files in readers.items():
        read: set[str] = set()
        computed = False
        for _, f in files:
            names, dynamic = f.read()
            read.update(names)
            computed |= dynamic
        if folder not in unknown and not computed:
            _check_folder(Path(folder), files, read, every)


def _check_folder(folder: Path, files: list[tuple[str, PromptFiles]], read: set[str],
                  every: list[tuple[str, PromptFiles]]) -> None:
    steps = list(dict.fromkeys(step for step, _ in files))
    patterns = {p for _, f in files for p in f.also}
    given = files[0][1].given or str(folder)
    for path in sorted(folder.iterdir()):
        name = path.name
        if not path.is_file() or _not_a_prompt(name) or name in read \
                or any(fnmatch.fnmatchcase(name, p) for p in patterns):
            continue
        shown = Path(given) / name
        text = path.read_text(encoding="utf-8", errors="replace")
        others = [(step, f) for step, f in every if step not in steps and name in f.names]
        changed = [step for step, f in others if not f.has(name) or f.source(name) != text]
        if others and not changed:
            continue  # what that step reads anyway: it changes nothing
        if changed:
            raise ConfigError(f"this is a prompt of step {changed[0]}, which does not read this folder, "
                              f"so it would be ignored: give {changed[0]} `prompts: {given}` too, or "
                              "remove the file", file=shown)
        near = closest(name, read)
        hint = f": did you mean {near}?" if near else f" (their prompts: {listed(sorted(read))})"
        raise ConfigError(f"no step reading this folder ({', '.join(steps)}) renders a prompt of that "
                          f"name, so it would be ignored{hint}", file=shown)
