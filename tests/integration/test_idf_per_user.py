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


@pytest.mark.parametrize("backend", ["edge", "qdrant-local"])
def test_a_users_own_writes_keep_their_scores_exact_without_counting_their_words_again(backend, tmp_path, embedder,
                                                                                      request):
    """In a chat every search follows a write of the same user. The counts behind the IDF follow
    this process's writes (a new turn, a turn deleted, every point written again by reindex), so
    the search after one reads no count from the index and scores exactly what a fresh count gives."""
    svc = MemoryService(backend_settings(backend, tmp_path / "data", request), embedder=embedder)
    frequencies = svc.index.inner._frequencies
    counted: list[int] = []
    holding = frequencies._holding
    frequencies._holding = lambda user_id, term: counted.append(term) or holding(user_id, term)
    try:
        svc.import_turns("ana", list(ANA_TURNS) + ANA_AUNT)
        lexical_scores(svc)

        def after(write) -> None:
            write()
            counted.clear()
            kept = lexical_scores(svc)
            assert counted == [], "the search after a write counted its words again"
            frequencies.forget()
            assert lexical_scores(svc) == pytest.approx(kept), "the counts kept drifted from the index"

        after(lambda: svc.import_turns("ana", [Turn(text="Booked the oncology follow-up for my aunt in May",
                                                    speaker="Ana", timestamp=at(2025, 3, 9))]))
        after(lambda: svc.import_turns("bob", BOB_ONCOLOGY))
        oncology = [m for m in svc.list_memories("ana", kind="raw", limit=100).items if "oncology" in m.text]
        after(lambda: svc.delete_memory(oncology[0].id))
        after(lambda: svc.reindex())
    finally:
        svc.close()
