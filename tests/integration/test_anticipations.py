"""Anticipations (T-Mem): extraction writes when a memory should come back, and search finds the
memory in that situation although the question shares nothing with its text. Deleting the item
deletes them everywhere; an edit drops them; an export carries them; repair rebuilds them."""

from __future__ import annotations

from typing import Iterator

import pytest

from dcpm.api.models import AddMemoryRequest, SearchRequest
from dcpm.config import Settings
from dcpm.index.anticipation import companion_id
from dcpm.service import MemoryService
from dcpm.testing.scripted_llm import LLMServer

from .life_of_ines import stored_ines
from .test_canary_delete import occurrences, shard_residue

# What Inês says, the item extraction writes from it, the item's anticipations, and a question
# asked weeks later that needs the item but shares none of its words.
TARGETS = [
    ("Bad news from the gastroenterologist: it's coeliac disease, so no more gluten for me, ever.",
     "Inês has coeliac disease and must avoid gluten completely",
     ["Inês is offered cake or pastries at a party", "Inês eats out at a restaurant or a colleague's lunch",
      "Inês reads food labels in the supermarket", "Inês worries about what she can eat on holiday"],
     "Rita's leaving do is on Friday and the bakery is making a giant cake for the whole clinic"),
    ("They've put me on warfarin after the clot they found in my calf.",
     "Inês takes warfarin, a blood thinner, since a blood clot in her calf",
     ["Inês has a tooth pulled or minor surgery", "Inês reaches for ibuprofen or aspirin for a headache",
      "Inês plans a long-haul flight", "Inês cuts herself at work"],
     "I've got a wisdom tooth coming out next Tuesday and I'm dreading it"),
    ("My passport expired in January and I still haven't renewed it, typical me.",
     "Inês's passport expired in January and has not been renewed",
     ["Inês books a trip outside the Schengen area", "Inês plans a holiday in the UK or Brazil",
      "Inês is invited to a wedding overseas", "Inês checks in at the airport"],
     "André wants to surprise me with a long weekend in London next month"),
    ("I promised Mrs. Pinto I'd walk her new puppy every Sunday morning while her hip heals.",
     "Inês walks Mrs. Pinto's puppy every Sunday morning while Mrs. Pinto's hip heals",
     ["Inês is asked to do something early on a Sunday", "Inês plans a weekend away",
      "Inês wants a lie-in at the weekend", "Mrs. Pinto has her hip checked again"],
     "My friends want to drive up to the beach in Espinho first thing this Sunday"),
]
ITEMS = {said: (text, anticipations) for said, text, anticipations, _ in TARGETS}
CANARY = "quince-canary-93ab"


def extraction(turns: list[str]) -> dict:
    """Each target turn becomes its fact and anticipations; any other turn, a fact with a canary one."""
    items = []
    for turn in turns:
        said = turn.split(": ", 1)[-1]
        text, anticipations = ITEMS.get(said, (said, [f"Inês mentions the {CANARY} again"]))
        items.append({"kind": "fact", "text": text, "topic": "health", "salience": 0.8,
                      "anticipations": anticipations})
    return {"items": items, "summary": None}


@pytest.fixture
def llm() -> Iterator[LLMServer]:
    with LLMServer() as server:
        server.script.extract = extraction
        yield server


def make(settings: Settings, embedder, llm: LLMServer, **extra) -> MemoryService:
    settings.llm_base_url, settings.llm_model = llm.url, "scripted"
    for key, value in extra.items():
        setattr(settings, key, value)
    return MemoryService(settings, embedder=embedder)


def say(service: MemoryService, text: str, user: str = "ines"):
    return service.add_memory(AddMemoryRequest(user_id=user, messages=[{"content": text, "name": "Inês"}]))


def item_of(result) -> str:
    return next(o.id for o in result.operations if o.op == "ADD")


def rank(service: MemoryService, question: str, text: str) -> float:
    hits = service.search(SearchRequest(user_id="ines", query=question, limit=10)).hits
    return next((n for n, h in enumerate(hits, 1) if h.text == text), float("inf"))


def test_a_question_finds_a_fact_it_shares_nothing_with_through_the_facts_anticipations(tmp_path, embedder, llm):
    """Among Inês's 209 other memories; the same store searched with and without them."""
    settings = Settings(data_dir=tmp_path / "data", llm_base_url=llm.url, llm_model="scripted")
    service = stored_ines(settings, embedder)
    try:
        for said, *_ in TARGETS:
            say(service, said)
        with_them = {question: rank(service, question, text) for _, text, _, question in TARGETS}
        settings.anticipations = False
        without = {question: rank(service, question, text) for _, text, _, question in TARGETS}
    finally:
        service.close()
    assert all(with_them[q] <= without[q] for q in with_them), (with_them, without)
    found_only_with = [q for q in with_them if with_them[q] <= 10 < without[q]]
    assert len(found_only_with) >= 2, (with_them, without)
    assert "anticipations:" in llm.script.calls[0]["messages"][0]["content"]  # the prompt asked for them


def test_items_list_their_anticipations_and_none_are_asked_for_or_kept_when_turned_off(settings, embedder, llm):
    said, text, anticipations, _ = TARGETS[1]
    service = make(settings, embedder, llm)
    try:
        item = service.get(item_of(say(service, said)))
        assert (item.text, item.anticipations) == (text, anticipations)
        settings.anticipations = False
        quiet = service.get(item_of(say(service, TARGETS[2][0])))
        assert quiet.anticipations == [] and not service.index.existing([companion_id(quiet.id)])
        assert "anticipations:" not in llm.script.calls[-1]["messages"][0]["content"]
    finally:
        service.close()


@pytest.mark.parametrize("what", ["memory", "chain", "user"])
def test_deleting_leaves_no_trace_of_the_anticipations_on_disk(tmp_path, embedder, llm, what):
    settings = Settings(data_dir=tmp_path / "data")
    service = make(settings, embedder, llm)
    kept = say(service, TARGETS[0][0], user="bob")
    item_id = item_of(say(service, "I keep a jar of quince jam in my locker at the clinic."))
    companion = companion_id(item_id)
    service.index.optimize()
    assert service.index.existing([companion]) == {companion}
    assert CANARY in " ".join(service.get(item_id).anticipations)
    {"memory": lambda: service.delete_memory(item_id), "chain": lambda: service.delete_chain(item_id),
     "user": lambda: service.delete_user("ines")}[what]()
    assert not service.index.existing([companion])
    service.close()
    assert occurrences(settings.data_dir, CANARY) == []
    assert shard_residue(settings.data_dir, [companion]) == {}
    assert shard_residue(settings.data_dir, [companion_id(item_of(kept))]) != {}  # the scan finds what is kept


def test_an_edit_drops_the_anticipations_written_for_the_old_text(settings, embedder, llm):
    service = make(settings, embedder, llm)
    try:
        said, _, _, question = TARGETS[0]
        item_id = item_of(say(service, said))
        assert rank(service, question, ITEMS[said][0]) <= 10
        edited = service.update_memory(item_id, "Inês thought she had coeliac disease, but the biopsy was clear")
        assert edited.anticipations == [] and not service.index.existing([companion_id(item_id)])
        assert service.search(SearchRequest(user_id="ines", query=question, kinds=["fact"])).hits[0].score < \
            service.search(SearchRequest(user_id="ines", query=question, kinds=["fact"], as_of=None)).threshold
    finally:
        service.close()


def test_an_export_carries_the_anticipations_and_a_restore_searches_them_again(settings, embedder, llm, tmp_path):
    service = make(settings, embedder, llm)
    try:
        said, text, anticipations, question = TARGETS[2]
        item_id = item_of(say(service, said))
        before = rank(service, question, text)
        path = tmp_path / "ines.jsonl"
        service.export_user("ines", path)
        service.delete_user("ines")
        assert not service.index.existing([companion_id(item_id)])
        service.restore(path)
        assert service.get(item_id).anticipations == anticipations
        assert service.index.existing([companion_id(item_id)]) and rank(service, question, text) == before <= 10
    finally:
        service.close()


def test_start_up_repair_rebuilds_an_anticipation_vector_the_index_lost(settings, embedder, llm):
    service = make(settings, embedder, llm)
    item_id = item_of(say(service, TARGETS[3][0]))
    service.index.inner.delete([companion_id(item_id)])  # a damaged index: the item's own point survives
    service.close()
    reopened = MemoryService(settings, embedder=embedder)
    try:
        assert reopened.index.existing([item_id, companion_id(item_id)]) == {item_id, companion_id(item_id)}
    finally:
        reopened.close()


def test_an_update_keeps_the_items_anticipations_and_adds_the_new_ones(settings, embedder, llm, monkeypatch):
    def update_first(items):
        return {"decisions": [{"item": n, "op": "UPDATE", "target": shown[0][0], "text": f"{shown[0][1]}; {text}"}
                              if shown else {"item": n, "op": "ADD"} for n, (text, shown) in enumerate(items, 1)]}

    llm.script.reconcile = update_first
    later = "The dentist says no extractions for me without a word from my haematologist."
    monkeypatch.setitem(ITEMS, later, ("Inês needs her haematologist's approval before any tooth extraction",
                                       ["Inês has a tooth pulled or minor surgery", "Inês books a dental appointment",
                                        "Inês sees a new dentist", "Inês has toothache"]))
    service = make(settings, embedder, llm)
    try:
        item_id = item_of(say(service, TARGETS[1][0]))
        updates = [o for o in say(service, later).operations if o.op != "RAW"]
        assert [(o.op, o.id) for o in updates] == [("UPDATE", item_id)]
        assert service.get(item_id).anticipations == [*TARGETS[1][2], "Inês books a dental appointment",
                                                      "Inês sees a new dentist"]  # six, the repeat dropped
    finally:
        service.close()


def test_dcpm_show_lists_when_an_item_comes_back(settings, embedder, llm):
    from tests.e2e.daemon import run_cli

    service = make(settings, embedder, llm)
    item_id = item_of(say(service, TARGETS[2][0]))
    service.close()
    shown = run_cli(settings.data_dir, "show", item_id).stdout
    assert all(f"comes back when: {situation}" in shown for situation in TARGETS[2][2]), shown


def test_the_anticipations_words_count_as_much_as_the_setting_says(settings, embedder, llm):
    """"Schengen" is in none of Inês's memories, only in the passport item's anticipations: its
    BM25 is theirs, halved at weight 0.5, and gone at 0, where only their meaning is searched."""
    service = make(settings, embedder, llm)
    try:
        for said, *_ in TARGETS:
            say(service, said)
        passport = TARGETS[2][1]

        def lexical(weight: float) -> float:
            settings.anticipation_terms_weight = weight
            hits = service.search(SearchRequest(user_id="ines", query="a trip outside Schengen", limit=10)).hits
            return next(h.sparse_score for h in hits if h.text == passport)
        full, half, none = lexical(1.0), lexical(0.5), lexical(0.0)
    finally:
        service.close()
    assert full > 0 and half == pytest.approx(full / 2) and none == 0
