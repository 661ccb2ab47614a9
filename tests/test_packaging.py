"""The distribution builds as a wheel with namespaced import names and all its data, and the
wheel installed on its own lists and validates the built-in environments."""

from __future__ import annotations

import subprocess
import sys
import zipfile

import pytest

from tests.conftest import REPO
from tests.test_scaffold import fresh_venv, run

pytestmark = pytest.mark.slow  # builds a wheel and installs it into a fresh virtualenv


def test_wheel_contents_and_install(tmp_path):
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "--disable-pip-version-check", "-q", "-w", str(tmp_path / "dist"), str(REPO)],
        capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stdout + build.stderr
    [wheel] = (tmp_path / "dist").glob("intellagent-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names}
    assert top == {"intellagent", "intellagent_plugins", "intellagent_environments",
                   "intellagent-0.1.0.dist-info"}, top
    for needed in ["intellagent_environments/airline/data/flights.json",
                   "intellagent_environments/retail/database/schema.yaml",
                   "intellagent_environments/education/prompt.md",
                   "intellagent_plugins/env_template/pyproject.toml.jinja",
                   "intellagent_plugins/env_template/src/{{package}}/environment/tools.py"]:
        assert needed in names, needed
    assert not any("__pycache__" in n for n in names)
    # every package of the checkout is in the wheel (a package left out of pyproject's list
    # imports in an editable install and fails in a real one: the demo model once did)
    for base, source in (("intellagent", "intellagent"), ("intellagent_plugins", "plugins"),
                         ("intellagent_environments", "environments")):
        for init in (REPO / source).rglob("__init__.py"):
            inside = init.relative_to(REPO / source).as_posix()
            if "{{" not in inside and "__pycache__" not in inside:
                assert f"{base}/{inside}" in names, f"{base}/{inside} is not in the wheel"
    entry_points = zipfile.ZipFile(wheel).read("intellagent-0.1.0.dist-info/entry_points.txt").decode()
    assert "[intellagent]" in entry_points and "intellagent_environments.plugin" in entry_points

    python = fresh_venv(tmp_path / "venv")
    installed = run(python, "-m", "pip", "install", "--no-deps", "--no-index", "-q",
                    "--disable-pip-version-check", str(wheel))
    assert installed.returncode == 0, installed.stderr
    envs = run(python, "-m", "intellagent", "envs", cwd=tmp_path)
    assert envs.returncode == 0, envs.stderr
    airline = next(l for l in envs.stdout.splitlines() if l.startswith("intellagent/airline"))
    assert str(tmp_path / "venv") in airline  # served from the wheel, not from the checkout
    valid = run(python, "-m", "intellagent", "validate", "airline", cwd=tmp_path)
    assert valid.returncode == 0 and valid.stdout.startswith("ok: airline"), valid.stderr
