"""Resolving ``module:attr`` and ``file.py:attr`` references to Python objects."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from intellagent.paths import inside


class ReferenceError_(ValueError):
    """A reference that does not resolve; the message says why."""


def load_module(ref: str, base: Path) -> ModuleType:
    """``pkg.module`` is imported; ``file.py`` is loaded from the folder ``base``, and only from
    inside it (symbolic links followed): code runs from where it belongs, never from a path that
    climbs out (``../``, an absolute path, a link)."""
    if ref.endswith(".py"):
        path = inside(base, ref)
        if path is None:
            raise ReferenceError_(f"Python file '{ref}' points outside {base}")
        if not path.is_file():
            raise ReferenceError_(f"Python file '{ref}' not found in {base}")
        digest = hashlib.sha1(str(path).encode()).hexdigest()[:10]
        mod_name = f"_intellagent_env_{path.stem}_{digest}"
        if mod_name in sys.modules:
            return sys.modules[mod_name]
        spec = importlib.util.spec_from_file_location(mod_name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[mod_name] = module
        try:
            spec.loader.exec_module(module)
        except (Exception, SystemExit, KeyboardInterrupt) as exc:  # exit() at import is a bug there
            del sys.modules[mod_name]
            raise ReferenceError_(f"'{ref}' failed to import: {_what(exc)}") from None
        return module
    try:
        return importlib.import_module(ref)
    except (Exception, SystemExit, KeyboardInterrupt) as exc:
        raise ReferenceError_(f"module '{ref}' failed to import: {_what(exc)}") from None


def _what(exc: BaseException) -> str:
    if isinstance(exc, SystemExit):
        return f"it called sys.exit({exc.code!r}) while being imported"
    return f"{type(exc).__name__}: {exc}" if str(exc) else f"it raised {type(exc).__name__}"


def resolve(ref: str, base: Path) -> Any:
    """The object named by ``module:attr`` or ``file.py:attr``."""
    if ":" not in ref:
        raise ReferenceError_(f"'{ref}' should be 'module:name' or 'file.py:name'")
    mod_ref, attr = ref.rsplit(":", 1)
    module = load_module(mod_ref, base)
    try:
        obj: Any = module
        for part in attr.split("."):
            obj = getattr(obj, part)
    except AttributeError:
        raise ReferenceError_(f"'{mod_ref}' has no '{attr}'") from None
    return obj
