"""``new-env``: the generated project installs into a fresh virtual environment, registers its
environment, validates, passes its own tests; a later template change can be applied to it."""

from __future__ import annotations

import shutil
import site
import subprocess
import sys
import types
from pathlib import Path

import pytest

from intellagent import hookimpl
from intellagent.cli import cli
from tests.conftest import REPO


def fresh_venv(root: Path) -> Path:
    """A new virtual environment that sees this one's packages (no downloads) but has its own
    site-packages to install into."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    python = root / "bin" / "python"
    parents = [p for p in site.getsitepackages() if Path(p).is_dir()]
    (site_packages(python) / "_parent_env.pth").write_text(
        "".join(f"import site; site.addsitedir({p!r})\n" for p in parents))
    return python


def site_packages(python: Path) -> Path:
    """The site-packages folder of the environment ``python`` runs in."""
    return Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())


def run(python: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), *args], capture_output=True, text=True, timeout=300, cwd=cwd)


@pytest.mark.slow  # installs the project into a fresh virtualenv
def test_new_env_round_trip_in_a_fresh_virtualenv(tmp_path):
    python = fresh_venv(tmp_path / "venv")
    made = run(python, "-m", "intellagent", "new-env", "retail", "--dir", str(tmp_path))
    assert made.returncode == 0, made.stderr
    project = tmp_path / "retail"
    assert (project / "pyproject.toml").is_file() and (project / ".intellagent-answers.yml").is_file()

    # this venv also sees the packages of the one running the tests, where the user may have
    # installed an environment project named retail of their own: look for the copy installed here
    target = str(site_packages(python))
    before = run(python, "-m", "intellagent", "envs")
    assert not [l for l in before.stdout.splitlines() if l.startswith("retail/retail") and target in l]

    installed = run(python, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
                    "--disable-pip-version-check", "-q", str(project))
    assert installed.returncode == 0, installed.stdout + installed.stderr

    envs = run(python, "-m", "intellagent", "envs")
    assert envs.returncode == 0, envs.stderr
    line = next(l for l in envs.stdout.splitlines() if l.startswith("retail/retail"))
    assert "retail 0.1.0" in line and target in line  # the copy installed here, not the source
    assert "intellagent/retail" in envs.stdout  # the built-in one is still there

    valid = run(python, "-m", "intellagent", "validate", "retail/retail")
    assert valid.returncode == 0, valid.stderr
    assert valid.stdout.startswith("ok: retail 0.1.0 (3 tools, 2 tables, 2 validators)")

    plugins = run(python, "-m", "intellagent", "plugins")
    assert "retail 0.1.0  retail:retail" in plugins.stdout
    assert "registers environment retail/retail" in plugins.stdout

    tests = run(python, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(project / "tests"), cwd=tmp_path)
    assert tests.returncode == 0, tests.stdout + tests.stderr
    assert "2 passed" in tests.stdout


@pytest.fixture
def template_copy(tmp_path):
    template = tmp_path / "template"
    shutil.copytree(REPO / "plugins" / "env_template", template,
                    ignore=shutil.ignore_patterns("__pycache__"))
    plugin = types.ModuleType("tpl")
    plugin.register_env_templates = hookimpl(lambda register: register("environment", template))
    return template, {"plugins": (plugin,), "entry_points": False}


def test_update_applies_a_template_fix_and_keeps_user_edits(tmp_path, runner, template_copy):
    template, obj = template_copy
    result = runner.invoke(cli, ["new-env", "garage", "--dir", str(tmp_path / "out")], obj=obj)
    assert result.exit_code == 0, result.output
    project = tmp_path / "out" / "garage"
    prompt = project / "src" / "garage" / "environment" / "prompt.md"
    prompt.write_text(prompt.read_text() + "\n- The user's own rule.\n")

    # the template gets a fix in a file the user did not touch, one in a file they did, a new file
    readme = template / "README.md.jinja"
    readme.write_text(readme.read_text() + "\nTemplate fix: see CHANGELOG.\n")
    tmpl_prompt = template / "src" / "{{package}}" / "environment" / "prompt.md.jinja"
    tmpl_prompt.write_text(tmpl_prompt.read_text() + "- A new template rule.\n")
    (template / "CHANGELOG.md.jinja").write_text("# {{ name }} changelog\n")

    result = runner.invoke(cli, ["new-env", "--update", str(project)], obj=obj)
    assert result.exit_code == 0, result.output
    assert "updated   README.md" in result.output
    assert "added     CHANGELOG.md" in result.output
    assert "conflict  src/garage/environment/prompt.md" in result.output
    assert "Template fix" in (project / "README.md").read_text()
    assert (project / "CHANGELOG.md").read_text() == "# garage changelog\n"
    assert "The user's own rule." in prompt.read_text()
    assert "A new template rule." in (prompt.parent / "prompt.md.new").read_text()

    again = runner.invoke(cli, ["new-env", "--update", str(project)], obj=obj)
    assert again.exit_code == 0
    assert again.output.strip() == "already up to date"


def test_update_of_a_folder_not_made_by_new_env(tmp_path, runner):
    result = runner.invoke(cli, ["new-env", "--update", str(tmp_path)])
    assert result.exit_code == 2
    assert "not a project made by new-env" in result.stderr
