"""The read-path signals beside relevance (dcpm.read.signals): the time a question names, and
importance spread from strong candidates to their neighbours."""

from __future__ import annotations

from datetime import datetime, timezone

import numpy as np

from dcpm.read import signals

NOW = datetime(2023, 11, 20, 18, 0)  # a Monday evening


def test_last_week_ranks_a_memory_from_last_week_above_one_from_last_year():
    times = [datetime(2022, 11, 14), datetime(2023, 11, 15)]  # the same errand, a year apart
    weights = signals.temporal_alignment("what did I do last week", NOW, times)
    assert weights[1] > 0.99
    assert weights[0] < 0.01


def test_a_named_day_prefers_that_day_and_decays_with_distance():
    times = [datetime(2023, 5, 23, 14, 0), datetime(2023, 5, 30), datetime(2023, 8, 1), None]
    weights = signals.temporal_alignment("What did Gina get accepted for on May 23, 2023?", NOW, times)
    assert weights[0] == 1.0
    assert weights[0] > weights[1] > weights[2] > 0
    assert weights[3] == 0.0  # no timestamp, no evidence either way


def test_in_may_without_a_year_means_the_most_recent_may():
    span = signals.referred_span("Which trail did Joanna hike in May?", datetime(2023, 3, 2))
    assert (span.start, span.end) == (datetime(2022, 5, 1), datetime(2022, 6, 1))


def test_months_ago_and_between_two_dates():
    ago = signals.referred_span("where was I two months ago", NOW)
    assert ago.start < datetime(2023, 9, 21) < ago.end
    between = signals.referred_span("Where was John between August 11 and August 15 2023?", NOW)
    assert (between.start, between.end) == (datetime(2023, 8, 11), datetime(2023, 8, 16))


def test_the_week_before_a_date_reaches_back_from_it():
    span = signals.referred_span("What did Audrey do with her pups over the weekend before 4th October, 2023?", NOW)
    assert span.start <= datetime(2023, 9, 30) and span.end == datetime(2023, 10, 5)


def test_a_question_without_a_past_time_leaves_every_weight_at_zero():
    times = [datetime(2023, 11, 1), datetime(2021, 1, 1)]
    for query in ("how do I take my coffee", "should I get a tattoo next month", "what may I bring to the party",
                  "three more sign-ups this week!!", "had my first appointment with the therapist today",
                  "we broke even in november!!"):
        assert not signals.temporal_alignment(query, NOW, times).any(), query


def test_aware_and_naive_times_compare_as_utc():
    aware = datetime(2023, 11, 19, 23, 30, tzinfo=timezone.utc)
    assert signals.temporal_alignment("what did I cook yesterday", NOW, [aware])[0] == 1.0


def test_when_questions_favour_turns_that_place_something_in_time():
    texts = ["I painted that lake sunrise last year, it's my favourite", "I love painting sunrises over the lake"]
    assert list(signals.temporal_mentions("When did Melanie paint a sunrise?", texts)) == [1.0, 0.0]
    assert not signals.temporal_mentions("What did Melanie paint?", texts).any()


def test_ppr_gives_mass_to_the_neighbour_of_a_strong_seed():
    seeds = np.array([0.9, 0.0, 0.0, 0.1])  # 1 neighbours the strong seed 0; 2 neighbours the weak seed 3
    importance = signals.cooccurrence_importance(seeds, [(0, 1), (2, 3)])
    assert importance[1] > 0.3
    assert importance[1] > importance[2] > 0
    assert importance.max() == 1.0


def test_ppr_without_edges_keeps_the_seed_order_and_sums_to_one():
    seeds = np.array([0.2, 0.5, 0.3])
    rank = signals.personalized_pagerank(seeds, [])
    assert np.allclose(rank, seeds / seeds.sum())
    assert np.isclose(signals.personalized_pagerank(seeds, [(0, 1), (1, 2)]).sum(), 1.0)


def test_nearby_turn_edges_stay_inside_a_session_and_a_window():
    places = [("session_1", 4), ("session_1", 5), ("session_2", 5), ("session_1", 9)]
    assert signals.nearby_turn_edges(places, window=2) == [(0, 1)]


def test_similarity_edges_link_vectors_above_the_threshold():
    vectors = np.array([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0]])
    assert signals.similarity_edges(vectors, 0.55) == [(0, 1), (1, 2)]
    assert signals.similarity_edges(vectors, 0.7) == [(0, 1)]


def test_reranking_by_time_lifts_the_dated_turn_and_leaves_undated_questions_alone():
    relevance = [0.62, 0.58, 0.40]
    times = [datetime(2023, 3, 2), datetime(2023, 5, 23), datetime(2023, 5, 23)]
    texts = ["Gina: the fashion internship called me back", "Gina: I got accepted for the internship!",
             "Gina: rainy day at the store"]
    dated = "What kind of professional experience did Gina get accepted for on May 23, 2023?"
    assert signals.names_time(dated, NOW)
    assert signals.reranked(relevance, signals.time_signal(dated, NOW, times, texts), 0.1) == [1, 0, 2]
    undated = "What kind of professional experience did Gina get accepted for?"
    assert not signals.names_time(undated, NOW)
    assert signals.reranked(relevance, signals.time_signal(undated, NOW, times, texts), 0.1) == [0, 1, 2]
