"""Plugin packages import what they declare, nothing else: a pipeline package imports the engine,
the shared kits and the public artefacts (its ``artefacts`` module) of a package it declares it
builds on (``BUILDS_ON`` in its ``__init__.py``); a shared kit imports the engine and other kits.
So a pipeline can be lifted out as a third-party package without dragging another one along."""

from __future__ import annotations

import ast

from tests.conftest import REPO

PLUGINS = REPO / "plugins"
KITS = {"dialogue", "agents", "providers", "reporters", "executors", "mutants"}
PREFIX = "intellagent_plugins."


def packages() -> list[str]:
    return sorted(p.name for p in PLUGINS.iterdir() if (p / "__init__.py").is_file())


def declared(package: str) -> tuple[str, ...]:
    tree = ast.parse((PLUGINS / package / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "BUILDS_ON" for t in node.targets):
            return tuple(ast.literal_eval(node.value))
    return ()


def imports(package: str):
    """(file, line, module) of every plugin-package module imported under ``package``."""
    for path in sorted((PLUGINS / package).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names
                                         if node.module == "intellagent_plugins"]
            for name in names:
                if name.startswith(PREFIX) or name == "intellagent_plugins":
                    yield path.relative_to(REPO), node.lineno, name


def allowed(package: str, module: str) -> bool:
    parts = module.removeprefix(PREFIX).split(".")
    target = parts[0]
    if module == "intellagent_plugins" or target == package or target in KITS:
        return True
    if package in KITS:
        return False
    return target in declared(package) and parts[1:2] == ["artefacts"]


def test_every_package_is_checked():
    found = packages()
    assert {"intellagent", "tau_bench", "apigen_mt", "almita", "tooltalk", "dialogue"} <= set(found)


def test_plugin_packages_import_only_what_they_declare():
    wrong = [f"{path}:{line} imports {module}" for package in packages()
             for path, line, module in imports(package) if not allowed(package, module)]
    assert not wrong, "\n".join(wrong)


def test_declared_dependencies_exist_and_are_not_kits():
    for package in packages():
        for other in declared(package):
            assert (PLUGINS / other / "artefacts.py").is_file(), f"{package} builds on {other}, which has no artefacts"
            assert other not in KITS and other != package


def test_the_guard_catches_an_undeclared_import(tmp_path):
    assert not allowed("apigen_mt", "intellagent_plugins.intellagent.artefacts")
    assert not allowed("apigen_mt", "intellagent_plugins.tau_bench.steps")
    assert allowed("apigen_mt", "intellagent_plugins.tau_bench.artefacts")
    assert allowed("tau_bench", "intellagent_plugins.dialogue.simulator")
    assert not allowed("dialogue", "intellagent_plugins.intellagent.artefacts")
