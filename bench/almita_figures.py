"""Figures of the ALMITA pipeline on the built-in ``almita`` environment (no network, no key).

    python bench/almita_figures.py

1. The funnel on ``mock/schema``, whose fabricated flowgraphs break the first rules: what each
   stage generated, what each rule removed, what it kept.
2. The funnel with a script that writes valid graphs (``tests/almita_script.py``, a
   ``mock/function`` model): the run goes through to the tests.
3. The default reply scorer (chrF) on hand-written agent replies that say the same thing in other
   words and on replies that say something else (``tests/test_almita_metrics.py``): the range
   of each, and the default threshold 0.40 in the gap.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def funnel(model: str | None = None) -> list[dict]:
    """The funnel's rows of a run of the ``almita`` pipeline (``model``: a mock/function script)."""
    from intellagent.environment import load_environment
    from intellagent.envs import environment_path
    from intellagent.registry import load_registry
    from intellagent.testing.harness import run_pipeline

    registry = load_registry()
    env = load_environment(environment_path(registry, "almita"))
    overrides = [] if model is None else [("llm.default.model", "mock/function", "bench"),
                                          ("llm.default.options.function", model, "bench")]
    with tempfile.TemporaryDirectory() as tmp, open(os.devnull, "w") as quiet:
        from intellagent.store import Store
        result = run_pipeline("almita", env, registry=registry, store=Store.for_workspace(Path(tmp)),
                              progress_stream=quiet, overrides=overrides)
        return result.report.metrics["funnel"].rows


def chrf_ranges() -> tuple[tuple[float, float], tuple[float, float]]:
    """(min, max) of chrF over the equivalent pairs, and over the different ones."""
    from intellagent_plugins.almita.similarity import chrf
    from tests.test_almita_metrics import DIFFERENT, EQUIVALENT

    same = [chrf(a, b) for a, b in EQUIVALENT]
    other = [chrf(a, b) for a, b in DIFFERENT]
    return (min(same), max(same)), (min(other), max(other))


def table(rows: list[dict]) -> list[str]:
    """The funnel as README shows it (stage, generated, removed by rules, kept), up to the first
    stage that keeps nothing."""
    lines = [f"{'stage':<20} {'generated':>9}  {'removed by rules':<22} {'kept':>4}"]
    for r in rows:
        lines.append(f"{r['stage']:<20} {r['generated']:>9}  {r['by_rule']:<22} {r['kept']:>4}".rstrip())
        if not r["kept"]:
            break
    return lines


def through(rows: list[dict]) -> str:
    return " → ".join(f"{r['kept']} {r['stage']}" for r in rows)


def readme_figures() -> list[str]:
    """What README quotes: the schema mock's funnel table, the script's funnel, chrF's ranges."""
    (same_lo, same_hi), (other_lo, other_hi) = chrf_ranges()
    return [*table(funnel()), f"the run goes through: {through(funnel('tests.almita_script:answer'))}",
            f"equivalent ({same_lo:.2f}–{same_hi:.2f}) and different ({other_lo:.2f}–{other_hi:.2f})"]


def main() -> None:
    print("1. funnel on mock/schema:")
    for line in table(funnel()):
        print("   " + line)
    print("2. funnel with tests/almita_script.py (mock/function):")
    print("   " + through(funnel("tests.almita_script:answer")))
    (same_lo, same_hi), (other_lo, other_hi) = chrf_ranges()
    print(f"3. chrF: equivalent replies {same_lo:.2f}–{same_hi:.2f}, different replies {other_lo:.2f}–{other_hi:.2f}")
    print("README's figures:")
    for line in readme_figures():
        print("  " + line)


if __name__ == "__main__":
    main()
