"""The figures of README and of the docs' pages (docs/) are what the benches print. Every bench
under ``bench/`` whose figures they quote exposes ``readme_figures()``: the sentences and table
cells, computed from its deterministic runs (mock models, fixed data, fixed seeds), exactly as
README or a page states them. A test per bench runs it and fails when neither says so any more,
naming the bench to run. Timings, memory and real-model figures cannot be checked; the text says
which command produced them, and when."""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys

import pytest

from tests.conftest import REPO
from tests.docs_pages import pages, readme

sys.path.insert(0, str(REPO / "bench"))  # the benches import each other by module name


def normalized(text: str) -> str:
    """Text as compared: Markdown emphasis and code marks dropped, whitespace collapsed."""
    return re.sub(r"\s+", " ", text.replace("*", "").replace("`", "")).strip()


README = normalized("\n\n".join([readme(), *pages().values()]))  # README and every page of the site
TOOLTALK = pytest.mark.skipif(importlib.util.find_spec("tooltalk") is None,
                              reason="ToolTalk's reference is not installed: pip install --no-deps nvidia-tooltalk")


@pytest.fixture
def own_modules():
    """The ToolTalk benches stub the heavy modules ToolTalk imports and does not use: they are
    taken out again, so no other test sees a stub for numpy."""
    saved = set(sys.modules)
    yield
    for name in set(sys.modules) - saved:
        if name.split(".")[0] in ("numpy", "torch", "transformers", "tooltalk"):
            del sys.modules[name]


def check(bench: str, lines: list[str]) -> None:
    assert lines, f"bench/{bench}.py gives no figures"
    stale = [line for line in lines if normalized(line) not in README]
    assert not stale, (f"neither README nor docs/ says what `python bench/{bench}.py` prints under "
                       f"\"README's figures\"; run it and copy these into README or the page of docs/ "
                       f"that quotes them:\n  " + "\n  ".join(stale))


@pytest.mark.parametrize("bench", ["verdict_figures", "almita_figures", "environment_figures", "method_figures"])
def test_readme_quotes_what_the_bench_prints(bench):
    check(bench, importlib.import_module(bench).readme_figures())


def test_readme_quotes_the_apigen_figures():
    apigen = importlib.import_module("apigen_figures")
    check("apigen_figures", apigen.readme_figures(apigen.measure("retail"), apigen.measure("airline")))


def test_readme_quotes_the_almita_coverage():
    coverage = importlib.import_module("almita_coverage")
    means = coverage.measure_all([5, 10, 20], seeds=200)
    check("almita_coverage", coverage.readme_figures(means, 200, len(coverage.graphs())))


@TOOLTALK
def test_readme_quotes_the_tooltalk_parity_figures(own_modules):
    parity = importlib.import_module("tooltalk_parity")
    check("tooltalk_parity", parity.dataset_figures() + parity.readme_figures(parity.measure()))


@TOOLTALK
def test_readme_quotes_the_tooltalk_argument_figures(own_modules):
    arguments = importlib.import_module("tooltalk_arguments")
    check("tooltalk_arguments", arguments.readme_figures(arguments.measure()[0]))


def test_every_bench_readme_names_exists():
    named = set(re.findall(r"bench/(\w+)\.py", README))
    assert named and not [n for n in named if not (REPO / "bench" / f"{n}.py").is_file()]


def test_a_stale_figure_is_caught():
    with pytest.raises(AssertionError, match="run it and copy these into README or the page"):
        check("apigen_figures", ["retail acceptance 66.7 % without the feedback loop, 97.3 % with it"])
