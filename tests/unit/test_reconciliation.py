from dcpm.llm.prompts.reconcile import Decision
from dcpm.write.reconcile import Candidate, Extracted, exact_duplicates, normalize, plan

TEA = Extracted("identity", "Ana now drinks green tea")
COFFEE = Candidate("1.1", "item-coffee", "Ana drinks two espressos every morning")


def test_normalize_ignores_case_punctuation_and_spacing():
    assert normalize("Ana  is allergic to Penicillin!") == normalize("ana is allergic to penicillin")


def test_exact_duplicate_of_a_candidate_is_dropped():
    dropped = exact_duplicates([Extracted("fact", "Ana keeps bees.")], [[Candidate("1.1", "x", "ana keeps bees")]])
    assert dropped[0].op == "NONE" and dropped[0].target_id == "x"


def test_duplicate_within_one_request_is_dropped_once():
    items = [Extracted("fact", "Ana keeps bees"), Extracted("fact", "Ana keeps bees")]
    assert list(exact_duplicates(items, [[], []])) == [1]


def test_supersede_of_a_shown_candidate_stands():
    planned = plan([TEA], [[COFFEE]], [Decision(item=1, op="SUPERSEDE", target="1.1")], skip=set())
    assert (planned[0].op, planned[0].target_id) == ("SUPERSEDE", "item-coffee")


def test_supersede_outside_the_candidates_becomes_add():
    planned = plan([TEA], [[COFFEE]], [Decision(item=1, op="SUPERSEDE", target="2.1")], skip=set())
    assert planned[0].op == "ADD" and "not a candidate" in planned[0].reason


def test_two_items_cannot_both_replace_one_target():
    second = Extracted("identity", "Ana drinks rooibos")
    candidates = [[COFFEE], [Candidate("2.1", "item-coffee", COFFEE.text)]]
    decisions = [Decision(item=1, op="SUPERSEDE", target="1.1"), Decision(item=2, op="SUPERSEDE", target="2.1")]
    assert [p.op for p in plan([TEA, second], candidates, decisions, skip=set())] == ["SUPERSEDE", "ADD"]


def test_update_uses_the_merged_text():
    planned = plan([TEA], [[COFFEE]], [Decision(item=1, op="UPDATE", target="1.1", text="merged")], skip=set())
    assert (planned[0].op, planned[0].text) == ("UPDATE", "merged")


def test_missing_decision_means_add():
    assert plan([TEA], [[COFFEE]], [], skip=set())[0].op == "ADD"
