"""The lexical half point is set in rare-word IDFs and turned into BM25 points per search
(dcpm.read.lexical_scale), because BM25 grows with the points its IDF counts. The scale must move
exactly as each backend's BM25 moves: with the user's own points only, on every backend (an
index built before IDF per user, counting every point, is in test_idf_per_user)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from dcpm.config import Settings
from dcpm.domain import Turn
from dcpm.index.base import SPARSE, Scope
from dcpm.read import lexical_scale as scale_module
from dcpm.read.fusion import lexical_relevance
from dcpm.read.lexical_scale import lexical_scale, rare_word_idf
from dcpm.read.search import calibration
from dcpm.service import MemoryService

from .scenarios import ANA_TURNS, BOB_TURNS
from .test_index_backends import BACKENDS, SECRET, backend_settings, postgres, sparse_query  # noqa: F401


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_scale_moves_as_the_backends_bm25_moves(backend, tmp_path, embedder, request, monkeypatch):
    monkeypatch.setattr(scale_module, "REFRESH_SECONDS", -1.0)  # read N on every call
    svc = MemoryService(backend_settings(backend, tmp_path / "data", request), embedder=embedder)
    try:
        svc.import_turns("ana", list(ANA_TURNS) + [Turn(text=SECRET, speaker="Ana")])

        def quokka() -> float:  # BM25 of the one turn holding the word: its IDF times a fixed term weight
            return svc.index.query(SPARSE, sparse_query(svc, "quokka"), Scope(user_id="ana"), 5)[0].score

        before, scale_before = quokka(), lexical_scale(svc.index, "ana")
        svc.import_turns("bob", list(BOB_TURNS))
        after, scale_after = quokka(), lexical_scale(svc.index, "ana")
    finally:
        svc.close()
    assert after / before == pytest.approx(scale_after / scale_before, rel=1e-3)
    assert scale_after == scale_before == pytest.approx(rare_word_idf(len(ANA_TURNS) + 1))  # bob's are not ana's


def test_the_count_is_read_once_a_minute_and_per_user_only_where_idf_is(monkeypatch):
    class Index:
        sparse_uses_idf, idf_per_user = True, False

        def __init__(self):
            self.counted: list[str | None] = []

        def count(self, user_id=None):
            self.counted.append(user_id)
            return 6002

    now = [1000.0]
    monkeypatch.setattr(scale_module.time, "monotonic", lambda: now[0])
    shared = Index()
    assert lexical_scale(shared, "ana") == pytest.approx(8.29, abs=0.01) == lexical_scale(shared, "bob")
    assert shared.counted == [None]  # one index-wide count serves every user
    now[0] += 61
    lexical_scale(shared, "ana")
    assert shared.counted == [None, None]
    per_user = Index()
    per_user.idf_per_user = True
    lexical_scale(per_user, "ana"), lexical_scale(per_user, "bob"), lexical_scale(per_user, "ana")
    assert per_user.counted == ["ana", "bob"]
    weights = Index()
    weights.sparse_uses_idf = False  # a model's own lexical weights (bge-m3): no IDF, no store size
    assert lexical_scale(weights, "ana", weights_unit=0.06) == 0.06 and weights.counted == []


def test_bge_m3s_lexical_weights_get_their_own_unit():
    """With k in IDF units a bge-m3 match (0.2 for a strong one) would count for nothing."""
    settings = Settings()
    k = settings.score_lexical_k * settings.score_lexical_weights_unit
    strong = lexical_relevance(0.2, replace(calibration(settings), lexical_k=k))
    assert strong > 0.5 > lexical_relevance(0.06, replace(calibration(settings), lexical_k=k))


def test_a_new_users_small_store_scales_bm25_down():
    assert rare_word_idf(209) == pytest.approx(4.94, abs=0.01)
    assert rare_word_idf(0) == rare_word_idf(1) > 0
    assert rare_word_idf(200_000) > rare_word_idf(6002) > rare_word_idf(209)
