"""intellagent compare: the same events, two agents: items reused, outcome changes per item, and
every rate's change with Newcombe's 95 % interval, in the terminal and as HTML."""

from __future__ import annotations


from intellagent.cli import cli
from intellagent.metrics import difference


def test_the_difference_interval_is_newcombes():
    # Newcombe (1998), example (a): 56/70 against 48/80, hybrid score interval 0.0524 to 0.3339
    d, low, high = difference((48, 80), (56, 70))
    assert round(d, 4) == 0.2 and (round(low, 4), round(high, 4)) == (0.0524, 0.3339)
    assert difference((0, 0), (3, 4)) is None


def test_two_agents_on_the_same_events(runner, tmp_path):
    ws = ["--workspace", str(tmp_path)]
    first = runner.invoke(cli, ["run", "airline", "--events", "12", *ws])
    second = runner.invoke(cli, ["run", "airline", "--events", "12", "--set", "llm.roles.agent.model=mock/schema",
                                 "--set", "llm.roles.agent.options.tool_call_rate=0.9", *ws])
    assert first.exit_code == second.exit_code == 0
    run_a, run_b = (r.stdout.split()[1].rstrip(":") for r in (first, second))
    result = runner.invoke(cli, ["compare", run_a, run_b, *ws])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "reused from A: graph 1/1, specs 1/1, events 12/12, dialogs 0/12, verdicts 0/12" in out
    lines = out.splitlines()
    success = next(l for l in lines if l.startswith("success: "))
    assert "→" in success and "Δ" in success and "pp [" in success
    assert any(l.startswith("by-category [category ") for l in lines)
    assert any(l.startswith("policies [id P") for l in lines)  # per-policy violation rates
    changed = [l for l in lines if l.startswith("  E0")]
    header = next(l for l in lines if l.startswith("outcome changed for "))
    assert int(header.split()[3]) == len(changed)  # 12 events: every change is listed
    html = (tmp_path / "runs" / f"compare-{run_a}-{run_b}.html").read_text()
    assert "IntellAgent comparison" in html and "id=deltas" in html and "src=" not in html
    same = runner.invoke(cli, ["compare", run_a, run_a, *ws])
    assert "outcome changed for 0 item(s)" in same.stdout and "Δ +0 pp" in same.stdout
