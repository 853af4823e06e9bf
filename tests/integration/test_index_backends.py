"""One contract, three vector index backends: the embedded qdrant-edge shard, Qdrant through
qdrant-client (its local mode stands in for a server) and pgvector in a real PostgreSQL
(`pgserver`, started once for this module). Every backend keeps users apart, honours every
scope condition, forgets what is deleted, rebuilds and repairs itself from the store, and finds
an exact rare word through its lexical channel."""

from __future__ import annotations

import hashlib
import uuid
from datetime import datetime, timezone

import numpy as np
import pytest

from dcpm.api.models import SearchRequest
from dcpm.config import Settings
from dcpm.domain import Turn
from dcpm.errors import Conflict
from dcpm.index.anticipation import ANTICIPATION, ANTICIPATION_TERMS, companion_id
from dcpm.index.base import DENSE, OPEN_END, SPARSE, Equals, IndexPoint, NotEquals, OneOf, Scope, metadata_key
from dcpm.index.projection import raw_index_text
from dcpm.service import MemoryService

from .scenarios import ANA_TURNS, BOB_TURNS, ana_drinks_chain, at

BACKENDS = ("edge", "qdrant-local", "pgvector")
SECRET = "My locker code is quokka-4711 and the spare key is under the zebu statue"


@pytest.fixture(scope="module")
def postgres(tmp_path_factory: pytest.TempPathFactory):
    """A real PostgreSQL 16 with pgvector, for this module only."""
    import pgserver

    server = pgserver.get_server(tmp_path_factory.mktemp("pgvector") / "pgdata", cleanup_mode="stop")
    yield server.get_uri()
    server.cleanup()


def backend_settings(backend: str, data_dir, request: pytest.FixtureRequest, **extra) -> Settings:
    """Settings for one backend; each pgvector test gets tables of its own (named after it)."""
    if backend == "pgvector":
        table = "t" + hashlib.sha1(request.node.nodeid.encode()).hexdigest()[:12]
        extra = {"index_backend": "pgvector", "pgvector_url": request.getfixturevalue("postgres"),
                 "pgvector_table": table, **extra}
    elif backend == "qdrant-local":
        extra = {"qdrant_url": f"local:{data_dir.parent / 'qdrant-local'}", **extra}
    return Settings(data_dir=data_dir, **extra)


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return request.param


@pytest.fixture
def svc(backend, tmp_path, embedder, request):
    service = MemoryService(backend_settings(backend, tmp_path / "data", request), embedder=embedder)
    yield service
    service.close()


def reopen(svc: MemoryService, embedder) -> MemoryService:
    svc.close()
    return MemoryService(svc.settings, embedder=embedder)


def raw_ids(svc, user: str) -> dict[str, str]:
    """text -> id of a user's turns."""
    return {m.text: m.id for m in svc.list_memories(user, kind="raw", limit=200).items}


def dense_query(svc, text: str) -> np.ndarray:
    return svc.embedder.encode_queries([text]).dense[0]


def sparse_query(svc, text: str):
    return svc.embedder.encode_queries([text]).sparse[0]


def test_a_users_queries_never_see_another_users_points(svc):
    svc.import_turns("ana", list(ANA_TURNS))
    svc.import_turns("bob", list(BOB_TURNS))
    svc.index.optimize()
    bob = set(raw_ids(svc, "bob").values())
    for query in ("training for a race", "my cat", "bank audit"):
        dense = svc.index.query(DENSE, dense_query(svc, query), Scope(user_id="bob"), 50)
        sparse = svc.index.query(SPARSE, sparse_query(svc, query), Scope(user_id="bob"), 50)
        assert {h.id for h in dense} == bob  # all of Bob's, none of Ana's
        assert {h.id for h in sparse} <= bob
    hits = svc.search(SearchRequest(user_id="ana", query="training for a race")).hits
    assert hits[0].text == ANA_TURNS[2].text and {h.text for h in hits} <= {t.text for t in ANA_TURNS}
    assert svc.index.count("ana") == len(ANA_TURNS) and svc.index.count() == len(ANA_TURNS) + len(BOB_TURNS)


def test_scopes_select_kinds_sessions_belief_time_current_heads_and_metadata(svc):
    coffee, black, green = ana_drinks_chain(svc)
    svc.import_turns("ana", [Turn(text="Pepper chewed my running shoes", speaker="Ana", session_id="s-2",
                                  timestamp=at(2025, 3, 3), metadata={"topic": "pets", "mood": 2, "indoor": True}),
                             Turn(text="I bought oolong tea at the market", speaker="Ana", session_id="s-3",
                                  timestamp=at(2025, 4, 1), metadata={"topic": "food", "indoor": 1})])
    turns = raw_ids(svc, "ana")
    drink = dense_query(svc, "what does Ana drink")

    def ids(**scope) -> set[str]:
        return {h.id for h in svc.index.query(DENSE, drink, Scope(user_id="ana", **scope), 20)}

    assert ids(kinds=("identity",)) == {coffee.id, black.id, green.id}
    assert ids(kinds=("identity",), current_only=True) == {green.id}
    april = datetime(2025, 4, 15, tzinfo=timezone.utc).timestamp()
    assert ids(kinds=("identity",), as_of=april) == {black.id}
    assert ids(kinds=("raw",), session_id="s-2") == {turns["Pepper chewed my running shoes"]}
    assert ids(kinds=("raw",), as_of=datetime(2025, 3, 20, tzinfo=timezone.utc).timestamp()) == \
        {turns["Pepper chewed my running shoes"]}
    pets, food = turns["Pepper chewed my running shoes"], turns["I bought oolong tea at the market"]
    assert ids(kinds=("raw",), filters=(Equals(metadata_key("topic"), "pets"),)) == {pets}
    assert ids(kinds=("raw",), filters=(NotEquals(metadata_key("topic"), "pets"),)) == {food}
    assert ids(kinds=("raw",), filters=(OneOf(metadata_key("topic"), ("food", "travel")),)) == {food}
    assert ids(kinds=("raw",), filters=(Equals(metadata_key("mood"), 2),)) == {pets}
    assert ids(kinds=("raw",), filters=(Equals(metadata_key("mood"), "2"),)) == set()  # types must match
    assert ids(kinds=("raw",), filters=(Equals(metadata_key("indoor"), True),)) == {pets}  # not the 1 of food
    assert ids(kinds=("raw",), filters=(NotEquals(metadata_key("indoor"), True),)) >= {food}
    assert ids(kinds=("raw",), filters=(Equals(metadata_key("indoor"), 1),)) == {food}


def test_a_hard_delete_leaves_nothing_findable(svc):
    svc.import_turns("ana", list(ANA_TURNS) + [Turn(text=SECRET, speaker="Ana")])
    secret = raw_ids(svc, "ana")[SECRET]
    assert svc.index.query(SPARSE, sparse_query(svc, "quokka"), Scope(user_id="ana"), 5)[0].id == secret
    svc.delete_memory(secret, compact=True)
    assert svc.index.existing([secret]) == set() and svc.index.dense_vectors([secret]) == {}
    assert svc.index.query(SPARSE, sparse_query(svc, "quokka zebu locker"), Scope(user_id="ana"), 5) == []
    assert secret not in {h.id for h in svc.index.query(DENSE, dense_query(svc, SECRET), Scope(user_id="ana"), 50)}
    assert svc.index.count() == len(ANA_TURNS) and svc.index.pending_purge() is None


def test_an_items_anticipations_are_its_own_second_vector_on_every_backend(svc):
    """Found by the owner's anticipation query only, under the item's id; in no count or ordinary
    query; closed with the item's validity; deleted with it (dcpm.index.anticipation)."""
    item_id, other_id = str(uuid.uuid4()), str(uuid.uuid4())
    text, situation = "Ana's lease allows one cat", "Ana thinks about adopting a kitten from the shelter"
    encoded = svc.embedder.encode_documents([text, situation, "Bob rows on the river"])
    payload = {"user_id": "ana", "kind": "fact", "session_id": "", "valid_from": 0.0, "valid_to": OPEN_END}
    svc.index.upsert([IndexPoint(item_id, encoded.dense[0], encoded.sparse[0], payload, encoded.dense[1],
                                 encoded.sparse[1]),
                      IndexPoint(other_id, encoded.dense[2], encoded.sparse[2], {**payload, "user_id": "bob"},
                                 encoded.dense[1], encoded.sparse[1])])
    cue = dense_query(svc, "should I get a kitten?")
    assert [h.id for h in svc.index.query(ANTICIPATION, cue, Scope(user_id="ana"), 10)] == [item_id]
    kitten = sparse_query(svc, "kitten shelter")
    assert [h.id for h in svc.index.query(ANTICIPATION_TERMS, kitten, Scope(user_id="ana"), 10)] == [item_id]
    assert svc.index.query(SPARSE, kitten, Scope(user_id="ana"), 10) == []  # the item's own words lack them
    assert [h.id for h in svc.index.query(ANTICIPATION, cue, Scope(user_id="bob"), 10)] == [other_id]
    assert [h.id for h in svc.index.query(DENSE, cue, Scope(user_id="ana"), 10)] == [item_id]
    assert svc.index.count("ana") == 1 and sorted(svc.index.ids()) == sorted([item_id, item_id, other_id, other_id])
    svc.index.set_payload([item_id], {"valid_from": 0.0, "valid_to": 100.0})
    assert svc.index.query(ANTICIPATION, cue, Scope(user_id="ana", current_only=True), 10) == []
    svc.index.delete([item_id])
    assert svc.index.query(ANTICIPATION, cue, Scope(user_id="ana"), 10) == []
    assert not svc.index.existing([companion_id(item_id)]) and svc.index.existing([companion_id(other_id)])


def test_the_lexical_channel_finds_an_exact_rare_word(svc):
    svc.import_turns("ana", list(ANA_TURNS) + [Turn(text=SECRET, speaker="Ana")])
    svc.import_turns("bob", list(BOB_TURNS))
    hits = svc.index.query(SPARSE, sparse_query(svc, "where is the zebu"), Scope(user_id="ana"), 10)
    assert [h.id for h in hits] == [raw_ids(svc, "ana")[SECRET]]  # the one turn holding the word
    assert svc.index.query(SPARSE, sparse_query(svc, "zebu"), Scope(user_id="bob"), 10) == []


MARATHONS = [Turn(text=t, speaker="Ana") for t in ("I ran the marathon", "The marathon was hard",
                                                    "Another marathon next week", "After the marathon I slept")]
WALK = Turn(text="Yesterday afternoon I walked around the lake for a long time with my greyhound and friends",
            speaker="Ana")


def test_a_rare_word_outweighs_a_common_one_in_lexical_ranking(svc):
    svc.import_turns("ana", MARATHONS + [WALK])
    hits = svc.index.query(SPARSE, sparse_query(svc, "marathon greyhound"), Scope(user_id="ana"), 10)
    assert hits[0].id == raw_ids(svc, "ana")[WALK.text] and len(hits) == 5  # IDF: "marathon" is everywhere


def test_another_users_vocabulary_does_not_change_a_users_lexical_ranking(tmp_path, embedder, request):
    svc = MemoryService(backend_settings("pgvector", tmp_path / "data", request), embedder=embedder)
    try:
        svc.import_turns("ana", MARATHONS + [WALK])
        svc.import_turns("bob", [Turn(text=f"My greyhound number {n} won a race") for n in range(12)])
        hits = svc.index.query(SPARSE, sparse_query(svc, "marathon greyhound"), Scope(user_id="ana"), 10)
        assert hits[0].id == raw_ids(svc, "ana")[WALK.text]  # IDF counts Ana's points only
    finally:
        svc.close()


def test_dense_vectors_are_the_stored_embeddings(svc):
    svc.import_turns("ana", list(ANA_TURNS))
    ids = raw_ids(svc, "ana")
    stored = svc.index.dense_vectors(list(ids.values()) + [str(uuid.uuid4())])
    assert set(stored) == set(ids.values())
    for turn in ANA_TURNS:
        expected = svc.embedder.encode_documents([raw_index_text(turn)]).dense[0]
        assert np.allclose(stored[ids[turn.text]], expected, atol=1e-5)


def test_dense_scores_are_the_cosines_of_the_stored_points_named(svc):
    """The read path scores lexical-only candidates in the index: the same numbers as the stored
    vectors give, for exactly the points named and stored (another user's included: the read
    path names only its own user's ids, and hydration checks the owner again)."""
    svc.import_turns("ana", list(ANA_TURNS))
    svc.import_turns("bob", list(BOB_TURNS))
    ana, bob = list(raw_ids(svc, "ana").values()), list(raw_ids(svc, "bob").values())
    query = svc.embedder.encode_queries(["What do I drink in the morning?"]).dense[0]
    named = ana[:3] + bob[:1] + [str(uuid.uuid4())]
    scores = svc.index.dense_scores(query, named)
    assert set(scores) == set(named[:4])  # the unknown id is absent, not scored 0
    vectors = svc.index.dense_vectors(named[:4])
    for point_id in named[:4]:
        assert scores[point_id] == pytest.approx(float(vectors[point_id] @ query), abs=1e-4)
    svc.index.delete([ana[0]])
    assert set(svc.index.dense_scores(query, named)) == set(named[1:4])
    assert svc.index.dense_scores(query, []) == {}


def test_reindex_clears_and_rebuilds_the_same_answers(svc):
    svc.import_turns("ana", list(ANA_TURNS))
    ana_drinks_chain(svc)
    queries = ("what does Ana drink", "greyhound", "half marathon")

    def answers() -> list[list[str]]:
        return [[h.id for h in svc.search(SearchRequest(user_id="ana", query=q)).hits] for q in queries]

    before, points = answers(), svc.index.count()
    svc.index.clear()
    assert svc.index.count() == 0 and svc.search(SearchRequest(user_id="ana", query="greyhound")).hits == []
    assert svc.reindex() == points
    assert answers() == before and svc.index.count() == points


def test_reindex_keeps_every_memory_searchable_while_it_runs(svc):
    """Reindex overwrites each point in place: between its batches (the turns are rewritten, the
    items not yet), every search answers as before; it used to empty the index first."""
    svc.import_turns("ana", list(ANA_TURNS))
    ana_drinks_chain(svc)
    queries = ("what does Ana drink", "greyhound", "half marathon")

    def answers() -> list[list[str]]:
        return [[h.id for h in svc.search(SearchRequest(user_id="ana", query=q)).hits] for q in queries]

    before, points, during = answers(), svc.index.count(), []
    assert svc.reindex(progress=lambda done, total: during.append((done, total, answers()))) == points
    assert len(during) >= 2 and during[0][0] < during[0][1]  # a look between batches, not after the last
    assert all(seen == before for _, _, seen in during)
    assert answers() == before and svc.index.count() == points


def test_reindex_removes_points_that_no_memory_has(svc):
    """A point left without its row (an index restored from an older backup, a crash between a
    delete's commit and its second removal) is found by nothing, and reindex removes it."""
    from dcpm.index.base import IndexPoint

    svc.import_turns("ana", list(ANA_TURNS))
    stray = str(uuid.uuid4())
    vectors = svc.embedder.encode_documents(["Ana's old locker code was quokka-4711"])
    svc.index.upsert([IndexPoint(stray, vectors.dense[0], vectors.sparse[0], {"user_id": "ana", "kind": "raw"})])
    assert stray in set(svc.index.ids()) and svc.index.count() == len(ANA_TURNS) + 1
    svc.reindex()
    assert svc.index.existing([stray]) == set() and svc.index.count() == len(ANA_TURNS)
    assert set(svc.index.ids()) == set(raw_ids(svc, "ana").values())


def test_start_up_repair_restores_points_the_index_lost(svc, embedder):
    svc.import_turns("ana", list(ANA_TURNS))
    lost = list(raw_ids(svc, "ana").values())[:2]
    svc.index.delete(lost)  # as if the index had lost them (a restored backup, a crash)
    svc = reopen(svc, embedder)
    try:
        assert svc.index.existing(lost) == set(lost) and svc.index.count() == len(ANA_TURNS)
    finally:
        svc.close()


def test_export_and_restore_bring_back_the_same_answers(svc, tmp_path):
    svc.import_turns("ana", list(ANA_TURNS))
    ana_drinks_chain(svc)
    before = [h.id for h in svc.search(SearchRequest(user_id="ana", query="what does Ana drink")).hits]
    svc.export_user("ana", tmp_path / "ana.jsonl")
    svc.delete_user("ana", compact=True)
    assert svc.index.count("ana") == 0
    svc.restore(tmp_path / "ana.jsonl")
    assert [h.id for h in svc.search(SearchRequest(user_id="ana", query="what does Ana drink")).hits] == before


# --- pgvector: what only a shared engine promises ---------------------------------------------
def test_two_daemons_on_one_pgvector_index_see_each_others_writes_and_deletes(tmp_path, embedder, request):
    first = MemoryService(backend_settings("pgvector", tmp_path / "a", request), embedder=embedder)
    second = MemoryService(backend_settings("pgvector", tmp_path / "b", request), embedder=embedder)
    try:
        first.import_turns("ana", list(ANA_TURNS) + [Turn(text=SECRET, speaker="Ana")])
        secret = raw_ids(first, "ana")[SECRET]
        assert second.index.query(SPARSE, sparse_query(second, "quokka"), Scope(user_id="ana"), 5)[0].id == secret
        first.index.delete([secret])
        assert second.index.existing([secret]) == set()
        assert second.index.query(SPARSE, sparse_query(second, "quokka"), Scope(user_id="ana"), 5) == []
    finally:
        first.close()
        second.close()


def test_a_user_past_the_threshold_gets_an_hnsw_graph_that_answers_as_the_exact_scan(tmp_path, embedder, request):
    svc = MemoryService(backend_settings("pgvector", tmp_path / "data", request, pgvector_user_hnsw_rows=4),
                        embedder=embedder)
    try:
        svc.import_turns("ana", list(ANA_TURNS) + [Turn(text=f"Note {n}: {t.text}") for n, t in
                                                   enumerate(ANA_TURNS + BOB_TURNS)])
        svc.import_turns("bob", list(BOB_TURNS))
        queries = ("greyhound", "training for a race", "the audit at work")
        exact = [svc.index.query(DENSE, dense_query(svc, q), Scope(user_id="ana"), 5) for q in queries]
        assert svc.index.optimize() is True and svc.index.optimize() is False  # Ana's graph only, once
        graphed = [svc.index.query(DENSE, dense_query(svc, q), Scope(user_id="ana"), 5) for q in queries]
        assert [[h.id for h in hits] for hits in graphed] == [[h.id for h in hits] for hits in exact]
        with_fewer = svc.index.query(DENSE, dense_query(svc, "greyhound"), Scope(user_id="ana", kinds=("raw",)), 50)
        assert len(with_fewer) == svc.index.count("ana")  # a filtered graph walk that falls short is redone exactly
    finally:
        svc.close()


def test_a_pgvector_index_built_for_another_embedder_is_refused(tmp_path, embedder, request):
    from dcpm.index.pgvector import PgVectorIndex

    settings = backend_settings("pgvector", tmp_path / "data", request)
    PgVectorIndex(settings, embedder.dim, embedder.sparse_uses_idf).close()
    with pytest.raises(Conflict, match="reindex"):
        PgVectorIndex(settings, embedder.dim + 1, embedder.sparse_uses_idf)


# --- Qdrant server: the cluster settings' code path, in qdrant-client's local mode ----------------
def test_a_collection_with_cluster_settings_serves_and_refuses_another_embedder(tmp_path, embedder, request):
    settings = backend_settings("qdrant-local", tmp_path / "data", request, qdrant_on_disk=True,
                                qdrant_quantization="int8", qdrant_shards=3, qdrant_replication_factor=2)
    svc = MemoryService(settings, embedder=embedder)
    try:
        svc.import_turns("ana", list(ANA_TURNS))
        assert svc.search(SearchRequest(user_id="ana", query="greyhound")).hits[0].text == ANA_TURNS[0].text
    finally:
        svc.close()
    from dcpm.index.server import QdrantServerIndex

    with pytest.raises(Conflict, match="reindex"):
        QdrantServerIndex(settings, embedder.dim + 1, embedder.sparse_uses_idf)


def test_a_shared_store_accepts_either_shared_index_and_names_both_when_it_has_neither(tmp_path):
    from dcpm.errors import Invalid
    from dcpm.index import open_index

    shared = {"data_dir": tmp_path, "database_url": "postgresql+psycopg://dcpm@db/dcpm"}
    Settings(**shared, index_backend="pgvector").check_shared_index()
    Settings(**shared, qdrant_url="http://qdrant-1:6333").check_shared_index()
    with pytest.raises(Invalid, match="DCPM_INDEX_BACKEND=pgvector"):
        Settings(**shared).check_shared_index()
    with pytest.raises(Invalid, match="DCPM_QDRANT_URL"):
        open_index(Settings(data_dir=tmp_path, index_backend="qdrant"), 8, True)
