"""One broken plugin never takes every command down: `plugins` lists it with its error, other
commands warn once and go on without it, and a plugin can be disabled by name."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO


@pytest.fixture
def broken_install(tmp_path: Path) -> Path:
    """A distribution 'acme-broken' whose entry point fails to import, on a path of its own."""
    site = tmp_path / "site"
    info = site / "acme_broken-0.3.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-broken\nVersion: 0.3\n")
    (info / "entry_points.txt").write_text("[intellagent]\nretailer = acme_broken_plugin\n")
    (site / "acme_broken_plugin.py").write_text("import no_such_dependency_xyz\n")
    return site


def cli(site: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "intellagent", *args], capture_output=True, text=True,
                          timeout=120, cwd=REPO,
                          env=dict(os.environ, PYTHONPATH=f"{site}{os.pathsep}{REPO}", **env))


def test_plugins_lists_a_broken_plugin_with_its_error(broken_install):
    result = cli(broken_install, "plugins")
    assert result.returncode == 0, result.stderr
    assert "acme-broken 0.3  retailer  BROKEN" in result.stdout
    assert "ModuleNotFoundError: No module named 'no_such_dependency_xyz'" in result.stdout
    assert "intellagent/airline" in result.stdout  # the others are all there
    assert result.stderr == ""


def test_other_commands_warn_once_and_go_on(broken_install):
    result = cli(broken_install, "envs")
    assert result.returncode == 0, result.stderr
    assert "intellagent/airline" in result.stdout
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "acme-broken" in warnings[0] and "going on without it" in warnings[0]


def test_a_name_it_may_provide_says_so(broken_install):
    result = cli(broken_install, "validate", "acme-broken/retailer")
    assert result.returncode == 2
    assert "plugin 'retailer'" in result.stderr and "failed to import" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("how", ["env", "flag", "distribution"])
def test_a_plugin_can_be_disabled_by_name(broken_install, how):
    if how == "env":
        result = cli(broken_install, "envs", INTELLAGENT_DISABLE_PLUGINS="retailer,other")
    elif how == "flag":
        result = cli(broken_install, "--disable-plugin", "retailer", "envs")
    else:
        result = cli(broken_install, "--disable-plugin", "acme-broken", "plugins")
    assert result.returncode == 0 and "warning" not in result.stderr
    if how == "distribution":
        assert "acme-broken:retailer  disabled" in result.stdout and "BROKEN" not in result.stdout


def test_disabling_a_built_in_pipeline_package_removes_what_it_provides(broken_install):
    result = cli(broken_install, "--disable-plugin", "tooltalk", "validate", "tooltalk")
    assert result.returncode == 2 and "no environment named 'tooltalk'" in result.stderr
