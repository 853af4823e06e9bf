"""One user's lexical scores do not move with what other users store: BM25's IDF counts the
querying user's own memories, on every backend. With a shared IDF, two of Ana's memories that
differ in one word scored apart once Bob's memories held that word, telling Ana what Bob stored.
An index built with the shared IDF keeps serving (and says to reindex) until `reindex` rebuilds it."""

from __future__ import annotations

import logging

import pytest

from dcpm.api.models import SearchRequest
from dcpm.domain import Turn
from dcpm.index import user_idf
from dcpm.service import MemoryService

from .scenarios import ANA_TURNS, at
from .test_index_backends import BACKENDS, backend_settings, postgres  # noqa: F401 (postgres: a fixture)

ANA_AUNT = [
    Turn(text="My aunt asked me to sit in on her oncology appointment on Tuesday", speaker="Ana",
         timestamp=at(2025, 3, 2)),
    Turn(text="My aunt asked me to sit in on her cardiology appointment on Tuesday", speaker="Ana",
         timestamp=at(2025, 3, 3)),
]
BOB_ONCOLOGY = [
    Turn(text="The oncology ward put me on the night rota again", speaker="Bob", timestamp=at(2025, 3, 4)),
    Turn(text="Dropped off tulips at the oncology unit for Gran", speaker="Bob", timestamp=at(2025, 3, 5)),
    Turn(text="My oncology nurse says the scan looks clean", speaker="Bob", timestamp=at(2025, 3, 6)),
]


def lexical_scores(svc: MemoryService) -> dict[str, float]:
    """Ana's best BM25 score for each of the two words only one of her memories holds."""
    return {word: svc.search(SearchRequest(user_id="ana", query=word, limit=1, threshold=0)).hits[0].sparse_score
            for word in ("oncology", "cardiology")}


@pytest.mark.parametrize("backend", BACKENDS)
def test_what_bob_stores_does_not_move_anas_scores(backend, tmp_path, embedder, request):
    svc = MemoryService(backend_settings(backend, tmp_path / "data", request), embedder=embedder)
    try:
        svc.import_turns("ana", list(ANA_TURNS) + ANA_AUNT)
        alone = lexical_scores(svc)
        assert alone["oncology"] == pytest.approx(alone["cardiology"]) and alone["oncology"] > 0
        svc.import_turns("bob", BOB_ONCOLOGY)
        assert lexical_scores(svc) == pytest.approx(alone)
    finally:
        svc.close()


@pytest.mark.parametrize("backend", ["edge", "qdrant-local"])
def test_an_index_with_the_shared_idf_serves_warns_and_reindex_makes_it_per_user(backend, tmp_path, embedder,
                                                                                 request, monkeypatch, caplog):
    settings = backend_settings(backend, tmp_path / "data", request)
    with monkeypatch.context() as before:  # the layout of an index built before this change
        before.setattr(user_idf, "per_user", lambda found, sparse_uses_idf, where="": False)
        svc = MemoryService(settings, embedder=embedder)
        svc.import_turns("ana", list(ANA_TURNS) + ANA_AUNT)
        svc.import_turns("bob", BOB_ONCOLOGY)
        leaking = lexical_scores(svc)
        svc.close()
    assert leaking["oncology"] < leaking["cardiology"]  # what the shared IDF told Ana

    with caplog.at_level(logging.WARNING, logger="dcpm.index"):
        svc = MemoryService(settings, embedder=embedder)
        try:
            assert lexical_scores(svc) == pytest.approx(leaking)  # served as it was, nothing lost
            assert "dcpm reindex" in caplog.text
            assert svc.reindex() == len(ANA_TURNS) + len(ANA_AUNT) + len(BOB_ONCOLOGY)
            rebuilt = lexical_scores(svc)
            assert rebuilt["oncology"] == pytest.approx(rebuilt["cardiology"])
        finally:
            svc.close()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="dcpm.index"):
        MemoryService(settings, embedder=embedder).close()
    assert "dcpm reindex" not in caplog.text


@pytest.mark.parametrize("backend", ["edge", "qdrant-local"])
def test_a_model_with_its_own_lexical_weights_never_gets_an_idf(backend, tmp_path, request):
    """bge-m3's sparse weights are the model's own: no IDF on them, also in the index that
    `reindex` makes after the model changed."""
    from dcpm.index import open_index

    settings = backend_settings(backend, tmp_path / "data", request)
    first = open_index(settings, 8, False, embedder="bge-m3:one")
    assert first.idf_per_user is False
    first.close()
    replaced = open_index(settings, 8, False, embedder="bge-m3:two", replace=True)
    try:
        assert replaced.idf_per_user is False
    finally:
        replaced.close()
