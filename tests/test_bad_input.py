"""Broken input of every kind gives one line naming the file and line (or the item), exit code 2,
and no traceback."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

from intellagent import hookimpl
from intellagent.cli import cli


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


def break_yaml(env):  # malformed YAML
    edit(env / "environment.yaml", "prompt: prompt.md", "prompt: [prompt.md")
    return "environment.yaml:", "invalid YAML"


def unknown_manifest_key(env):
    edit(env / "environment.yaml", "prompt: prompt.md", "prompt: prompt.md\npromt: x.md")
    return "environment.yaml:5", "unknown key 'promt'"


def wrong_type(env):
    edit(env / "environment.yaml", "version: 0.1.0", "version: [1, 2]")
    return "environment.yaml:2", "version"


def bad_name(env):
    edit(env / "environment.yaml", "name: shop", "name: Shop Env")
    return "environment.yaml:1", "should match pattern"


def duplicate_key(env):
    edit(env / "environment.yaml", "prompt: prompt.md", "prompt: prompt.md\nprompt: other.md")
    return "environment.yaml:", "duplicate key"


def missing_prompt(env):
    (env / "prompt.md").unlink()
    return "environment.yaml", "prompt file 'prompt.md' not found"


def prompt_outside_folder(env):
    edit(env / "environment.yaml", "prompt: prompt.md", "prompt: ../../../etc/passwd")
    return "environment.yaml", "points outside the environment folder"


def missing_manifest(env):
    (env / "environment.yaml").unlink()
    return "shop", "no environment.yaml in this folder"


def unknown_column_type(env):
    edit(env / "schema.yaml", "credit: {type: integer}", "credit: {type: money}")
    return "schema.yaml:8", "credit.type"


def primary_key_not_a_column(env):
    edit(env / "schema.yaml", "primary_key: order_id", "primary_key: id")
    return "schema.yaml:9", "primary_key 'id' is not a column"


def reference_to_unknown_table(env):
    edit(env / "schema.yaml", "references: customers.customer_id", "references: clients.id")
    return "schema.yaml:1", "references unknown table 'clients'"


def tool_without_implementation(env):
    edit(env / "tools.yaml", "    implementation: impl.py:get_customer\n", "")
    return "tools.yaml:2", "missing required key 'implementation'"


def implementation_missing(env):
    edit(env / "tools.yaml", "impl.py:get_customer", "impl.py:get_client")
    return "tools.yaml:4", "'impl.py' has no 'get_client'"


def implementation_file_missing(env):
    edit(env / "tools.yaml", "impl.py:add_credit", "nowhere.py:add_credit")
    return "tools.yaml:13", "Python file 'nowhere.py' not found"


def signature_differs(env):
    edit(env / "impl.py", "def add_credit(db, customer_id, amount):",
         "def add_credit(db, customer_id, credit):\n    amount = credit")
    return "tools.yaml:13", "'add_credit' does not match its spec: lacks amount; has credit"


def required_param_has_default(env):
    edit(env / "impl.py", "def get_customer(db, customer_id):", "def get_customer(db, customer_id=None):")
    return "tools.yaml:4", "gives required 'customer_id' a default"


def parameters_not_json_schema(env):
    edit(env / "tools.yaml", "amount: {type: integer, minimum: 1}", "amount: {type: integr}")
    return "tools.yaml:", "not a valid JSON Schema"


def tool_declared_twice(env):
    edit(env / "tools.yaml", "name: add_credit", "name: get_customer")
    return "tools.yaml:13", "tool 'get_customer' is declared twice"


def implementation_fails_to_import(env):
    (env / "impl.py").write_text("import does_not_exist\n")
    return "tools.yaml:4", "ModuleNotFoundError"


def validators_fail_to_import(env):
    (env / "validators.py").write_text("raise RuntimeError('oops')\n")
    return "environment.yaml", "validators: 'validators.py' failed to import: RuntimeError: oops"


def seed_violates_foreign_key(env):
    edit(env / "data" / "orders.jsonl", '"customer_id": "c2"', '"customer_id": "c9"')
    return "orders.jsonl: line 2", "refers to customers['c9'], which does not exist"


def seed_violates_validator(env):
    edit(env / "data" / "customers.json", '"credit": 0', '"credit": -5')
    return "data", "customers['c2']: credit must not be negative"


def seed_wrong_type(env):
    edit(env / "data" / "customers.json", '"credit": 10', '"credit": "ten"')
    return "customers.json: item 0", "column 'credit' expected integer"


def seed_enum_violation(env):
    edit(env / "data" / "customers.json", '"tier": "basic"', '"tier": "platinum"')
    return "customers.json: item 1", "'platinum' is not one of ['basic', 'gold']"


def seed_malformed_json(env):
    (env / "data" / "customers.json").write_text('[\n {"customer_id": "c1",\n]\n')
    return "customers.json:3", "invalid JSON"


def seed_bad_jsonl_line(env):
    with (env / "data" / "orders.jsonl").open("a") as fh:
        fh.write("{oops}\n")
    return "orders.jsonl:3", "invalid JSON"


def seed_csv_bad_integer(env):
    (env / "data" / "customers.json").unlink()
    (env / "data" / "customers.csv").write_text(
        "customer_id,name,tier,credit\nc1,Ana,gold,10\nc2,Bo,basic,lots\n")
    return "customers.csv:3", "'lots' is not a valid integer"


def seed_unknown_column(env):
    edit(env / "data" / "customers.json", '"credit": 0', '"credit": 0, "colour": "red"')
    return "customers.json: item 1", "unknown column 'colour'"


def seed_missing_key(env):
    edit(env / "data" / "orders.jsonl", '{"order_id": "o2", ', "{")
    return "orders.jsonl: line 2", "orders row has no 'order_id'"


def prompt_not_utf8(env):
    (env / "prompt.md").write_bytes(b"\xff\xfe Be kind.")
    return "prompt.md", "the prompt is not UTF-8 text"


def prompt_is_a_folder(env):
    (env / "prompt.md").unlink()
    (env / "prompt.md").mkdir()
    return "prompt.md", "the prompt is a folder, expected a Markdown file"


def tools_exit_at_import(env):
    (env / "impl.py").write_text("import sys\nsys.exit(1)\n")
    return "tools.yaml:4", "'impl.py' failed to import: it called sys.exit(1) while being imported"


def tools_interrupt_at_import(env):
    (env / "impl.py").write_text("raise KeyboardInterrupt\n")
    return "tools.yaml:4", "'impl.py' failed to import: it raised KeyboardInterrupt"


def required_names_no_parameter(env):
    edit(env / "tools.yaml", "required: [customer_id]", "required: [customer_id, custmer]")
    return "tools.yaml:5", "required names 'custmer', which is not among the properties"


def validator_crashes_on_seed(env):
    (env / "validators.py").write_text("from intellagent.environment import row_validator\n\n\n"
                                       "@row_validator('customers')\ndef boom(customer, db):\n"
                                       "    raise RuntimeError('validator bug')\n")
    return "data", "validator boom crashed: RuntimeError: validator bug"


def empty_prompt(env):
    (env / "prompt.md").write_text("  \n\n")
    return "shop/prompt.md", "the prompt is empty"


def empty_data_folder(env):
    for f in (env / "data").iterdir():
        f.unlink()
    return "environment.yaml:7", "seed folder 'data' holds no seed file for any table (expected customers.json"


def seed_file_for_no_table(env):
    (env / "data" / "ghosts.json").write_text("[]")
    return "data/ghosts.json", "seed file for a table the schema lacks: 'ghosts' (tables: customers, orders)"


def seed_mapping_names_no_table(env):
    edit(env / "environment.yaml", "seed: data", "seed: {customers: data/customers.json, ghosts: data/orders.jsonl}")
    return "environment.yaml:7", "seed names unknown table 'ghosts' (tables: customers, orders)"


def two_seed_files_for_one_table(env):
    (env / "data" / "customers.jsonl").write_text('{"customer_id": "c9", "name": "Z", "tier": "gold", "credit": 1}\n')
    return "shop/data", "two seed files for table 'customers': customers.json and customers.jsonl"


def seed_integer_past_64_bits(env):
    edit(env / "data" / "customers.json", '"credit": 10', '"credit": 100000000000000000000000')
    return "customers.json: item 0", "column 'credit' 100000000000000000000000 is out of range (integers are 64-bit)"


def seed_file_linked_outside_the_folder(env):
    elsewhere = env.parent / "elsewhere.json"
    (env / "data" / "customers.json").rename(elsewhere)
    (env / "data" / "customers.json").symlink_to(elsewhere)
    return "data/customers.json", "seed file points outside the environment folder"


def seed_gz_cut_short(env):
    import gzip
    whole = gzip.compress((env / "data" / "customers.json").read_bytes())
    (env / "data" / "customers.json").unlink()
    (env / "data" / "customers.json.gz").write_bytes(whole[: len(whole) // 2])
    return "customers.json.gz", "cannot read seed file: Compressed file ended before the end-of-stream"


def seed_gz_corrupt_inside(env):
    import gzip
    whole = bytearray(gzip.compress((env / "data" / "customers.json").read_bytes() * 20))
    whole[30:60] = b"\xff" * 30
    (env / "data" / "customers.json").unlink()
    (env / "data" / "customers.json.gz").write_bytes(bytes(whole))
    return "customers.json.gz", "cannot read seed file: Error -3 while decompressing data"


def seed_gz_bomb(env):
    import zlib
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)  # a gzip stream, written in pieces
    block = b" " * 10_000_000
    bomb = b"".join(packer.compress(block) for _ in range(11)) + packer.flush()
    (env / "data" / "customers.json").unlink()
    (env / "data" / "customers.json.gz").write_bytes(bomb)  # 107 KB, 110 MB decompressed
    return "customers.json.gz", "seed file holds more than 100,000,000 bytes once decompressed, past the bound"


def manifest_number_past_the_digit_limit(env):
    edit(env / "environment.yaml", "version: 0.1.0", "version: 0.1.0\nsize: " + "9" * 5000)
    return "environment.yaml:3", "invalid YAML: a number of 5,000 digits, past the bound of 4,300"


def seed_number_past_the_digit_limit(env):
    edit(env / "data" / "customers.json", '"credit": 10', '"credit": ' + "9" * 5000)
    return "customers.json:", "invalid JSON: a number of 5,000 digits, past the bound of 4,300"


def seed_json_nested_too_deeply(env):
    (env / "data" / "orders.jsonl").write_text('{"order_id": "o1", "customer_id": "c1", "items": '
                                              + "[" * 100_000 + "]" * 100_000 + "}\n")
    return "orders.jsonl:1", "invalid JSON: nested too deeply"


def seed_csv_row_longer_than_header(env):
    (env / "data" / "customers.json").unlink()
    (env / "data" / "customers.csv").write_text("customer_id,name,tier,credit\nc1,A,gold,1\nc2,B,basic,2,9\n")
    return "customers.csv:3", "1 more field(s) than the header names"


def seed_loader_gives_no_records(env):
    edit(env / "environment.yaml", "  seed: data\n", "  loader: rows.py:load\n")
    (env / "rows.py").write_text("def load():\n    return {'customers': {'c1': 5}}\n")
    return "environment.yaml", "seed loader rows.py:load must return {table: {key: record}}: customers['c1'] is a int"


def seed_loader_gives_a_table_the_schema_lacks(env):
    edit(env / "environment.yaml", "  seed: data\n", "  loader: rows.py:load\n")
    (env / "rows.py").write_text("def load():\n    return {'ghosts': {'g1': {}}}\n")
    return "environment.yaml", "gives rows for a table the schema lacks: 'ghosts'"


def empty_enum(env):
    edit(env / "schema.yaml", "enum: [basic, gold]", "enum: []")
    return "schema.yaml:7", "tables.customers.columns.tier.enum: List should have at least 1 item"


def tools_file_without_tools(env):
    (env / "tools.yaml").write_text("tools: []\n")
    return "tools.yaml:1", "lists no tool"


def tool_without_description(env):
    edit(env / "tools.yaml", "description: Look up a customer.", "description: '  '")
    return "tools.yaml:3", "a tool's description is what the agent knows of it: it cannot be empty"


def validator_with_the_wrong_signature(env):
    edit(env / "validators.py", "def credit_not_negative(customer, db):", "def credit_not_negative(customer):")
    return "environment.yaml:9", "validator credit_not_negative must take (record, db)"


def validators_file_without_validators(env):
    (env / "validators.py").write_text("LIMIT = 3\n")
    return "environment.yaml:9", "validators: 'validators.py' holds no function marked @row_validator"


def validator_that_returns_its_complaint(env):
    (env / "validators.py").write_text("from intellagent.environment import row_validator\n\n\n"
                                       "@row_validator('orders')\ndef gift_note(order, db):\n"
                                       "    return 'a gift needs a card' if order.get('note') == 'gift' else None\n")
    return "data", "orders['o2']: a gift needs a card"


def seed_primary_key_null(env):
    edit(env / "data" / "customers.json", '"customer_id": "c2"', '"customer_id": null')
    return "customers.json: item 1", "customers row's primary key 'customer_id' is null"


def seed_primary_key_of_another_type(env):
    edit(env / "data" / "customers.json", '"customer_id": "c2"', '"customer_id": 2')
    return "customers.json: item 1", "customers row's primary key 'customer_id' expected string, got int 2"


def prompt_past_its_bound(env):
    (env / "prompt.md").write_text("Be helpful. " * 90_000)
    return "shop/prompt.md", "the prompt is 1,080,000 characters, past the bound of 1,000,000"


def tool_description_past_its_bound(env):
    edit(env / "tools.yaml", "description: Look up a customer.", "description: " + "x" * 1_000_001)
    return "tools.yaml:3", "tools[0].description: String should have at most 1000000 characters"


def schema_without_tables(env):
    (env / "schema.yaml").write_text("tables: {}\n")
    return "schema.yaml:1", "tables: Dictionary should have at least 1 item"


SILENT_CASES = [empty_prompt, empty_data_folder, seed_file_for_no_table, seed_mapping_names_no_table,
                two_seed_files_for_one_table, seed_integer_past_64_bits, seed_json_nested_too_deeply,
                seed_csv_row_longer_than_header, seed_loader_gives_no_records,
                seed_loader_gives_a_table_the_schema_lacks, empty_enum, tools_file_without_tools,
                tool_without_description, validator_with_the_wrong_signature,
                validators_file_without_validators, validator_that_returns_its_complaint,
                seed_primary_key_null, seed_primary_key_of_another_type, prompt_past_its_bound,
                tool_description_past_its_bound, schema_without_tables,
                manifest_number_past_the_digit_limit, seed_number_past_the_digit_limit,
                seed_file_linked_outside_the_folder, seed_gz_cut_short, seed_gz_corrupt_inside,
                seed_gz_bomb]


@pytest.mark.parametrize("case", SILENT_CASES, ids=lambda c: c.__name__)
def test_what_used_to_be_accepted_or_crash_is_refused_by_validate_and_run(case, shop, runner, tmp_path):
    where, what = case(shop)
    assert_one_clean_line(runner.invoke(cli, ["validate", str(shop)]), where, what)
    result = runner.invoke(cli, ["run", str(shop), "--events", "2", "--workspace", str(tmp_path / "ws")])
    assert_one_clean_line(result, where, what)
    assert not (tmp_path / "ws").exists()


def test_a_data_folder_may_hold_other_files_beside_every_tables_own(shop, runner, tmp_path):
    """τ-bench keeps its task files beside its data; --data takes such a folder. When a table
    has no file, a stray file is likely its own, misnamed: refused."""
    data = tmp_path / "theirs"
    shutil.copytree(shop / "data", data)
    (data / "tasks_test.json").write_text("[]")
    assert runner.invoke(cli, ["validate", str(shop), "--data", str(data)]).exit_code == 0
    (data / "orders.jsonl").rename(data / "order.jsonl")
    result = runner.invoke(cli, ["validate", str(shop), "--data", str(data)])
    assert_one_clean_line(result, "theirs/order.jsonl", "seed file for a table the schema lacks: 'order' "
                          "(tables: customers, orders; no file for orders)")


CASES = [prompt_not_utf8, prompt_is_a_folder, tools_exit_at_import, tools_interrupt_at_import,
         required_names_no_parameter, break_yaml, unknown_manifest_key, wrong_type, bad_name, duplicate_key, missing_prompt,
         prompt_outside_folder, missing_manifest, unknown_column_type, primary_key_not_a_column,
         reference_to_unknown_table, tool_without_implementation, implementation_missing,
         implementation_file_missing, signature_differs, required_param_has_default,
         parameters_not_json_schema, tool_declared_twice, implementation_fails_to_import,
         validators_fail_to_import, seed_violates_foreign_key, seed_violates_validator,
         seed_wrong_type, seed_enum_violation, seed_malformed_json, seed_bad_jsonl_line,
         seed_csv_bad_integer, seed_unknown_column, seed_missing_key]


def assert_one_clean_line(result, where: str, what: str, *, lines_allowed: int = 1) -> None:
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    lines = result.stderr.strip().splitlines()
    assert 1 <= len(lines) <= lines_allowed, result.stderr
    assert "Traceback" not in result.output
    assert lines[0].startswith("error: ")
    assert where in lines[0], lines[0]
    assert what in lines[0], lines[0]


@pytest.mark.parametrize("case", CASES + [validator_crashes_on_seed],
                         ids=[c.__name__ for c in CASES + [validator_crashes_on_seed]])
def test_broken_environment(case, shop, runner):
    where, what = case(shop)
    result = runner.invoke(cli, ["validate", str(shop)])
    # validate lists every problem, one line each (a validator crashes once per seed row)
    assert_one_clean_line(result, where, what, lines_allowed=20 if case is validator_crashes_on_seed else 1)


@pytest.mark.parametrize("case", [validator_crashes_on_seed, tools_exit_at_import, prompt_not_utf8],
                         ids=lambda c: c.__name__)
def test_run_refuses_what_validate_refuses_before_any_model_call(case, shop, runner, tmp_path):
    where, what = case(shop)
    result = runner.invoke(cli, ["run", str(shop), "--events", "2", "--workspace", str(tmp_path / "ws")])
    assert_one_clean_line(result, where, what)
    assert not (tmp_path / "ws").exists()  # refused before the run began: nothing paid for


def test_the_intact_environment_validates(shop, runner):
    result = runner.invoke(cli, ["validate", str(shop)])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "ok: shop 0.1.0 (2 tools, 2 tables, 1 validators)"


def test_missing_folder(runner, tmp_path):
    result = runner.invoke(cli, ["validate", str(tmp_path / "nope" / "env")])
    assert_one_clean_line(result, "nope/env", "environment folder not found")


def test_unknown_environment_name(runner):
    result = runner.invoke(cli, ["validate", "no-such-env"])
    assert_one_clean_line(result, "", "no environment named 'no-such-env'")


@pytest.mark.parametrize("name", ["../escape", "/abs/path", "a/b", "Upper", "x" * 80, ".hidden"])
def test_new_env_refuses_unsafe_names(name, runner, tmp_path):
    result = runner.invoke(cli, ["new-env", name, "--dir", str(tmp_path)])
    assert_one_clean_line(result, "new-env NAME", "invalid environment name")
    assert list(tmp_path.iterdir()) == []


def test_new_env_refuses_a_non_empty_folder(runner, tmp_path):
    (tmp_path / "shop").mkdir()
    (tmp_path / "shop" / "keep.txt").write_text("mine")
    result = runner.invoke(cli, ["new-env", "shop", "--dir", str(tmp_path)])
    assert_one_clean_line(result, "shop", "folder exists and is not empty")


def _plugin(name, **hooks):
    module = types.ModuleType(name)
    for hook, fn in hooks.items():
        setattr(module, hook, hookimpl(fn))
    return module


def test_duplicate_plugin_names(runner, tmp_path):
    one = _plugin("acme", register_environments=lambda register: register("airline", tmp_path))
    two = _plugin("acme_fork", register_environments=lambda register: register("acme/airline", tmp_path))
    result = runner.invoke(cli, ["envs"], obj={"plugins": (one, two), "entry_points": False})
    assert_one_clean_line(result, "", "environment 'acme/airline' is registered twice: by acme and by acme_fork")


def test_two_plugins_with_one_module_name(runner, tmp_path):
    one = _plugin("acme", register_environments=lambda register: register("a", tmp_path))
    two = _plugin("acme", register_environments=lambda register: register("b", tmp_path))
    result = runner.invoke(cli, ["envs"], obj={"plugins": (one, two), "entry_points": False})
    assert_one_clean_line(result, "", "plugin registered twice: Plugin name already registered: acme")


def test_misspelled_hook(runner):
    bad = _plugin("typo", register_enviroments=lambda register: None)
    result = runner.invoke(cli, ["plugins"], obj={"plugins": (bad,), "entry_points": False})
    assert_one_clean_line(result, "", "unknown hook 'register_enviroments'")


def test_plugin_command_clashing_with_a_builtin(runner):
    import click

    clash = _plugin("clash", register_commands=lambda register: register(click.Command("envs")))
    result = runner.invoke(cli, ["plugins"], obj={"plugins": (clash,), "entry_points": False})
    assert result.exit_code == 0  # listing is fine; the clash only matters if it would shadow
    assert "registers command clash/envs" in result.output


def test_plugin_that_fails_to_import_names_itself(tmp_path):
    """Black box: an installed distribution whose entry point cannot be imported: one warning
    naming it, and the command goes on without it (tests/test_broken_plugins.py)."""
    dist = tmp_path / "site" / "brokenplug-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: brokenplug\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[intellagent]\nbroken = brokenplug_missing.plugin\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "site"))
    proc = subprocess.run([sys.executable, "-m", "intellagent", "envs"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert "plugin 'broken' (brokenplug_missing.plugin) of brokenplug 1.0 failed to " \
           "import: ModuleNotFoundError" in lines[0] and "going on without it" in lines[0]


def test_console_shows_no_traceback_for_bad_yaml(shop):
    edit(shop / "environment.yaml", "prompt: prompt.md", "prompt: [prompt.md")
    proc = subprocess.run([sys.executable, "-m", "intellagent", "validate", str(shop)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert f"{shop / 'environment.yaml'}:" in proc.stderr


PIPELINE = Path(__file__).resolve().parent.parent / "plugins" / "intellagent" / "pipeline.yaml"


@pytest.mark.parametrize("text,where,what", [
    ("- a\n- b\n", "p.yaml:1", "a pipeline is a mapping (steps:, agent:, llm:, metrics:, report:, seed:), not a list"),
    ("steps: 5\n", "p.yaml:1", "steps: Input should be a valid dictionary"),
    ("stages: 5\n", "p.yaml:1", "this is the old pipeline format"),
    (PIPELINE.read_text().replace("  specs: {use: weighted-walk, from: graph, with: {events: 30, complexity: [2, 11]}}",
                                  "  specs: null"), "p.yaml:9", "steps.specs: Input should be a valid dictionary"),
    (PIPELINE.read_text().replace("verdicts: {use: policy-critic, each: dialogs, from: events}",
                                  "verdicts: {use: tau-bench/state, each: dialogs, from: events}"),
     "p.yaml:12", "'events' gives Event, which no input of 'tau-bench/state' takes"),
    (PIPELINE.read_text().replace("events: {use: symbolic-events, each: specs, from: graph}",
                                  "events: {use: tau-bench/task-events, each: specs}"),
     "p.yaml:10", "'specs' gives EventSpec, which no input of 'tau-bench/task-events' takes"),
], ids=["list", "steps-5", "stages", "step-null", "tau-critic-on-events", "tau-events-on-walk"])
def test_broken_pipelines_fail_before_any_model_call(text, where, what, runner, tmp_path):
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(text)
    result = runner.invoke(cli, ["run", "education", "--pipeline", str(pipeline), "--events", "3",
                                 "--workspace", str(tmp_path / "ws")])
    assert_one_clean_line(result, where, what)
    assert not (tmp_path / "ws").exists()


def test_workspaces_that_cannot_be(runner, tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    result = runner.invoke(cli, ["run", "education", "--events", "2", "--workspace", str(afile / "ws")])
    assert_one_clean_line(result, "afile/ws", "cannot make the workspace: a part of its path is a file")
    result = runner.invoke(cli, ["run", "education", "--events", "2", "--workspace", str(afile)])
    assert_one_clean_line(result, "afile", "the workspace is a file, expected a folder")
    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    (corrupt / "intellagent.db").write_bytes(b"not a database at all" * 100)
    for command in (["run", "education", "--events", "2"], ["cost"], ["report"]):
        result = runner.invoke(cli, [*command, "--workspace", str(corrupt)])
        assert_one_clean_line(result, "corrupt/intellagent.db", "not a usable IntellAgent store: file is not a database")


def test_data_folders_that_cannot_be(runner, tmp_path):
    (tmp_path / "empty").mkdir()
    result = runner.invoke(cli, ["run", "airline", "--events", "2", "--data", str(tmp_path / "empty"),
                                 "--workspace", str(tmp_path / "ws")])
    assert_one_clean_line(result, "empty", "data folder holds no seed file for any table")
    result = runner.invoke(cli, ["run", "education", "--events", "2", "--data", str(tmp_path / "empty"),
                                 "--workspace", str(tmp_path / "ws")])
    assert_one_clean_line(result, "education/environment.yaml", "--data given, but environment 'education' has no database")


def test_report_format_must_name_a_reporter(runner, tmp_path):
    assert runner.invoke(cli, ["run", "education", "--events", "2", "--workspace", str(tmp_path)]).exit_code == 0
    result = runner.invoke(cli, ["report", "--format", "html,weighted-walk", "--workspace", str(tmp_path)])
    assert_one_clean_line(result, "--format", "'weighted-walk' is a sampler, not a reporter (reporters: apigen-mt/export, csv, html, json, junit)")


def test_a_folder_does_not_hide_an_installed_environment_of_that_name(runner, tmp_path, shop, monkeypatch):
    plugin = _plugin("acme", register_environments=lambda register: register("shop", shop))
    project = tmp_path / "here"
    (project / "shop" / "src").mkdir(parents=True)  # as `new-env shop` leaves it, beside the install
    monkeypatch.chdir(project)
    result = runner.invoke(cli, ["validate", "shop"], obj={"plugins": (plugin,)})
    assert result.exit_code == 0 and result.stdout.startswith("ok: shop"), result.output
    made = runner.invoke(cli, ["new-env", "garage", "--dir", str(project)])
    assert made.exit_code == 0
    result = runner.invoke(cli, ["validate", "garage"])  # not installed: say where it is
    assert_one_clean_line(result, "garage", "no environment.yaml in this folder (it holds garage/src/garage/environment")


def test_a_function_model_that_does_not_import(runner, tmp_path):
    result = runner.invoke(cli, ["run", "education", "--events", "2", "--workspace", str(tmp_path / "ws"),
                                 "--set", "llm.default={model: mock/function, options: {function: 'nosuch_mod:fn'}}"])
    assert_one_clean_line(result, "model mock/function", "module 'nosuch_mod' failed to import")


def test_validate_checks_settings_given_without_a_pipeline_on_the_one_run_would_use(runner):
    """`validate ENV --set ...` without --pipeline checked nothing of the settings and said ok: a
    setting run would refuse passed. Now it is checked on the pipeline `run ENV` uses."""
    bad = runner.invoke(cli, ["validate", "airline", "--set", "llm.default.temperature=9"])
    assert_one_clean_line(bad, "llm.default.temperature", "less than or equal to 2")
    assert runner.invoke(cli, ["run", "airline", "--events", "1", "--set", "llm.default.temperature=9",
                               "--estimate"]).exit_code == 2  # as run refuses it
    good = runner.invoke(cli, ["validate", "airline", "--model", "mock/schema"])
    assert good.exit_code == 0, good.output
    assert "mock/schema" in good.output  # the roles it resolved, as with --pipeline


def test_a_seed_file_linked_inside_the_folder_or_a_data_flag_anywhere_is_read(shop, runner, tmp_path):
    """Only a link out of the environment's own folder is refused: one to a file inside it is
    read, and --data is the user's own folder, links and all."""
    (shop / "data" / "customers.json").rename(shop / "customers-v2.json")
    (shop / "data" / "customers.json").symlink_to(shop / "customers-v2.json")
    assert runner.invoke(cli, ["validate", str(shop)]).exit_code == 0
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "customers.json").symlink_to(shop / "customers-v2.json")
    shutil.copy(shop / "data" / "orders.jsonl", theirs / "orders.jsonl")
    result = runner.invoke(cli, ["validate", str(shop), "--data", str(theirs)])
    assert result.exit_code == 0, result.output
