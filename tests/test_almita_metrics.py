"""ALMITA's seven metrics on hand-made tests with analytically known results, the critic's
comparison of actions, and the default reply scorer (chrF) and its threshold."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from intellagent_plugins.almita.artefacts import Action, Prediction, TestCase, TestVerdict
from intellagent_plugins.almita.critic import AlmitaCritic, CriticConfig, judge, same_arguments
from intellagent_plugins.almita.metrics import AlmitaMetrics, SevenConfig, seven_metrics, unscored_conversations
from intellagent_plugins.almita.similarity import BUILTIN, chrf, scorer

SCORE, THRESHOLD = BUILTIN["chrf"]

# --- hand-made tests: 3 conversations, 6 reply tests and 5 API tests ------------------------------

REPLIES = ["What is your order id?", "Your order was lost; shall I refund it?", "Done: 129 dollars refunded.",
           "Which item arrived damaged?", "A replacement or a refund?", "The claim is CL-0001."]


def _tests() -> list[TestCase]:
    plan = [  # (conversation, expected)
        ("c1", Action(kind="reply", text=REPLIES[0])),
        ("c1", Action(kind="api", api="get_order", arguments={"order_id": "LH-1002"})),
        ("c1", Action(kind="reply", text=REPLIES[1])),
        ("c1", Action(kind="api", api="refund_order", arguments={"order_id": "LH-1002"})),
        ("c1", Action(kind="reply", text=REPLIES[2])),
        ("c2", Action(kind="reply", text=REPLIES[3])),
        ("c2", Action(kind="api", api="get_order", arguments={"order_id": "LH-1004"})),
        ("c2", Action(kind="reply", text=REPLIES[4])),
        ("c2", Action(kind="api", api="report_damaged_item",
                      arguments={"order_id": "LH-1004", "sku": "VASE-GLS", "resolution": "refund", "count": 2})),
        ("c3", Action(kind="reply", text=REPLIES[5])),
        ("c3", Action(kind="api", api="get_order", arguments={"order_id": "LH-1007"})),
    ]
    sizes = {c: sum(x == c for x, _ in plan) for c, _ in plan}
    return [TestCase(id=f"T{i:02d}", conversation=c, intent="damaged" if c == "c2" else "lost",
                     procedure="x/P1", context=[], expected=e, conversation_tests=sizes[c])
            for i, (c, e) in enumerate(plan)]


TESTS = _tests()
REPLY_TESTS = [t for t in TESTS if t.expected.kind == "reply"]
API_TESTS = [t for t in TESTS if t.expected.kind == "api"]


def verdicts(predictions: dict[str, Action] | None = None) -> list[TestVerdict]:
    """Every test judged against its ground truth, except the predictions given by test id."""
    predictions = predictions or {}
    return [judge(t, Prediction(action=predictions.get(t.id, t.expected)), SCORE, THRESHOLD) for t in TESTS]


def rates(vs: list[TestVerdict]) -> dict[str, float]:
    return {k: r.rate for k, r in seven_metrics(vs).items()}


def test_ground_truth_as_prediction_gives_all_seven_metrics_one():
    result = seven_metrics(verdicts())
    assert {k: r.rate for k, r in result.items()} == {k: 1.0 for k in result}
    assert result["reply_recall"].n == 6 and result["api_recall"].n == 5
    assert result["test"].n == 11 and result["conversation"].n == 3


@pytest.mark.parametrize("k", [1, 2, 4])
def test_k_replies_answered_by_api_calls_lower_reply_recall_by_k_over_reply_tests(k):
    base = rates(verdicts())
    calls = {t.id: Action(kind="api", api="get_order", arguments={"order_id": "LH-1"}) for t in REPLY_TESTS[:k]}
    after = rates(verdicts(calls))
    assert after["reply_recall"] == pytest.approx(base["reply_recall"] - k / len(REPLY_TESTS), abs=1e-4)
    # correct reply is over the tests where the agent replied: the replies it gave are all right
    assert after["correct_reply"] == 1.0 and seven_metrics(verdicts(calls))["correct_reply"].n == len(REPLY_TESTS) - k
    assert after["reply_right"] == pytest.approx(base["reply_right"] - k / len(REPLY_TESTS), abs=1e-4)
    for name in ("api_recall", "correct_api", "correct_parameters"):
        assert after[name] == base[name]
    assert after["test"] == pytest.approx(1 - k / len(TESTS), abs=1e-4)


def test_a_wrong_api_name_lowers_correct_api_but_not_api_recall():
    t = API_TESTS[1]
    after = rates(verdicts({t.id: Action(kind="api", api="cancel_order", arguments=t.expected.arguments)}))
    assert after["api_recall"] == 1.0
    assert after["correct_api"] == pytest.approx(1 - 1 / len(API_TESTS), abs=1e-4)
    # parameters are judged where the agent called the expected API: there, all are right
    assert after["correct_parameters"] == 1.0
    assert after["call_right"] == after["api_right"] == pytest.approx(1 - 1 / len(API_TESTS), abs=1e-4)
    assert after["reply_recall"] == after["correct_reply"] == 1.0


def test_one_wrong_parameter_lowers_only_correct_api_parameters():
    t = API_TESTS[3]  # report_damaged_item
    changed = dict(t.expected.arguments, sku="PLATE-SET-6")
    after = rates(verdicts({t.id: Action(kind="api", api=t.expected.api, arguments=changed)}))
    assert after["reply_recall"] == after["correct_reply"] == after["api_recall"] == after["correct_api"] == 1.0
    assert after["correct_parameters"] == pytest.approx(1 - 1 / len(API_TESTS), abs=1e-4)
    assert after["test"] == pytest.approx(1 - 1 / len(TESTS), abs=1e-4)


@pytest.mark.parametrize("broken", [t.id for t in TESTS])
def test_breaking_one_test_flips_exactly_its_conversation(broken):
    test = next(t for t in TESTS if t.id == broken)
    wrong = Action(kind="reply", text="I cannot help with that.") if test.expected.kind == "api" else \
        Action(kind="reply", text="Goodbye and have a nice weekend!")
    vs = verdicts({broken: wrong})
    assert [v.test for v in vs if not v.correct] == [broken]
    by_conversation = {}
    for v in vs:
        by_conversation[v.conversation] = by_conversation.get(v.conversation, True) and v.correct
    assert [c for c, ok in by_conversation.items() if not ok] == [test.conversation]
    assert rates(vs)["conversation"] == pytest.approx(2 / 3, abs=1e-4)


def test_a_conversation_with_an_unscored_test_is_left_out_of_conversation_correctness():
    # T01 (c1's API test) ended with an infra error: it has no verdict; every other test is right
    scored = [v for v in verdicts() if v.test != "T01"]
    result = seven_metrics(scored)
    assert result["conversation"].n == 2 and result["conversation"].rate == 1.0  # c2, c3; not c1
    assert unscored_conversations(scored) == {"c1"}
    assert result["test"].n == 10 and result["test"].rate == 1.0  # the infra error is no failure
    assert result["api_recall"].n == 4
    # a wrong test beside the unscored one does not bring c1 back as a failure either
    wrong = [v for v in verdicts({"T02": Action(kind="reply", text="Goodbye and have a nice weekend!")})
             if v.test != "T01"]
    assert seven_metrics(wrong)["conversation"].n == 2 and seven_metrics(wrong)["conversation"].rate == 1.0
    assert seven_metrics(wrong)["test"].rate == pytest.approx(9 / 10, abs=1e-4)


def test_the_metric_says_how_many_conversations_were_left_out():
    scored = [v for v in verdicts() if v.test not in ("T01", "T06")]  # one test of c1 and of c2
    result = AlmitaMetrics(SevenConfig()).compute(FakeData(scored))
    rows = {r["intent"]: r for r in result.rows}
    assert result.values["conversation"] == 1.0 and rows["all"]["conversation"]["n"] == 1
    assert result.values["conversations_left_out"] == 2
    assert rows["all"]["left_out"] == 2 and rows["lost"]["left_out"] == 1 and rows["damaged"]["left_out"] == 1
    assert "2 conversations left out" in result.headline


def test_a_reply_below_the_threshold_is_recalled_but_not_correct():
    t = REPLY_TESTS[0]
    (v,) = [v for v in verdicts({t.id: Action(kind="reply", text="Our shop opens at nine.")}) if v.test == t.id]
    assert v.reply_recall and not v.correct_reply and v.similarity < THRESHOLD
    assert "similarity" in v.why


def test_an_agent_crash_counts_as_a_wrong_action():
    t = API_TESTS[0]
    v = judge(t, Prediction(action=Action(kind="none"), error="boom"), SCORE, THRESHOLD)
    assert not v.api_recall and not v.correct and v.why == "agent error: boom"


def test_lenient_argument_comparison_normalises_case_numbers_and_nulls():
    assert same_arguments({"order_id": "LH-1002", "n": 2}, {"order_id": " lh-1002", "n": "2.0", "note": None},
                          lenient=True)
    assert not same_arguments({"order_id": "LH-1002"}, {"order_id": "LH-1003"}, lenient=True)
    assert not same_arguments({"order_id": "LH-1002"}, {"order_id": "LH-1002", "reason": "late"}, lenient=True)
    assert not same_arguments({"confirm": True}, {"confirm": 1}, lenient=True)  # a boolean is not a number
    assert same_arguments({"name": "Nan"}, {"name": "nan"}, lenient=True)  # text that reads as NaN


def test_exact_argument_comparison_keeps_ids_text_and_types_apart():
    assert same_arguments({"order_id": "LH-1002", "n": 2, "items": ["A", 1]},
                          {"items": ["A", 1.0], "n": 2.0, "order_id": "LH-1002", "note": None})
    assert not same_arguments({"order_id": "LH-1002"}, {"order_id": "lh-1002"})
    assert not same_arguments({"order_id": "LH-1002"}, {"order_id": " LH-1002"})
    assert not same_arguments({"count": 2}, {"count": "2"})
    assert not same_arguments({"confirm": True}, {"confirm": 1})
    assert not same_arguments({"items": ["A", "B"]}, {"items": ["B", "A"]})


@pytest.mark.parametrize("predicted,exact,lenient", [
    ({"order_id": "LH-1004", "sku": "VASE-GLS", "resolution": "refund", "count": 2}, True, True),
    ({"order_id": "lh-1004", "sku": "VASE-GLS", "resolution": "refund", "count": 2}, False, True),
    ({"order_id": "LH-1004", "sku": "VASE-GLS", "resolution": "Refund ", "count": 2}, False, True),
    ({"order_id": "LH-1004", "sku": "VASE-GLS", "resolution": "refund", "count": "2"}, False, True),
    ({"order_id": "LH-1004", "sku": "VASE-GLS", "resolution": "refund", "count": 3}, False, False),
])
def test_correct_api_parameters_are_exact_by_default_and_lenient_on_request(predicted, exact, lenient):
    t = API_TESTS[3]  # report_damaged_item
    prediction = Prediction(action=Action(kind="api", api=t.expected.api, arguments=predicted))
    strict = judge(t, prediction, SCORE, THRESHOLD)
    assert strict.correct_api and strict.correct_parameters is exact and strict.correct is exact
    assert judge(t, prediction, SCORE, THRESHOLD, lenient=True).correct_parameters is lenient
    if not exact:
        assert strict.why.startswith("arguments differ: ")
    after = rates([strict if v.test == t.id else v for v in verdicts()])
    assert after["correct_parameters"] == pytest.approx(1 - (not exact) / len(API_TESTS), abs=1e-4)
    assert after["correct_api"] == after["api_recall"] == 1.0


def test_the_critic_takes_the_parameter_comparison_from_its_options():
    assert CriticConfig().parameters == "exact"
    assert CriticConfig(parameters="lenient").parameters == "lenient"
    with pytest.raises(ValueError):
        CriticConfig(parameters="fuzzy")


class FakeData:
    """The verdict step's items, and a plan in which the verdicts have no upstream tests step."""

    plan = SimpleNamespace(steps={})

    def __init__(self, vs):
        self.vs = vs

    def values(self, step):
        return [(v.test, v) for v in self.vs]


def test_the_metric_reports_overall_and_per_intent():
    t = next(t for t in API_TESTS if t.intent == "damaged")
    result = AlmitaMetrics(SevenConfig()).compute(FakeData(verdicts({t.id: Action(kind="reply", text="Hm.")})))
    rows = {r["intent"]: r for r in result.rows}
    assert set(rows) == {"all", "damaged", "lost"}
    assert rows["damaged"]["api_recall"]["rate"] == 0.5 and rows["lost"]["api_recall"]["rate"] == 1.0
    assert rows["all"]["tests"] == 11 and result.values["api_recall"] == 0.8
    assert "API recall 80%" in result.headline


# --- the reply scorer ---------------------------------------------------------------------------

# sacrebleu's CHRF() sentence scores (/100) for these pairs, lower-cased (sacrebleu 2.6).
SACREBLEU = [
    ("Could you please share your order number?", "Sure, can you give me the order number?", 0.379028),
    ("I have cancelled your order and refunded 20 dollars.", "Your order is cancelled; a refund of $20 is on its way.", 0.438889),
    ("Hello", "Goodbye friend", 0.060606),
    ("The parcel was delivered yesterday to your front door.", "I cannot help with that request.", 0.115503),
]


@pytest.mark.parametrize("expected,predicted,reference", SACREBLEU)
def test_chrf_gives_sacrebleus_scores(expected, predicted, reference):
    assert chrf(expected, predicted) == pytest.approx(reference, abs=1e-6)
    assert chrf(expected, expected) == 1.0


# Hand-written agent replies: the same answer in other words, and a different answer.
EQUIVALENT = [
    ("Could you please give me your order number?", "Can you please tell me your order number?"),
    ("I have cancelled your order. You will get a refund within 5 business days.",
     "Your order has been cancelled and the refund will reach you within 5 business days."),
    ("Your order was shipped on May 3 and should arrive by May 7.", "The order shipped on May 3; it should arrive by May 7."),
    ("I'm sorry, I can only help with questions about your orders. Could you give me your order number?",
     "Sorry, I can only help with your orders. What is your order number?"),
    ("Would you like to cancel the order or get a refund?", "Do you want to cancel your order, or would you prefer a refund?"),
    ("I have updated the delivery address to 12 Oak Street, Springfield.", "The delivery address is now 12 Oak Street, Springfield."),
    ("Please send a photo of the damaged item.", "Could you send us a photo of the damaged item, please?"),
    ("A replacement has been sent to you. Is there anything else I can help with?",
     "I've sent you a replacement. Can I help you with anything else?"),
]
DIFFERENT = [
    ("Could you please give me your order number?", "Your order has been cancelled."),
    ("I have cancelled your order. You will get a refund within 5 business days.", "Would you like to cancel the order or get a refund?"),
    ("Your order was shipped on May 3 and should arrive by May 7.", "I'm sorry, I can't share other customers' details."),
    ("Would you like to cancel the order or get a refund?", "I have issued a full refund for your order."),
    ("I have updated the delivery address to 12 Oak Street, Springfield.",
     "The order has already shipped, so the address can no longer be changed."),
    ("Please send a photo of the damaged item.", "A replacement has been sent to you."),
    ("A replacement has been sent to you. Is there anything else I can help with?", "Please send a photo of the damaged item."),
    ("I'm transferring you to a human agent now.", "Your refund has been processed."),
]


def test_the_default_threshold_separates_equivalent_from_different_replies():
    same = [chrf(a, b) for a, b in EQUIVALENT]
    other = [chrf(a, b) for a, b in DIFFERENT]
    assert min(same) > THRESHOLD > max(other)
    assert THRESHOLD == pytest.approx((min(same) + max(other)) / 2, abs=0.02)  # the middle of the gap


def test_a_scorer_of_your_own(tmp_path, monkeypatch):
    (tmp_path / "mine.py").write_text("def exact(a, b):\n    return float(a == b)\n")
    monkeypatch.chdir(tmp_path)
    fn, default = scorer("mine.py:exact")
    assert fn("a", "a") == 1.0 and default is None
    with pytest.raises(Exception, match="scorer"):
        scorer("nope.py:missing")


def test_a_scorer_of_your_own_is_in_the_critics_cache_key(tmp_path, monkeypatch):
    (tmp_path / "mine.py").write_text("def score(a, b):\n    return float(a == b)\n")
    monkeypatch.chdir(tmp_path)
    critic = AlmitaCritic(CriticConfig(scorer="mine.py:score", threshold=0.5))
    before = critic.fingerprint()
    (tmp_path / "mine.py").write_text("def score(a, b):\n    return 1.0\n")
    assert before is not None and critic.fingerprint() != before
    assert AlmitaCritic(CriticConfig()).fingerprint() is None  # a built-in: its options say it all



# --- the paper's denominators ---------------------------------------------------------------------

def flagged(expected: str, *, replied=False, right_reply=False, called=False, right_api=False,
            right_parameters=False, n: int = 1) -> list[TestVerdict]:
    """``n`` verdicts with the given flags (what the critic finds), one conversation each."""
    out = []
    for _ in range(n):
        i = len(flagged.made)
        flagged.made.append(i)
        correct = right_reply if expected == "reply" else right_parameters
        out.append(TestVerdict(test=f"T{i}", conversation=f"c{i}", conversation_tests=1, intent="x",
                               expected=expected, predicted="reply" if replied else "api" if called else "none",
                               threshold=THRESHOLD, reply_recall=replied, correct_reply=right_reply,
                               api_recall=called, correct_api=right_api, correct_parameters=right_parameters,
                               correct=correct))
    return out


flagged.made = []


def percent(rate) -> float:
    return round(rate.rate * 100, 1)


def test_a_row_of_the_papers_table_is_reproduced_from_its_counts():
    # GPT-4 on ALMITA (the paper's table): reply recall 53.2, correct reply 77.7. The smallest
    # counts that give them: 312 tests expecting a reply; the agent replied in 166, 129 of them
    # correctly (the other 146 it answered with an API call).
    vs = (flagged("reply", replied=True, right_reply=True, n=129) + flagged("reply", replied=True, n=37)
          + flagged("reply", called=True, n=146))
    m = seven_metrics(vs)
    assert (percent(m["reply_recall"]), percent(m["correct_reply"])) == (53.2, 77.7)
    assert (m["reply_recall"].n, m["correct_reply"].n) == (312, 166)
    # over every reply test, as the metric used to be computed, the row is impossible: a correct
    # reply is a reply, so that rate can never exceed reply recall
    assert percent(m["reply_right"]) == 41.3 < percent(m["reply_recall"])


def test_correct_api_and_its_parameters_are_over_the_tests_where_the_agent_called_one_and_the_right_one():
    vs = (flagged("api", called=True, right_api=True, right_parameters=True, n=3)
          + flagged("api", called=True, right_api=True, n=3)      # the right API, wrong values
          + flagged("api", called=True, n=2)                      # another API
          + flagged("api", replied=True, n=2))                    # a reply instead of a call
    m = seven_metrics(vs)
    assert {k: (m[k].passed, m[k].n) for k in ("api_recall", "correct_api", "correct_parameters",
                                               "api_right", "call_right")} == {
        "api_recall": (8, 10), "correct_api": (6, 8), "correct_parameters": (3, 6),
        "api_right": (6, 10), "call_right": (3, 10)}
    assert m["test"].passed == 3 and m["reply_recall"].n == 0
