"""A question that names a time finds what happened then (dcpm.read.temporal): Maren's hikes,
written on different weekends, are all about the same thing; "last weekend" and "in March"
pick the one from that time, scores unchanged. A question naming no time keeps the order
relevance gives, and the signal can be turned off."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from dcpm.api.models import SearchRequest
from dcpm.config import Settings
from dcpm.domain import Turn
from dcpm.service import MemoryService

NOW = datetime(2025, 6, 18, 12, tzinfo=timezone.utc)  # a Wednesday
HIKES = [
    (datetime(2025, 3, 9, 17, tzinfo=timezone.utc),
     "Hiked up to the Feldberg ridge today, still snow on the north side, my boots were soaked through"),
    (datetime(2025, 4, 27, 18, tzinfo=timezone.utc),
     "Did the long loop around the Titisee with Jonas, a hike of five hours, my calves are done"),
    (datetime(2025, 6, 14, 19, tzinfo=timezone.utc),
     "Short hike to the waterfall above Todtnau this afternoon, lots of families, we turned back early"),
    (datetime(2024, 10, 5, 16, tzinfo=timezone.utc),
     "Autumn hike through the vineyards near Staufen, we bought a bottle of Gutedel at the end"),
]
OTHER = [
    (datetime(2025, 6, 15, 9, tzinfo=timezone.utc), "Booked the car for its inspection on the 30th"),
    (datetime(2025, 5, 2, 20, tzinfo=timezone.utc), "My sister is moving to Leipzig in August"),
]


@pytest.fixture(scope="module", params=[0.1, 0.0], ids=["timed", "off"])
def maren(request, tmp_path_factory, embedder):
    settings = Settings(data_dir=tmp_path_factory.mktemp("maren") / "data", query_adapter="none",
                        temporal_weight=request.param)
    service = MemoryService(settings, embedder=embedder)
    service.import_turns("maren", [Turn(text=text, timestamp=when, speaker="Maren") for when, text in HIKES + OTHER])
    yield service
    service.close()


def top(service: MemoryService, query: str) -> list[str]:
    result = service.search(SearchRequest(user_id="maren", query=query, as_of=NOW, threshold=0, limit=4))
    return [hit.text for hit in result.hits]


def test_last_weekend_finds_last_weekends_hike(maren):
    hits = top(maren, "where did I hike last weekend?")
    if maren.settings.temporal_weight:
        assert hits[0].startswith("Short hike to the waterfall"), hits
    else:  # what the signal adds: by relevance alone, another hike comes first
        assert not hits[0].startswith("Short hike to the waterfall"), hits


def test_a_named_month_finds_that_months_hike(maren):
    hits = top(maren, "how was the hike in March 2025?")
    if maren.settings.temporal_weight:
        assert hits[0].startswith("Hiked up to the Feldberg ridge"), hits


def test_the_signal_changes_the_order_only_never_the_scores(maren):
    query = "where did I hike last weekend?"
    result = maren.search(SearchRequest(user_id="maren", query=query, as_of=NOW, threshold=0, limit=6))
    for hit in result.hits:
        parts = result.dense_weight * hit.dense_relevance + (1 - result.dense_weight) * hit.lexical_relevance
        assert hit.score == pytest.approx(parts, abs=1e-5)
    relevance_order = sorted(result.hits, key=lambda h: -h.score)
    if maren.settings.temporal_weight:
        assert [h.id for h in result.hits] != [h.id for h in relevance_order]
    else:
        assert [h.id for h in result.hits] == [h.id for h in relevance_order]


def test_a_question_naming_no_time_keeps_relevance_order(maren):
    result = maren.search(SearchRequest(user_id="maren", query="which hike had snow on it", as_of=NOW, threshold=0))
    assert [h.score for h in result.hits] == sorted((h.score for h in result.hits), reverse=True)
    assert result.hits[0].text.startswith("Hiked up to the Feldberg ridge")
