"""The associative lane on the real model (adapter_fusion = "rrf"): the shipped adapter's ranking
fused with the frozen hybrid one, scores still calibrated, so the default threshold keeps its
meaning. Inês's 209 memories, as in test_search_scores."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dcpm.api.models import SearchRequest
from dcpm.config import Settings
from dcpm.service import MemoryService

from .life_of_ines import PARAPHRASES, UNRELATED, stored_ines


@pytest.fixture(scope="module")
def ines(tmp_path_factory, embedder) -> Iterator[MemoryService]:
    settings = Settings(data_dir=tmp_path_factory.mktemp("ines-lane") / "data", query_adapter="default",
                        adapter_fusion="rrf")
    service = stored_ines(settings, embedder)
    yield service
    service.close()


def test_the_lane_is_served_when_the_setting_asks_for_it(ines):
    result = ines.search(SearchRequest(user_id="ines", query="my cat"))
    assert result.encoder.startswith("associative:") and result.encoder.endswith(":rrf")


def test_an_unrelated_question_finds_nothing_above_the_default_threshold(ines):
    for question in UNRELATED:
        result = ines.search(SearchRequest(user_id="ines", query=question))
        assert [(h.text, h.score) for h in result.hits if h.score >= result.threshold] == [], question
        assert result.context == "" and len(result.hits) == 10


def test_a_paraphrased_question_finds_its_memory_first_above_the_default_threshold(ines):
    for question, memory in PARAPHRASES:
        result = ines.search(SearchRequest(user_id="ines", query=question))
        assert result.hits and result.hits[0].text == memory, (question, [(h.text, h.score) for h in result.hits])
        assert result.hits[0].score >= ines.settings.search_threshold


def test_scores_add_up_from_their_parts_whatever_order_the_fusion_chose(ines):
    result = ines.search(SearchRequest(user_id="ines", query="what keeps Inês awake at night", limit=20,
                                       threshold=0))
    for hit in result.hits:
        parts = result.dense_weight * hit.dense_relevance + (1 - result.dense_weight) * hit.lexical_relevance
        assert hit.score == pytest.approx(parts, abs=1e-5)
    strict = ines.search(SearchRequest(user_id="ines", query="what keeps Inês awake at night", threshold=0.45))
    assert all(h.score >= 0.45 for h in strict.hits)
