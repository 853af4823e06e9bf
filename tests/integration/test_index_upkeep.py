"""The vector index is derived data: rebuilt, repaired and refused when it does not fit."""

from __future__ import annotations

import shutil

import pytest

from dcpm.api.models import SearchRequest
from dcpm.errors import Conflict
from dcpm.service import MemoryService
from dcpm.store.db import current_revision

from .scenarios import ANA_TURNS


def top_ids(service, query: str) -> list[str]:
    return [h.id for h in service.search(SearchRequest(user_id="ana", query=query, limit=3)).hits]


def test_migrations_are_applied_at_start_up(service):
    assert current_revision(service.db.engine) is not None


def test_reindex_rebuilds_the_same_results(service):
    service.import_turns("ana", ANA_TURNS)
    before = top_ids(service, "greyhound")
    assert service.reindex() == len(ANA_TURNS)
    assert top_ids(service, "greyhound") == before


def test_lost_vector_index_is_repaired_at_start_up(settings, embedder):
    first = MemoryService(settings, embedder=embedder)
    first.import_turns("ana", ANA_TURNS)
    before = top_ids(first, "audit at work")
    first.close()
    shutil.rmtree(settings.data_dir / "vectors")
    second = MemoryService(settings, embedder=embedder)
    try:
        assert second.index.count() == len(ANA_TURNS)
        assert top_ids(second, "audit at work") == before
    finally:
        second.close()


def test_rows_written_without_vectors_are_indexed_at_start_up(settings, embedder):
    from sqlalchemy import update

    from dcpm.store.models import RawInput

    first = MemoryService(settings, embedder=embedder)
    first.import_turns("ana", ANA_TURNS[:1])
    first.index.clear()  # a crash between the row commit and the vector upsert
    with first.db.session() as session:
        session.execute(update(RawInput).values(indexed_at=None))
    first.close()
    second = MemoryService(settings, embedder=embedder)
    try:
        assert second.index.count() == 1
    finally:
        second.close()


def test_index_built_for_another_embedder_is_refused(settings, embedder):
    MemoryService(settings, embedder=embedder).close()
    meta = settings.data_dir / "vectors.json"
    meta.write_text('{"dim": 1024, "sparse_idf": false}')
    with pytest.raises(Conflict, match="reindex"):
        MemoryService(settings, embedder=embedder)


def test_qdrant_client_backend_gives_the_same_ranking(tmp_path, embedder):
    from dcpm.config import Settings

    edge = MemoryService(Settings(data_dir=tmp_path / "edge"), embedder=embedder)
    server = MemoryService(Settings(data_dir=tmp_path / "server", qdrant_url=":memory:"), embedder=embedder)
    try:
        for svc in (edge, server):
            svc.import_turns("ana", list(ANA_TURNS))
        for query in ("greyhound", "marathon in May", "bank audit"):
            assert [h.text for h in edge.search(SearchRequest(user_id="ana", query=query)).hits] == \
                   [h.text for h in server.search(SearchRequest(user_id="ana", query=query)).hits]
    finally:
        edge.close()
        server.close()
