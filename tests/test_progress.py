"""Progress a person can follow: on a terminal a display redrawn in place that leaves nothing
behind; without one a plain line at a fixed interval; ``--quiet`` only the summary; and a final
table whose figures are each step's own (cost, retries, infra errors)."""

from __future__ import annotations

import io
import os
import re
import select
import subprocess
import sys
import time

import pyte

from intellagent.cli import cli
from intellagent.environment import load_environment
from intellagent.events import ModelCall
from intellagent.llm.errors import ServerError
from intellagent.progress import Progress
from intellagent.registry import load_registry
from intellagent.testing.harness import run_pipeline
from intellagent_plugins.providers.mock import FunctionModel
from tests import progress_steps
from tests.conftest import REPO

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
COLUMNS, LINES = 140, 30


def screen_of(raw: bytes | str) -> list[str]:
    """What a terminal shows after ``raw`` was written to it: its non-empty lines."""
    screen = pyte.Screen(COLUMNS, LINES)
    stream = pyte.ByteStream(screen)
    stream.feed(raw if isinstance(raw, bytes) else raw.replace("\n", "\r\n").encode())
    return [line.rstrip() for line in screen.display if line.strip()]


def table(text: str) -> dict[str, list[str]]:
    """The final table's rows by step: items, not ok, elapsed, cost, retries, infra errors."""
    lines = [line for line in text.splitlines() if line.strip()]
    start = next(i for i, line in enumerate(lines) if line.split()[:2] == ["step", "items"])
    rows = {}
    for line in lines[start + 1:]:
        cells = line.split()
        if len(cells) != 7 or "/" not in cells[1]:
            break
        rows[cells[0]] = cells[1:]
    return rows


def call(stage: str, *, cost: float = 0.0, attempts: int = 1, outcome: str = "ok") -> ModelCall:
    return ModelCall(stage=stage, role="default", model="m", kind="structured", item=None,
                     cached=False, attempts=attempts, outcome=outcome, prompt_tokens=10,
                     completion_tokens=5, cost_usd=cost, started=time.time(), seconds=0.1)


# -- a terminal ----------------------------------------------------------------------------------

def test_on_a_terminal_a_long_single_item_shows_its_cost_retries_and_errors_and_nothing_is_left():
    out = io.StringIO()
    from rich.console import Console

    console = Console(file=out, force_terminal=True, width=COLUMNS, color_system=None)
    progress = Progress({"graph": ["ok"], "dialogs": ["ok"]}, console=console)
    progress.start()
    progress.expect("graph", 1)
    progress.step_started("graph")
    # the graph step is one long item: its calls are what moves
    progress.call(call("graph", cost=0.01), "")
    progress.call(call("graph", cost=0.02, attempts=3), "")
    progress.call(call("graph", attempts=2, outcome="infra-error"), "")
    progress._live.refresh()
    drawn = screen_of(out.getvalue())
    [graph] = [line for line in drawn if "graph" in line]
    assert "0/1" in graph and "eta -:--:--" in graph
    assert "$0.0300 retries 3 infra errors 1" in graph
    progress.tick("graph", "infra-error", "")  # its call's failure already counted it
    progress.step_done("graph")
    progress.expect("dialogs", 4)
    progress.step_started("dialogs")
    for item in ("D0", "D1"):
        progress.tick("dialogs", "ok", item)
    progress.tick("dialogs", "infra-error", "D2")  # failed without a failed model call (the agent)
    progress._live.refresh()
    drawn = screen_of(out.getvalue())
    [dialogs] = [line for line in drawn if line.lstrip(" ⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏✓").startswith("dialogs")]
    assert "3/4" in dialogs and re.search(r"eta \d:\d\d:\d\d", dialogs) and "infra errors 1" in dialogs
    assert any("graph" in line and "done in" in line and "infra errors 1" in line for line in drawn)
    progress.finish()
    shown = screen_of(out.getvalue())
    assert not any("eta" in line or "━" in line for line in shown), shown  # the display is erased
    rows = table("\n".join(shown))
    assert rows["graph"] == ["1/1", "1", rows["graph"][2], "$0.0300", "3", "1"]
    assert rows["dialogs"][0] == "3/4" and rows["dialogs"][-1] == "1"


def test_a_run_on_a_pseudo_terminal_draws_progress_and_leaves_only_the_table_and_summary(shop, tmp_path):
    pipeline = progress_steps.write_pipeline(tmp_path, items=4, pause=0.4)
    script = (f"import sys; sys.path.insert(0, {str(REPO)!r}); from tests import progress_steps; "
              "from intellagent.cli import main; "
              f"sys.argv = ['intellagent', 'run', {str(shop)!r}, '--pipeline', {str(pipeline)!r}, "
              f"'--workspace', {str(tmp_path / 'ws')!r}]; "
              "import intellagent.cli as c; c.cli(obj={'plugins': (progress_steps.plugin(),)})")
    master, slave = os.openpty()
    import fcntl
    import struct
    import termios
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", LINES, COLUMNS, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR", "TERM")}
    proc = subprocess.Popen([sys.executable, "-c", script], stdin=slave, stdout=slave, stderr=slave,
                            env={**env, "TERM": "xterm"}, cwd=tmp_path)
    os.close(slave)
    raw = b""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:  # the other end closed
                break
            if not data:
                break
            raw += data
        elif proc.poll() is not None:
            break
    proc.wait(timeout=10)
    os.close(master)
    assert proc.returncode == 0, raw.decode(errors="replace")
    text = ANSI.sub("", raw.decode(errors="replace"))
    # while it ran: the bars, with the figures, redrawn in place
    assert re.search(r"dear\s+\S*━+\S* \d/4 \d:\d\d:\d\d eta \S+ \$\d\.\d{4} retries 0 infra errors 0", text), text
    assert "\x1b[2K" in raw.decode(errors="replace")  # erased and redrawn, not appended
    shown = screen_of(raw)
    assert not any("━" in line or " eta " in line for line in shown), shown
    assert shown[0].split()[:2] == ["step", "items"] and shown[-1].startswith("run ")
    assert set(table("\n".join(shown))) == {"numbers", "cheap", "dear"}


# -- no terminal ---------------------------------------------------------------------------------

def test_without_a_terminal_a_plain_line_every_interval_names_the_elapsed_time(runner, shop, tmp_path):
    pipeline = progress_steps.write_pipeline(tmp_path, items=4, pause=0.5)
    result = runner.invoke(cli, ["run", str(shop), "--pipeline", str(pipeline), "--workspace",
                                 str(tmp_path / "ws"), "--progress-every", "0.2"],
                           obj={"plugins": (progress_steps.plugin(),)})
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.stderr and "\r" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if " elapsed | " in line]
    assert lines, result.stderr
    for line in lines:
        assert re.match(r"\d:\d\d:\d\d elapsed \| ", line), line
        for part in line.split(" | ")[1:]:
            assert re.fullmatch(r"\w+ \d+/\d+ (done in \d:\d\d:\d\d|\d:\d\d:\d\d eta \S+) \$\d\.\d{4} "
                                r"retries \d+ infra errors \d+", part), part
    elapsed = [line.split()[0] for line in lines]
    assert elapsed == sorted(elapsed)
    assert set(table(result.stderr)) == {"numbers", "cheap", "dear"}


def test_quiet_prints_only_the_summary(runner, shop, tmp_path):
    pipeline = progress_steps.write_pipeline(tmp_path, items=2, pause=0.3)
    result = runner.invoke(cli, ["run", str(shop), "--pipeline", str(pipeline), "--workspace",
                                 str(tmp_path / "ws"), "--progress-every", "0.1", "--quiet"],
                           obj={"plugins": (progress_steps.plugin(),)})
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    assert result.stdout.startswith("run ") and "2 items" in result.stdout


def test_progress_every_is_bounded(runner, shop, tmp_path):
    result = runner.invoke(cli, ["run", str(shop), "--progress-every", "0", "--workspace", str(tmp_path)])
    assert result.exit_code == 2 and "--progress-every" in result.stderr


def test_plain_lines_stop_when_the_run_stops():
    out = io.StringIO()
    progress = Progress({"graph": ["ok"]}, out, every=0.05)
    progress.start()
    progress.expect("graph", 1)
    progress.step_started("graph")
    time.sleep(0.3)
    progress.close()
    written = out.getvalue()
    time.sleep(0.15)
    assert out.getvalue() == written and written.count("\n") >= 2
    assert all(line.startswith("0:00:00 elapsed | graph 0/1 0:00:00 eta -:--:-- $0.0000")
               for line in written.splitlines())


# -- the figures ---------------------------------------------------------------------------------

def test_a_steps_elapsed_time_ends_with_its_last_item_not_with_its_fan_out():
    out = io.StringIO()
    progress = Progress({"events": ["ok"], "dialogs": ["ok"]}, out)
    progress.expect("events", 2)
    progress.step_started("events")
    progress.tick("events", "ok", "E1")
    progress.tick("events", "ok", "E2")
    assert "done in 0:00:00" in progress.line()
    time.sleep(1.1)  # the dialogs of the same fan-out go on
    progress.step_done("events")  # told when the whole fan-out is done
    progress.finish()
    assert table(out.getvalue())["events"][2] == "0:00:00"


def test_the_final_table_gives_each_step_its_own_cost(shop, tmp_path):
    registry = load_registry(plugins=[progress_steps.plugin()])
    out = io.StringIO()
    result = run_pipeline(progress_steps.pipeline(items=3), load_environment(shop), registry=registry,
                          workspace=tmp_path, progress_stream=out)
    rows = table(out.getvalue())
    spent: dict[str, float] = {}
    for row in result.data.store.cost_summary(result.run_id):
        spent[row["stage"]] = spent.get(row["stage"], 0.0) + row["cost_usd"]
    assert spent["cheap"] > 0 and spent["dear"] > 2 * spent["cheap"]  # three calls an item, not one
    assert {name: cells[3] for name, cells in rows.items()} == {
        "numbers": "$0.0000", "cheap": f"${spent['cheap']:.4f}", "dear": f"${spent['dear']:.4f}"}
    assert rows["cheap"][:2] == ["3/3", "0"] and rows["dear"][:2] == ["3/3", "0"]


def test_retries_and_infra_errors_come_from_the_calls_as_they_end(shop, tmp_path):
    """Each first request fails once (a 500, retried); every request about number 0 always fails
    (an infra error after its retry)."""
    seen: set[str] = set()

    def flaky(request, response_model):
        text = request.messages[-1]["content"]
        if "number 0" in text or text not in seen:
            seen.add(text)
            raise ServerError("500 from server: busy")
        return {"text": "ok"}

    spec = progress_steps.pipeline(items=2)
    spec["llm"] = {"default": {"model": "mock/function", "options": {"function": "x:y"}},
                   "max_retries": 1, "backoff_base": 0.001, "backoff_max": 0.002}
    registry = load_registry(plugins=[progress_steps.plugin()])
    out = io.StringIO()
    run_pipeline(spec, load_environment(shop), registry=registry, workspace=tmp_path, progress_stream=out,
                 providers={"mock/function": FunctionModel(flaky)})
    rows = table(out.getvalue())
    # cheap: N0 fails after 1 retry, N1 answers after 1 → 2 retries, 1 infra error;
    # dear: 3 calls an item, likewise → 6 retries, 3 infra errors
    assert rows["cheap"][4:] == ["2", "1"] and rows["dear"][4:] == ["6", "3"]
