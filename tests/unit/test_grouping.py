from dcpm.read.fusion import Fused
from dcpm.read.grouping import group


def scored(id_: str, score: float) -> Fused:
    return Fused(id_, score, dense=score, sparse=0.0, dense_relevance=score, lexical_relevance=0.0)


def test_turn_folds_into_its_item_which_takes_the_turns_better_score():
    turn, item, other = scored("turn", 0.9), scored("item", 0.7), scored("other", 0.8)
    grouped = group([turn, other, item], {"item": "turn"})
    assert [g.id for g in grouped] == ["item", "other"]
    assert grouped[0].score == 0.9 and grouped[0].source is turn and grouped[0].best is turn


def test_item_that_outscores_its_turn_keeps_its_own_score():
    grouped = group([scored("item", 0.9), scored("turn", 0.6)], {"item": "turn"})
    assert [(g.id, g.score) for g in grouped] == [("item", 0.9)]
    assert grouped[0].source.id == "turn"


def test_two_items_of_one_turn_stay_two_memories_and_only_the_best_takes_the_turns_score():
    grouped = group([scored("turn", 0.9), scored("moved", 0.5), scored("dog", 0.7)],
                    {"moved": "turn", "dog": "turn"})
    assert [(g.id, g.score) for g in grouped] == [("dog", 0.9), ("moved", 0.5)]


def test_turn_without_an_item_among_the_candidates_stays():
    grouped = group([scored("turn", 0.9), scored("item", 0.5)], {"item": "another turn"})
    assert [g.id for g in grouped] == ["turn", "item"]
    assert grouped[1].source is None
