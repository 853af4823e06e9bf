"""An index knows which model made its vectors: another model of the same dimension is refused
until `reindex` rebuilds it, on every backend; an index from before the fingerprint was kept
goes on serving and gets it recorded, in full."""

from __future__ import annotations

import json

import pytest

from dcpm.api.models import SearchRequest
from dcpm.errors import Conflict
from dcpm.service import MemoryService

from .scenarios import ANA_TURNS
from .test_index_backends import BACKENDS, backend_settings, postgres  # noqa: F401 (postgres: a fixture)


class AnotherModel:
    """The test embedder under another weights fingerprint: what a model of the same dimension
    looks like to the index (all-MiniLM-L6-v2 and bge-small-en are both 384)."""

    def __init__(self, embedder):  # type: ignore[no-untyped-def]
        self._embedder = embedder

    def fingerprint(self) -> str:
        return "bge-small-en-v1.5:0123456789abcdef"

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self._embedder, name)


def answers(svc: MemoryService) -> list[list[str]]:
    return [[h.id for h in svc.search(SearchRequest(user_id="ana", query=q, limit=3)).hits]
            for q in ("greyhound", "half marathon", "audit at work")]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_model_of_the_same_dimension_is_refused_until_reindex_rebuilds_the_index(backend, tmp_path, embedder,
                                                                                    request):
    settings = backend_settings(backend, tmp_path / "data", request)
    first = MemoryService(settings, embedder=embedder)
    first.import_turns("ana", list(ANA_TURNS))
    before = answers(first)
    first.close()

    other = AnotherModel(embedder)
    with pytest.raises(Conflict) as refused:
        MemoryService(settings, embedder=other)
    message = str(refused.value)
    assert "dcpm reindex" in message and "bge-small-en-v1.5" in message and "all-MiniLM-L6-v2" in message

    rebuilt = MemoryService(settings, embedder=other, lazy=True)  # what `dcpm reindex` opens
    try:
        assert rebuilt.reindex() == len(ANA_TURNS)
        assert rebuilt.index.count("ana") == len(ANA_TURNS)
        assert answers(rebuilt) == before  # every turn is back, re-embedded from the store
    finally:
        rebuilt.close()
    with pytest.raises(Conflict, match="reindex"):  # now the first model is the other one
        MemoryService(settings, embedder=embedder)


def record_as_before(svc: MemoryService, fingerprint: str | None) -> None:
    """Make the index look as one written before the fingerprint was recorded (None), or before
    it took its full form (a first-form fingerprint)."""
    index = svc.index
    if svc.settings.vector_backend == "pgvector":
        with index._connect(autocommit=True) as conn:
            if fingerprint is None:
                conn.execute(f"ALTER TABLE {index.t.meta_name} DROP COLUMN embedder")
            else:
                conn.execute(f"UPDATE {index.t.meta_name} SET embedder = %s", (fingerprint,))
    elif svc.settings.vector_backend == "qdrant":
        index._client.update_collection(index.collection, metadata={"embedder": fingerprint})
    else:
        index.meta_path.write_text(json.dumps({"dim": svc.embedder.dim, "sparse_idf": True, "embedder": fingerprint}))


def recorded_fingerprint(svc: MemoryService) -> str | None:
    index = svc.index
    if svc.settings.vector_backend == "pgvector":
        with index._connect() as conn:
            return conn.execute(f"SELECT to_jsonb(m) ->> 'embedder' FROM {index.t.meta_name} m").fetchone()[0]
    if svc.settings.vector_backend == "qdrant":
        return (index._client.get_collection(index.collection).config.metadata or {}).get("embedder")
    return json.loads(index.meta_path.read_text()).get("embedder")


@pytest.mark.parametrize("recorded", ["nothing", "first form"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_an_index_from_before_the_fingerprint_keeps_serving_and_records_it(backend, recorded, tmp_path, embedder,
                                                                           request):
    settings = backend_settings(backend, tmp_path / "data", request)
    svc = MemoryService(settings, embedder=embedder)
    svc.import_turns("ana", list(ANA_TURNS))
    before = answers(svc)
    old = None if recorded == "nothing" else embedder.fingerprint().split(".")[0]
    record_as_before(svc, old)
    assert recorded_fingerprint(svc) == old
    svc.close()

    svc = MemoryService(settings, embedder=embedder)  # no reindex asked for, none needed
    try:
        assert svc.index.count("ana") == len(ANA_TURNS) and answers(svc) == before
        assert recorded_fingerprint(svc) == embedder.fingerprint()
    finally:
        svc.close()
    with pytest.raises(Conflict, match="reindex"):  # and from now on another model is told apart
        MemoryService(settings, embedder=AnotherModel(embedder))


@pytest.mark.parametrize("damaged", ["", "{not json", "[384, true]", "\udcff"],
                         ids=["empty", "broken", "array", "bytes"])
def test_a_damaged_vectors_json_is_refused_with_the_way_out_and_reindex_rebuilds_the_index(damaged, tmp_path,
                                                                                          embedder):
    settings = backend_settings("edge", tmp_path / "data", None)
    first = MemoryService(settings, embedder=embedder)
    first.import_turns("ana", list(ANA_TURNS))
    before = answers(first)
    first.close()
    meta = tmp_path / "data" / "vectors.json"
    meta.write_bytes(damaged.encode("utf-8", "surrogateescape"))

    with pytest.raises(Conflict) as refused:
        MemoryService(settings, embedder=embedder)
    assert str(meta) in str(refused.value) and "dcpm reindex" in str(refused.value)
    rebuilt = MemoryService(settings, embedder=embedder, lazy=True)  # what `dcpm reindex` opens
    try:
        assert rebuilt.reindex() == len(ANA_TURNS) and answers(rebuilt) == before
    finally:
        rebuilt.close()
    assert json.loads(meta.read_text())["embedder"] == embedder.fingerprint()
