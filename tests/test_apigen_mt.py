"""APIGen-MT: stage 1 on hand-written good and bad blueprints per domain, the committee's
majority vote, the feedback loop (accept after one revision, give up after the bound),
recombination (a conflicting pair rejected, a compatible pair replaying to the right end state),
the best-of-N user, and the whole pipeline offline: on mock/schema, and with a mock/function
generator proposing real actions from the sampled records, through trajectories with the oracle
agent, pass^k, both exports, and the exported tasks run by the τ-bench pipeline."""

from __future__ import annotations

import asyncio
import json
import re
import zlib

import pytest

from intellagent.agent import Agent, AgentTurn
from intellagent.cli import cli
from intellagent.environment import load_environment
from intellagent.errors import ConfigError
from intellagent.testing.harness import run_pipeline, run_step
from intellagent_plugins.apigen_mt.artefacts import (Blueprint, BlueprintContext,
                                                     BlueprintResult, BlueprintTask, BlueprintTaskEvent,
                                                     BlueprintTaskSpec, Call, Pair, Review, Trajectory)
from intellagent_plugins.apigen_mt.committee import CommitteeConfig, decide
from intellagent_plugins.apigen_mt.generator import BlueprintConfig, GenerateBlueprint
from intellagent_plugins.apigen_mt.graph import ApiGraphExtractor, GraphConfig
from intellagent_plugins.apigen_mt.recombine import Recombine
from intellagent_plugins.apigen_mt.samplers import BlueprintContexts, ContextConfig, load_examples
from intellagent_plugins.apigen_mt.simulator import BestOfNConfig, BestOfNUser
from intellagent_plugins.apigen_mt.validation import Draft, DraftAction, validate
from intellagent_plugins.dialogue.scenario import Action
from intellagent_plugins.dialogue.state import replayed_hash
from intellagent_plugins.tau_bench.artefacts import TaskEvent, TaskSpec, TauTask
from intellagent_plugins.tau_bench.steps import TauState
from tests.conftest import REPO
from intellagent_plugins.reporters.writers import read_report

ENVS = {d: load_environment(REPO / "environments" / d) for d in ("retail", "airline")}


def draft(user, instruction, *actions, outputs=(), thought="a plan"):
    return Draft(thought=thought, user_id=user, instruction=instruction, outputs=list(outputs),
                 actions=[DraftAction(name=n, arguments=a if isinstance(a, str) else json.dumps(a))
                          for n, a in actions])


def as_draft(b: Blueprint) -> Draft:
    return draft(b.user_id, b.instruction, *[(a.name, a.arguments) for a in b.actions],
                 outputs=b.outputs, thought=b.thought or "a plan")


UMAR = "umar_lindqvist_2413"       # retail: #W9082175 pending, #W9791481 delivered
BILAL = "bilal_rossi_1543"         # retail: #W8004081 pending, #W7405739 cancelled
BAD = {
    "retail": [
        (draft(UMAR, "", ("cancel_pending_order", {"order_id": "#W9082175", "reason": "ordered by mistake"})),
         "format", "missing-part"),
        (draft(UMAR, "Cancel it.", ("cancel_pending_order", "{'order_id': '#W9082175'}")),
         "format", "invalid-json"),
        (draft(UMAR, "Cancel it.", ("cancel_order", {"order_id": "#W9082175"})), "execution", "unknown-tool"),
        (draft(UMAR, "Cancel it.", ("cancel_pending_order", {"order_id": 9082175, "reason": "ordered by mistake"})),
         "execution", "bad-arguments"),
        (draft(UMAR, "Cancel it.", ("cancel_pending_order", {"order_id": "#W9791481", "reason": "no longer needed"})),
         "execution", "refused"),  # a delivered order: the tool refuses
        (draft(BILAL, "Return it.", ("return_delivered_order_items", {
            "order_id": "#W7405739", "item_ids": ["6120227330"], "payment_method_id": "paypal_8751043"})),
         "execution", "refused"),  # a cancelled order cannot be returned
        (draft(UMAR, "Cancel it and tell me the total.",
               ("cancel_pending_order", {"order_id": "#W9082175", "reason": "no longer needed"}),
               outputs=["999.99"]), "execution", "unsupported-output"),
        (draft(UMAR, "Cancel Bilal's order.",
               ("cancel_pending_order", {"order_id": "#W8004081", "reason": "no longer needed"})),
         "policy", "own-orders"),  # the user must be the owner of the order
        (draft(UMAR, "Talk to a person, then cancel.", ("transfer_to_human_agents", {"summary": "wants a person"}),
               ("cancel_pending_order", {"order_id": "#W9082175", "reason": "no longer needed"})),
         "policy", "transfer-ends"),
        (draft(UMAR, "You are Umar. Ask for nothing.", ("find_user_id_by_email", {"email": "umar.lindqvist623@example.com"})),
         "execution", "tests-nothing"),  # read-only, no output: an agent that does nothing passes it
        (draft(UMAR, "Talk to a person.", ("find_user_id_by_email", {"email": "umar.lindqvist623@example.com"}),
               ("transfer_to_human_agents", {"summary": "wants a person"})),
         "execution", "tests-nothing"),  # the state critic cannot see a transfer
    ],
    "airline": [
        (draft("elif_petrov_3918", "Cancel JEPK7J.", ("cancel_reservation", {"reservation_id": "JEPK7J"})),
         "policy", "cancel-eligibility"),  # economy, uninsured, booked two weeks ago
        (draft("elif_nguyen_7629", "Fewer bags.", ("update_reservation_baggages", {
            "reservation_id": "34AKLP", "total_baggages": 1, "nonfree_baggages": 0,
            "payment_id": "credit_card_5546825"})), "policy", "bags-only-added"),
        (draft("elif_petrov_3918", "Cancel TK96J9.", ("cancel_reservation", {"reservation_id": "TK96J9"})),
         "policy", "own-reservations"),  # another customer's reservation
        (draft("elif_nguyen_7629", "Pay with a card I do not have.", ("update_reservation_baggages", {
            "reservation_id": "34AKLP", "total_baggages": 4, "nonfree_baggages": 3,
            "payment_id": "credit_card_0000000"})), "execution", "refused"),
        (draft("elif_nguyen_7629", "Bags.", ("update_reservation_baggages", {"reservation_id": "34AKLP"})),
         "execution", "bad-arguments"),
    ],
}


PATCHES = {  # per shipped example: a line its diff patch must hold, and how many fields change
    "retail": [('~ orders[#W9082175].status: "pending" → "cancelled"', 3),
               ('~ orders[#W9704088].return_items: null → ["5859455048"]', 3)],
    "airline": [('~ reservations[TK96J9].status: null → "cancelled"', 2),
                ("~ reservations[34AKLP].total_baggages: 3 → 4", 3)],
}


@pytest.mark.parametrize("domain", sorted(BAD))
def test_good_blueprints_pass_stage_one(domain):
    env = ENVS[domain]
    examples = load_examples(None, domain)
    assert len(examples) == len(PATCHES[domain])
    for example, (line, fields) in zip(examples, PATCHES[domain]):
        blueprint, problems, execution = validate(env, as_draft(example))
        assert problems == [], problems
        lines = execution.diff.splitlines()
        assert line in lines and len(lines) == fields, execution.diff
        target = next(v for a in example.actions for k, v in a.arguments.items()
                      if env.tools[a.name].spec.action and k.endswith("_id") and k != "payment_id")
        assert all(f"[{target}]." in x for x in lines)  # only the record the write names changed
        execution.close()


def test_a_read_only_task_with_an_expected_output_is_checkable():
    read = draft(UMAR, "You are Umar. Ask for the status of order #W9082175.",
                 ("find_user_id_by_email", {"email": "umar.lindqvist623@example.com"}),
                 ("get_order_details", {"order_id": "#W9082175"}), outputs=["pending"])
    _, problems, execution = validate(ENVS["retail"], read)
    assert problems == [] and execution.diff == "(no change)"
    execution.close()


@pytest.mark.parametrize("domain,case", [(d, i) for d in sorted(BAD) for i in range(len(BAD[d]))])
def test_bad_blueprints_are_rejected_with_the_right_reason(domain, case):
    bad, stage, reason = BAD[domain][case]
    _, problems, execution = validate(ENVS[domain], bad)
    execution.close()
    assert problems, "accepted"
    assert (problems[0].stage, problems[0].reason) == (stage, reason), problems
    if stage == "policy":
        assert "rule '" in problems[0].message  # the feedback names the rule


def review(*scores, reason="r"):
    return Review(**{m: {"score": s, "reason": f"{reason} {m}"} for m, s in
                     zip(("correctness", "completeness", "satisfaction", "creativity"), scores)})


def test_committee_majority_vote_and_threshold():
    config = CommitteeConfig()
    votes, problems, _ = decide(config, [review(1, 1, 1, 0), review(1, 0, 1, 0), review(1, 1, 0, 0)])
    assert votes == {"correctness": 1, "completeness": 1, "satisfaction": 1, "creativity": 0} and not problems
    votes, problems, feedback = decide(config, [review(1, 0, 1, 1), review(1, 0, 1, 1, reason="x"), review(1, 1, 1, 1)])
    assert votes["completeness"] == 0 and [p.reason for p in problems] == ["completeness"]
    assert "r completeness" in feedback and "x completeness" in feedback
    # a tie fails; a required metric fails the task even when the count is reached
    votes, problems, _ = decide(CommitteeConfig(members=["reviewer"] * 2), [review(1, 1, 1, 1), review(0, 1, 1, 1)])
    assert votes["correctness"] == 0 and problems[0].reason == "correctness"
    _, problems, _ = decide(CommitteeConfig(threshold=1, required=["creativity"]), [review(1, 1, 1, 0)])
    assert [p.reason for p in problems] == ["creativity"]


def context(domain="retail", user=UMAR):
    return BlueprintContext(id="B000", user_id=user, write_tools=["cancel_pending_order"])


GOOD = as_draft(load_examples(None, "retail")[0])


def test_feedback_loop_accepts_after_one_revision(scripted_llm):
    weak = GOOD.model_copy(update={"instruction": "Cancel my order."})
    llm, model = scripted_llm(weak, review(1, 0, 1, 1, reason="no order id"), review(1, 0, 1, 1),
                              review(1, 1, 1, 1), GOOD, review(1, 1, 1, 1), review(1, 1, 1, 0), review(1, 1, 1, 1))
    out = asyncio.run(run_step(GenerateBlueprint(BlueprintConfig()), ENVS["retail"], llm=llm, context=context()))
    result = out.value
    assert result.status == "accepted" and len(result.attempts) == 2 and not result.first_try
    assert result.attempts[0].stage == "committee" and result.blueprint.instruction == GOOD.instruction
    seen_by_reviewer = model.history[1].messages[-1]["content"]
    assert '~ orders[#W9082175].status: "pending" → "cancelled"' in seen_by_reviewer  # the diff patch
    assert "cancel_pending_order" in seen_by_reviewer and "Cancel my order." in seen_by_reviewer
    revise = model.history[4].messages[-1]["content"]
    assert "no order id completeness" in revise and "Cancel my order." in revise
    assert {s.name: s.status for s in out.scores if s.name != "rejection"} == {"blueprint": "pass", "blueprint-first": "fail"}
    [rejection] = [s for s in out.scores if s.name == "rejection"]
    assert rejection.labels["stage"] == "committee" and rejection.labels["reason"] == ["completeness"]


def test_stage_one_failures_are_fed_back_and_fixed(scripted_llm):
    broken = GOOD.model_copy(update={"actions": [DraftAction(name="cancel_order", arguments="{}")]})
    llm, model = scripted_llm(broken, GOOD, *[review(1, 1, 1, 1)] * 3)
    result = asyncio.run(run_step(GenerateBlueprint(BlueprintConfig()), ENVS["retail"], llm=llm,
                                  context=context())).value
    assert result.status == "accepted" and [a.stage for a in result.attempts] == ["execution", None]
    assert "unknown-tool" in model.history[1].messages[-1]["content"]


def test_feedback_loop_gives_up_after_the_bound(scripted_llm):
    reject = [review(0, 0, 1, 1)] * 3
    llm, model = scripted_llm(GOOD, *reject, GOOD, *reject, GOOD, *reject)
    config = BlueprintConfig(review_rounds=1)
    out = asyncio.run(run_step(GenerateBlueprint(config), ENVS["retail"], llm=llm, context=context()))
    assert out.value.status == "rejected" and len(out.value.attempts) == 2
    assert len(model.history) == 8 and len(model.queue) == 4  # no third version was asked for
    assert out.scores[0].labels["stage"] == "committee" and out.status == "fail"
    assert out.note.startswith("rejected at committee (completeness, correctness) after 2 version(s)")


def accepted(id, user, *actions, outputs=()):
    b = Blueprint(thought="t", user_id=user, instruction=f"instruction {id}",
                  actions=[Call(name=n, arguments=a) for n, a in actions], outputs=list(outputs))
    return BlueprintResult(id=id, status="accepted", blueprint=b)


FIND_UMAR = ("find_user_id_by_email", {"email": "umar.lindqvist623@example.com"})
CANCEL = accepted("B001", UMAR, FIND_UMAR, ("cancel_pending_order", {"order_id": "#W9082175", "reason": "no longer needed"}))


def test_recombination_rejects_a_conflicting_pair(scripted_llm):
    address = accepted("B002", UMAR, FIND_UMAR, ("modify_pending_order_address", {
        "order_id": "#W9082175", "address1": "1 Elm St", "address2": "", "city": "Austin", "state": "TX",
        "country": "USA", "zip": "78701"}))
    for other in (address,):
        assert not validate(ENVS["retail"], as_draft(other.blueprint))[1]  # each part alone is fine
    llm, model = scripted_llm()
    out = asyncio.run(run_step(Recombine(BlueprintConfig()), ENVS["retail"], llm=llm,
                               pair=Pair(id="C000", user_id=UMAR, first=CANCEL, second=address)))
    result = out.value
    assert result.status == "rejected" and result.attempts[0].stage == "conflict"
    assert {p.reason for p in result.attempts[0].problems} >= {"one-final-action-per-order", "pending-only"}
    assert model.history == []  # rejected before any model call


STATUS = accepted("B004", UMAR, FIND_UMAR, ("get_order_details", {"order_id": "#W9082175"}), outputs=["pending"])


def test_recombination_rejects_an_output_the_first_part_made_stale(scripted_llm):
    """Cancel #W9082175, then ask its status: the status read now says "cancelled", so the
    second part's "pending" is no longer supported."""
    assert not validate(ENVS["retail"], as_draft(STATUS.blueprint))[1]  # alone it is fine
    llm, model = scripted_llm()
    result = asyncio.run(run_step(Recombine(BlueprintConfig()), ENVS["retail"], llm=llm,
                                  pair=Pair(id="C002", user_id=UMAR, first=CANCEL, second=STATUS))).value
    assert result.status == "rejected" and result.attempts[0].stage == "conflict"
    [problem] = result.attempts[0].problems
    assert problem.reason == "unsupported-output" and problem.message.startswith("B004: output 'pending'")
    # the status read follows the cancellation, so it is made again; the repeated look-up is not
    assert [a.name for a in result.attempts[0].blueprint.actions] == [
        "find_user_id_by_email", "cancel_pending_order", "get_order_details"]
    assert model.history == []


def test_recombination_keeps_an_output_read_before_a_later_change(scripted_llm):
    """Ask the status ("pending"), then cancel: the agent says "pending" before it cancels."""
    llm, model = scripted_llm({"thought": "both", "instruction": "You are Umar; ask, then cancel."},
                              *[review(1, 1, 1, 1)] * 3)
    result = asyncio.run(run_step(Recombine(BlueprintConfig()), ENVS["retail"], llm=llm,
                                  pair=Pair(id="C003", user_id=UMAR, first=STATUS, second=CANCEL))).value
    assert result.status == "accepted" and result.blueprint.outputs == ["pending"]
    assert [a.name for a in result.blueprint.actions] == ["find_user_id_by_email", "get_order_details",
                                                         "cancel_pending_order"]


def test_recombination_rejects_a_pair_that_undoes_itself(scripted_llm):
    """Two address changes that end where the data started: the combined task changes nothing
    and expects nothing. (The second alone would fail stage 1; this is the safety net for write
    pairs that cancel out.)"""
    env = ENVS["retail"]
    db = env.seed_database()
    address = dict(db.get("users", UMAR)["address"])
    db.close()
    new = {**address, "address1": "12 New Street"}
    there = accepted("B005", UMAR, FIND_UMAR, ("modify_user_address", {"user_id": UMAR, **new}))
    back = accepted("B006", UMAR, FIND_UMAR, ("modify_user_address", {"user_id": UMAR, **address}))
    assert not validate(env, as_draft(there.blueprint))[1]
    llm, model = scripted_llm()
    result = asyncio.run(run_step(Recombine(BlueprintConfig()), env, llm=llm,
                                  pair=Pair(id="C004", user_id=UMAR, first=there, second=back))).value
    assert result.status == "rejected" and [p.reason for p in result.attempts[0].problems] == ["tests-nothing"]
    assert result.attempts[0].stage == "conflict" and model.history == []


def test_recombination_accepts_a_compatible_pair_that_replays_to_both_end_states(scripted_llm):
    ret = accepted("B003", UMAR, FIND_UMAR, ("get_order_details", {"order_id": "#W9791481"}),
                   ("return_delivered_order_items", {"order_id": "#W9791481", "item_ids": ["5075738317"],
                                                     "payment_method_id": "credit_card_2438892"}),
                   outputs=["195.66"])
    llm, model = scripted_llm({"thought": "both", "instruction": "You are Umar; cancel one, return another."},
                              *[review(1, 1, 1, 1)] * 3)
    result = asyncio.run(run_step(Recombine(BlueprintConfig()), ENVS["retail"], llm=llm,
                                  pair=Pair(id="C001", user_id=UMAR, first=CANCEL, second=ret))).value
    assert result.status == "accepted" and result.parts == ["B001", "B003"]
    combined = result.blueprint
    assert [a.name for a in combined.actions] == ["find_user_id_by_email", "cancel_pending_order",
                                                  "get_order_details", "return_delivered_order_items"]
    assert combined.outputs == ["195.66"] and combined.instruction.startswith("You are Umar")
    env = ENVS["retail"]
    db = env.seed_database()
    for part in (CANCEL, ret):
        for a in part.blueprint.actions:
            assert not env.tools[a.name].call(db, a.arguments).error
    actions = [Action(name=a.name, arguments=a.arguments) for a in combined.actions]
    assert replayed_hash(env, [], actions) == db.hash() != env.seed_database().hash()


def test_graph_and_contexts_on_both_domains():
    for domain, env in ENVS.items():
        graph = asyncio.run(run_step(ApiGraphExtractor(GraphConfig()), env))
        g = graph.to_networkx()
        writes = set(graph.write_tools)
        assert writes and all(not g.has_edge("transfer_to_human_agents", n) for n in g.nodes)
        assert any(g.has_edge(r, w) for r in g.nodes if r not in writes for w in writes)
        contexts = asyncio.run(run_step(BlueprintContexts(ContextConfig(blueprints=12, user_pool=3)), env,
                                        graph=graph))
        assert len(contexts) == 12 and len({c.user_id for c in contexts}) <= 3
        for c in contexts:
            assert all(w in writes for w in c.write_tools)
            if c.samplers["data"]:
                assert c.user_id in c.data[graph.subject]
                assert len(json.dumps(c.data)) <= 6000 + 4000
        assert len({tuple(c.write_tools) for c in contexts}) > 3  # the walk spreads over the write tools
        assert len({c.persona for c in contexts}) > 3
    retail = asyncio.run(run_step(ApiGraphExtractor(GraphConfig()), ENVS["retail"]))
    assert ("get_order_details", "cancel_pending_order") in {(e.a, e.b) for e in retail.edges}
    assert ("cancel_pending_order", "return_delivered_order_items") not in {(e.a, e.b) for e in retail.edges}


class Silent(Agent):
    async def step(self, messages, tools):
        return AgentTurn(content="How can I help?")


def test_best_of_n_user_asks_the_judge_and_keeps_its_pick(scripted_llm):
    turn = lambda m, stop="continue": {"thought": "t", "message": m, "stop": stop, "reason": ""}
    llm, model = scripted_llm(turn("I want everything, my id is X and Y and Z."), turn("Hi, I need help with an order."),
                              {"best": 2, "reason": "reveals step by step"},
                              turn("bye", "success"), turn("bye", "success"))
    event = TaskEvent.of(TaskSpec(id="T000-0", task=TauTask(index=0, instruction="You want to cancel an order.")))
    out = asyncio.run(run_step(BestOfNUser(BestOfNConfig(candidates=2)), ENVS["retail"], llm=llm,
                               agent=lambda gt: Silent(None, None), scenario=event))
    dialog = out.value
    assert isinstance(dialog, Trajectory) and dialog.stop_reason == "success"
    assert dialog.turns[0].content == "Hi, I need help with an order."
    assert [m["role"] for m in dialog.messages] == ["system", "user", "assistant"]
    assert "Choose" not in model.history[2].messages[0]["content"] and "reveals" not in dialog.turns[0].content
    samples = [r.sample for r in model.history[:2]]  # the two candidates: two draws, one question
    assert model.history[0].messages == model.history[1].messages and len(set(samples)) == 2
    assert len(model.history) == 5  # the identical closing candidates needed no judge


def test_best_of_n_users_judge_prompt_is_read_from_its_prompts_folder(scripted_llm, tmp_path):
    """The step's prompts: folder replaced its persona but never the judge's prompt, read from
    the package whatever the folder held."""
    builtin = REPO / "plugins" / "apigen_mt" / "prompts" / "user_judge.md"
    (tmp_path / "user_judge.md").write_text(builtin.read_text() + "\nOURS: prefer the shorter candidate.\n")
    turn = lambda m, stop="continue": {"thought": "t", "message": m, "stop": stop, "reason": ""}
    llm, model = scripted_llm(turn("I want everything."), turn("Hi, I need help with an order."),
                              {"best": 2, "reason": "shorter"}, turn("bye", "success"), turn("bye", "success"))
    event = TaskEvent.of(TaskSpec(id="T000-0", task=TauTask(index=0, instruction="You want to cancel an order.")))
    asyncio.run(run_step(BestOfNUser(BestOfNConfig(candidates=2, prompts=str(tmp_path))), ENVS["retail"],
                         llm=llm, agent=lambda gt: Silent(None, None), scenario=event))
    assert "OURS: prefer the shorter candidate." in json.dumps(model.history[2].messages)


def test_best_of_n_user_never_chooses_from_fewer_candidates_than_asked():
    from intellagent.llm import LLM
    from intellagent.llm.errors import ServerError
    from intellagent.pipeline import LLMSettings, ModelSettings
    from intellagent_plugins.providers.mock import FunctionModel

    def reply(request, model):
        if request.sample == "candidate-1":  # the endpoint fails one candidate of the first turn
            raise ServerError("HTTP 500: the server had an error")
        return {"thought": "t", "message": "Hi, I need help with an order.", "stop": "continue", "reason": ""}

    llm = LLM(LLMSettings(default=ModelSettings(model="test/fn"), max_retries=0),
              providers={"test/fn": FunctionModel(reply)})
    event = TaskEvent.of(TaskSpec(id="T000-0", task=TauTask(index=0, instruction="You want to cancel an order.")))
    out = asyncio.run(run_step(BestOfNUser(BestOfNConfig(candidates=3)), ENVS["retail"], llm=llm,
                               agent=lambda gt: Silent(None, None), scenario=event))
    assert out.status == "infra-error" and out.value.stop_reason == "infra-error"
    assert "500" in out.value.error and not out.value.turns  # not played on with two candidates


@pytest.mark.parametrize("domain", ["retail", "airline"])
def test_pipeline_runs_offline_on_the_schema_mock(tmp_path, domain):
    result = run_pipeline("apigen-mt", ENVS[domain], workspace=tmp_path,
                          overrides=[("steps.contexts.with.blueprints", 4, "test")])
    metrics = result.report.metrics
    assert metrics["acceptance"].values["n"] == 4
    assert sum(r["n"] for r in metrics["funnel"].rows if r["stage"].startswith("rejected")) + \
        metrics["funnel"].values["accepted at the first version"] + metrics["funnel"].values["accepted after revision"] == 4
    assert (tmp_path / "runs" / result.run_id / "apigen" / "tasks.json").is_file()


# --- a generator that proposes real actions from the sampled records ------------------------

def fake_model(request, response_model):
    """mock/function: the generator reads the user's records in its prompt and proposes a real
    task (cancel a pending order, else return an item of a delivered one); the committee
    approves; the user states the instruction and stops when served."""
    name = getattr(response_model, "__name__", "")
    text = "\n".join(str(m.get("content")) for m in request.messages)
    if name == "Draft":
        user = re.search(r"The task is for the user (\S+)\.", text).group(1)
        record = json.loads(re.search(rf"- users\[{re.escape(user)}\]: (.*)", text).group(1))
        orders = [json.loads(m) for m in re.findall(r"- orders\[[^\]]+\]: (.*)", text)]
        orders = [o for o in orders if o["user_id"] == user]
        pending = [o for o in orders if o["status"] == "pending"]
        delivered = [o for o in orders if o["status"] == "delivered"]
        lookup = {"name": "find_user_id_by_email", "arguments": json.dumps({"email": record["email"]})}
        wanted = re.search(r"Make it use these write tools: (.*)\.", text)
        returns = bool(wanted and re.search(r"return|exchange", wanted.group(1)))
        pick = zlib.crc32(text.encode())  # a different record for a different context
        tools = wanted.group(1) if wanted else ""
        address = {**record["address"], "address1": "12 New Street"}
        if "modify_user_address" in tools:
            actions = [lookup, {"name": "modify_user_address", "arguments": json.dumps({"user_id": user, **address})}]
            instruction = f"You are {user} ({record['email']}). Your default address is now 12 New Street."
        elif "modify_pending_order_address" in tools and pending:
            order = pending[pick % len(pending)]
            actions = [lookup, {"name": "modify_pending_order_address", "arguments": json.dumps(
                {"order_id": order["order_id"], **address})}]
            instruction = f"You are {user} ({record['email']}). Ship order {order['order_id']} to 12 New Street."
        elif pending and not (returns and delivered):
            order = pending[pick % len(pending)]
            actions = [lookup, {"name": "cancel_pending_order", "arguments": json.dumps(
                {"order_id": order["order_id"], "reason": "no longer needed"})}]
            instruction = f"You are {user} ({record['email']}). Cancel order {order['order_id']}: no longer needed."
        elif delivered:
            order = delivered[pick % len(delivered)]
            item = order["items"][0]
            actions = [lookup, {"name": "return_delivered_order_items", "arguments": json.dumps(
                {"order_id": order["order_id"], "item_ids": [item["item_id"]],
                 "payment_method_id": order["payment_history"][0]["payment_method_id"]})}]
            instruction = f"You are {user} ({record['email']}). Return the {item['name']} of order {order['order_id']}."
        else:
            actions, instruction = [lookup], f"You are {user}. Ask for nothing."
        return {"thought": "from the records", "user_id": user, "instruction": instruction,
                "actions": actions, "outputs": []}
    if name == "Review":
        return review(1, 1, 1, 1).model_dump()
    if name == "CombinedInstruction":
        parts = re.findall(r"(?:First|Second) task: (.*)", text)
        return {"thought": "both", "instruction": " Then: ".join(parts)}
    if name == "UserTurn":
        first = len(request.messages) <= 2
        goal = request.messages[0]["content"]
        return {"thought": "t", "message": goal.split("Your goal:")[-1].strip()[:300] if first else "Thanks, bye.",
                "stop": "continue" if first else "success", "reason": ""}
    if name == "Choice":
        return {"best": 1, "reason": "first"}
    return "Done."


def test_end_to_end_with_a_real_generator_the_oracle_and_the_tau_bench_pipeline(runner, tmp_path):
    ws = tmp_path / "ws"
    args = ["run", "retail", "--pipeline", "apigen-mt", "--workspace", str(ws), "--agent", "tau-oracle",
            "--set", "llm.default.model=mock/function",
            "--set", "llm.default.options.function=tests.test_apigen_mt:fake_model",
            "--blueprints", "8", "--trials", "2", "--pairs", "2",
            "--set", "steps.contexts.with.user_pool=2", "--set", "steps.dialogs.with.candidates=2"]
    result = runner.invoke(cli, args)
    assert result.exit_code == 0, result.output + str(result.exception)
    run = next((ws / "runs").glob("*/report.json")).parent
    report = read_report((run / "report.json"))
    m = report["metrics"]
    assert m["acceptance"]["values"]["with"] == 1.0
    funnel = m["funnel"]["values"]
    assert funnel["combined tasks attempted"] == 2 and funnel["combined tasks accepted"] >= 1
    combined = [i for i in report["items"] if i["step"] == "combined"]
    for item in combined:  # a pair is rejected only as a conflict of the rules
        assert item["status"] == "pass" or item["note"].startswith("rejected at conflict"), item["note"]
    tasks = funnel["tasks"]
    assert tasks == funnel["blueprints generated"] + funnel["combined tasks accepted"] \
        - funnel["duplicate tasks dropped"] > 3
    assert funnel["successful trajectories"] == funnel["trajectories (trials)"] == 2 * tasks
    assert funnel["unique successful trajectories (kept)"] == tasks  # the oracle repeats itself
    assert m["pass-hat-k"]["values"] == {"pass^1": 1.0, "pass^2": 1.0}
    assert m["turns"]["values"]["mean"] == 1.0
    assert [r["passed"] for r in m["tasks"]["rows"]] == [2] * tasks

    exported = json.loads((run / "apigen" / "tasks.json").read_text())
    assert len(exported) == tasks and {t["kind"] for t in exported} == {"single", "combined"}
    chat = [json.loads(line) for line in (run / "apigen" / "trajectories.openai.jsonl").read_text().splitlines()]
    plain = [json.loads(line) for line in (run / "apigen" / "trajectories.jsonl").read_text().splitlines()]
    assert len(chat) == len(plain) == tasks
    for example, row in zip(chat, plain):
        roles = [msg["role"] for msg in example["messages"]]
        assert roles[0] == "system" and roles[1] == "user" and roles[-1] == "assistant" and "tool" in roles
        calls = [c for msg in example["messages"] for c in msg.get("tool_calls", [])]
        assert calls and all(c["type"] == "function" and json.loads(c["function"]["arguments"]) is not None for c in calls)
        tool_ids = {msg["tool_call_id"] for msg in example["messages"] if msg["role"] == "tool"}
        assert tool_ids == {c["id"] for c in calls}
        assert {t["function"]["name"] for t in example["tools"]} == set(ENVS["retail"].tools)
        assert row["task_id"] in {t["index"] for t in exported} and row["blueprint"]
        assert [m["role"] for m in row["messages"]] == roles

    again = runner.invoke(cli, ["run", "retail", "--pipeline", "tau-bench", "--tasks", str(run / "apigen" / "tasks.json"),
                                "--agent", "tau-oracle", "--workspace", str(tmp_path / "tau")])
    assert again.exit_code == 0, again.output
    tau = read_report(next((tmp_path / "tau").glob("runs/*/report.json")))
    assert tau["outcomes"] == {"pass": tasks}


# --- scripted agents that are not the oracle ----------------------------------------------

def cancel_model(request, response_model):
    """mock/function: as ``fake_model``, except that every blueprint cancels one of the user's
    pending orders and asks what was paid for it (an expected output), so that a scripted agent
    can read the task from the user's first message."""
    if getattr(response_model, "__name__", "") != "Draft":
        return fake_model(request, response_model)
    text = "\n".join(str(m.get("content")) for m in request.messages)
    user = re.search(r"The task is for the user (\S+)\.", text).group(1)
    record = json.loads(re.search(rf"- users\[{re.escape(user)}\]: (.*)", text).group(1))
    orders = [json.loads(m) for m in re.findall(r"- orders\[[^\]]+\]: (.*)", text)]
    pending = [o for o in orders if o["user_id"] == user and o["status"] == "pending"]
    lookup = {"name": "find_user_id_by_email", "arguments": json.dumps({"email": record["email"]})}
    if not pending:
        return {"thought": "t", "user_id": user, "instruction": f"You are {user}. Ask for nothing.",
                "actions": [lookup], "outputs": []}
    chosen = pending[zlib.crc32(text.encode()) % len(pending)]
    order, paid = chosen["order_id"], chosen["payment_history"][0]["amount"]
    return {"thought": "t", "user_id": user, "outputs": [str(paid)],
            "instruction": f"You are {user} ({record['email']}). Cancel order {order}: no longer needed. "
                           "Ask how much you had paid for it.",
            "actions": [lookup, {"name": "get_order_details", "arguments": json.dumps({"order_id": order})},
                        {"name": "cancel_pending_order", "arguments": json.dumps(
                            {"order_id": order, "reason": "no longer needed"})}]}


STYLES = {}  # order → conversations started (the "varied" agent alternates its wording)


def scripted_agent(messages, tools, *, say=True, reason="no longer needed", transfer=False, varied=False):
    """Reads the user's first message (email, order), looks the user and the order up, cancels
    it, and says what was paid. ``say=False`` never says it; ``reason`` may be the wrong one;
    ``transfer`` hands over to a human after saying it; ``varied`` words its reply one of two
    ways, in turn per conversation about the same order (as a sampling model would)."""
    first = messages[1]["content"]
    email = re.search(r"\((\S+@\S+)\)", first).group(1)
    order = re.search(r"#W\d+", first).group(0)
    results = [m for m in messages if m["role"] == "tool"]
    calls = [c for m in messages if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    style = int(calls[0]["id"].split("_")[1]) if calls else (STYLES.setdefault(order, 0) % 2 if varied else 0)
    if not calls and varied:
        STYLES[order] += 1
    plan = [("find_user_id_by_email", {"email": email}), ("get_order_details", {"order_id": order}),
            ("cancel_pending_order", {"order_id": order, "reason": reason})]
    if len(results) < len(plan):
        name, args = plan[len(results)]
        return {"content": None, "tool_calls": [{"id": f"call_{style}_{len(results)}", "name": name, "arguments": args}]}
    paid = json.loads(results[1]["content"])["payment_history"][0]["amount"]
    reply = (f"Order {order} is cancelled." + (f" You had paid {paid}." if say else "")) if style == 0 \
        else (f"Done: {order} is cancelled" + (f", and the {paid} you paid will be refunded." if say else "."))
    if transfer:
        return {"content": reply, "tool_calls": [{"id": f"call_{style}_9", "name": "transfer_to_human_agents",
                                                   "arguments": {"summary": "cancelled an order"}}]}
    return reply


def careful_agent(messages, tools):
    return scripted_agent(messages, tools)


def varied_agent(messages, tools):
    return scripted_agent(messages, tools, varied=True)


def mute_agent(messages, tools):
    return scripted_agent(messages, tools, say=False)


def wrong_reason_agent(messages, tools):
    return scripted_agent(messages, tools, reason="ordered by mistake")


def transfer_agent(messages, tools):
    return scripted_agent(messages, tools, transfer=True)


def run_apigen(runner, ws, *extra, agent="tau-oracle", blueprints=3, trials=2, pairs=0, model="fake_model"):
    if agent.endswith("_agent"):
        extra = (*extra, "--set", f"agent.with.callable=tests.test_apigen_mt:{agent}")
        agent = "python"
    args = ["run", "retail", "--pipeline", "apigen-mt", "--workspace", str(ws), "--agent", agent,
            "--set", "llm.default.model=mock/function",
            "--set", f"llm.default.options.function=tests.test_apigen_mt:{model}",
            "--blueprints", str(blueprints), "--trials", str(trials), "--pairs", str(pairs), *extra]
    result = runner.invoke(cli, args)
    assert result.exit_code == 0, result.output + str(result.exception)
    run = next((ws / "runs").glob("*/report.json")).parent
    report = read_report((run / "report.json"))
    exported = [json.loads(line) for line in (run / "apigen" / "trajectories.jsonl").read_text().splitlines()]
    return report, exported


def crashing_agent(messages, tools):
    raise RuntimeError("agent bug")


def test_a_crashing_agent_fails_every_trial_and_nothing_is_exported(runner, tmp_path):
    report, exported = run_apigen(runner, tmp_path / "ws", agent="crashing_agent")
    verdicts = [i for i in report["items"] if i["step"] == "verdicts"]
    assert verdicts and {v["status"] for v in verdicts} == {"agent-error"}
    assert all(v["note"] == "the agent failed: RuntimeError: agent bug" for v in verdicts)
    m = report["metrics"]
    assert m["success"]["values"]["rate"] == 0.0 and m["success"]["values"]["n"] == len(verdicts)
    assert set(m["pass-hat-k"]["values"].values()) == {0.0}
    assert m["funnel"]["values"]["successful trajectories"] == 0
    assert exported == []


def verdicts_of(report):
    return [(i["item"], i["status"], i["note"]) for i in report["items"] if i["step"] == "verdicts"]


def test_an_agent_that_never_says_the_expected_output_fails_and_is_not_exported(runner, tmp_path):
    report, exported = run_apigen(runner, tmp_path / "ws", agent="mute_agent", model="cancel_model", blueprints=8)
    verdicts = verdicts_of(report)
    assert len(verdicts) >= 4 and all(status == "fail" and note.startswith("the agent never said '")
                                      for _, status, note in verdicts), verdicts
    assert report["metrics"]["success"]["values"]["rate"] == 0.0 and exported == []
    careful, exported = run_apigen(runner, tmp_path / "ok", agent="careful_agent", model="cancel_model", blueprints=8)
    assert {status for _, status, _ in verdicts_of(careful)} == {"pass"}  # the same actions, and it says it
    assert len(exported) == len(verdicts) // 2  # two identical trials of each task: one kept


def test_the_export_keeps_only_passing_trials_that_end_with_the_agents_reply(runner, tmp_path):
    report, exported = run_apigen(runner, tmp_path / "wrong", agent="wrong_reason_agent", model="cancel_model",
                                  blueprints=8)
    verdicts = verdicts_of(report)
    assert verdicts and all(status == "fail" and "final database differs" in note for _, status, note in verdicts)
    assert exported == [] and report["metrics"]["funnel"]["values"]["unique successful trajectories (kept)"] == 0
    # right actions, the output said, then a transfer: a pass, but the dialog ends with a tool result
    report, exported = run_apigen(runner, tmp_path / "transfer", agent="transfer_agent", model="cancel_model",
                                  blueprints=8)
    funnel = report["metrics"]["funnel"]["values"]
    assert {status for _, status, _ in verdicts_of(report)} == {"pass"}
    assert funnel["unique successful trajectories"] == funnel["tasks"] > 0
    assert exported == [] and funnel["unique successful trajectories (kept)"] == 0


def test_different_successful_trajectories_of_a_task_are_each_kept_and_repeats_dropped(runner, tmp_path):
    STYLES.clear()
    report, exported = run_apigen(runner, tmp_path / "ws", agent="varied_agent", model="cancel_model",
                                  blueprints=8, trials=3)
    funnel = report["metrics"]["funnel"]["values"]
    tasks = funnel["tasks"]
    assert tasks >= 2 and funnel["successful trajectories"] == 3 * tasks
    assert funnel["unique successful trajectories (kept)"] == 2 * tasks  # wording A, B, A: two kept
    assert [r["unique"] for r in report["metrics"]["tasks"]["rows"]] == [2] * tasks
    by_task = {}
    for row in exported:
        by_task.setdefault(row["task_id"], []).append(row)
    assert len(exported) == 2 * tasks and all(len(rows) == 2 for rows in by_task.values())
    signatures = {}  # task → the signature of each trial, in trial order
    for item in sorted(report["items"], key=lambda i: i["item"]):
        if item["step"] == "verdicts":
            [score] = [x for x in item["scores"] if x["name"] == "task"]
            signatures.setdefault(score["labels"]["task"], []).append(score["labels"]["signature"])
    for task, rows in by_task.items():
        a, b = (r["messages"][-1]["content"] for r in rows)
        firsts = [trial for trial, sig in enumerate(signatures[task]) if sig not in signatures[task][:trial]]
        assert a != b and [r["trial"] for r in rows] == firsts  # the first trial of each kind


def test_the_state_critic_fails_an_agent_crash_on_a_task_that_changes_nothing():
    """Whatever stage 1 lets through: a crash is never a pass, even when the database is as the
    ground truth leaves it."""
    from intellagent_plugins.apigen_mt.critic import TrajectoryState

    env = ENVS["retail"]
    task = BlueprintTask(index=0, instruction="Ask for nothing.", blueprint="B0",
                         actions=[{"name": FIND_UMAR[0], "kwargs": FIND_UMAR[1]}])
    event = BlueprintTaskEvent.of(BlueprintTaskSpec(id="T000-0", task=task), blueprint="B0")
    db = env.seed_database()
    dialog = Trajectory(id="T000-0", stop_reason="agent-error", error="RuntimeError: agent bug", final_hash=db.hash())
    db.close()
    for critic in (TrajectoryState(None), TauState(None)):
        out = asyncio.run(run_step(critic, env, scenario=event, dialog=dialog))
        assert out.status == "agent-error" and out.value.status == "agent-error"
        assert out.scores[0].name == "task" and out.scores[0].status == "agent-error"
    dialog.stop_reason = "success"
    assert asyncio.run(run_step(TauState(None), env, scenario=event, dialog=dialog)).status == "pass"


@pytest.mark.parametrize("entries,message", [
    ([{"user_id": UMAR, "instruction": "Cancel it."}], f"entry 1 of 1 (user {UMAR}): missing required key 'actions'"),
    ([{"instruction": "x", "actions": [{"name": "a"}]}, {"instruction": "y", "actions": [{"kwargs": {}}]}],
     "entry 2 of 2: actions[0]: missing required key 'name'"),
    ([{"instruction": "x", "actions": [{"name": "a"}], "outputs": [1.5]}], "entry 1 of 1: outputs[0]: Input should be a valid string"),
    (["a task"], "entry 1 of 1: expected a JSON object"),
    ({"tasks": []}, "expected a JSON list of tasks"),
])
def test_a_bad_examples_file_is_one_line_naming_the_file_and_entry_before_any_model_call(runner, tmp_path, entries, message):
    examples = tmp_path / "examples.json"
    examples.write_text(json.dumps(entries))
    ws = tmp_path / "ws"
    result = runner.invoke(cli, ["run", "retail", "--pipeline", "apigen-mt", "--workspace", str(ws),
                                 "--set", f"steps.contexts.with.examples={examples}"])
    assert result.exit_code == 2, result.output
    assert f"{examples}: {message}" in result.output and "steps.contexts.with.examples" in result.output
    assert len(result.output.strip().splitlines()) == 1 and "internal error" not in result.output
    assert not list(ws.glob("runs/*"))  # refused with the pipeline: no step ran, no model was asked
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_examples(str(examples), "retail")


def test_forbid_refuses_a_tool_the_environment_does_not_have(runner, tmp_path):
    ws = tmp_path / "ws"
    result = runner.invoke(cli, ["run", "retail", "--pipeline", "apigen-mt", "--workspace", str(ws),
                                 "--set", 'steps.graph.with.forbid=[["cancel_pending_order", "return_order"]]'])
    assert result.exit_code == 2, result.output
    assert "steps.graph.with.forbid: 'return_order' is not a tool of 'retail'" in result.output
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output
    graph = asyncio.run(run_step(ApiGraphExtractor(GraphConfig(forbid=[("get_order_details", "cancel_pending_order")])),
                                 ENVS["retail"]))  # a known pair is honoured
    assert ("get_order_details", "cancel_pending_order") not in {(e.a, e.b) for e in graph.edges}


def test_bad_input_is_one_clean_line(runner, tmp_path):
    result = runner.invoke(cli, ["run", "education", "--pipeline", "apigen-mt", "--workspace", str(tmp_path)])
    assert result.exit_code == 2 and "needs an environment with a database and write tools" in result.output
    assert "Traceback" not in result.output
    bad = tmp_path / "p.yaml"
    bad.write_text((REPO / "plugins/apigen_mt/pipeline.yaml").read_text().replace(
        "blueprints: {use: blueprint, each: contexts}",
        "blueprints: {use: blueprint, each: contexts, with: {committee: {members: [judge]}}}"))
    result = runner.invoke(cli, ["validate", str(bad)])
    assert result.exit_code == 2 and "'judge' is not a committee role" in result.output and "p.yaml" in result.output
