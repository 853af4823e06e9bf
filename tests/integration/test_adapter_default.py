"""The shipped adapter: on by default, loads offline, and is switchable off per request."""

from __future__ import annotations

import socket

import pytest

from dcpm.adapter import SHIPPED_ADAPTER
from dcpm.adapter.manifest import read_manifest
from dcpm.api.models import SearchRequest
from dcpm.config import Settings

from .scenarios import ANA_TURNS, BOB_TURNS

TRIGGER = "Thinking of a weekend in the Lake District, can I take the train on Friday?"


@pytest.fixture
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError("network access in a test")

    monkeypatch.setattr(socket.socket, "connect", refuse)


def test_the_shipped_adapter_loads_offline_and_answers_by_default(embedder, tmp_path, no_network,
                                                                  monkeypatch):
    from dcpm.service import MemoryService

    monkeypatch.delenv("DCPM_QUERY_ADAPTER", raising=False)
    manifest = read_manifest(SHIPPED_ADAPTER)
    assert manifest.backbone.fingerprint == embedder.fingerprint()
    service = MemoryService(Settings(data_dir=tmp_path), embedder=embedder)
    try:
        service.import_turns("ana", list(ANA_TURNS))
        result = service.search(SearchRequest(user_id="ana", query=TRIGGER, threshold=0))
    finally:
        service.close()
    assert result.encoder == f"associative:{manifest.name}:all-MiniLM-L6-v2"
    assert len(result.hits) == len(ANA_TURNS)


def test_associative_false_gives_the_frozen_ranking(embedder, tmp_path):
    from dcpm.service import MemoryService

    service = MemoryService(Settings(data_dir=tmp_path / "associative", query_adapter="default"), embedder=embedder)
    frozen_service = MemoryService(Settings(data_dir=tmp_path / "frozen", query_adapter="none"), embedder=embedder)
    try:
        for svc in (service, frozen_service):
            svc.import_turns("ana", list(ANA_TURNS))
            svc.import_turns("bob", list(BOB_TURNS))
        expected = frozen_service.search(SearchRequest(user_id="ana", query=TRIGGER, threshold=0))
        switched_off = service.search(SearchRequest(user_id="ana", query=TRIGGER, associative=False, threshold=0))
        default = service.search(SearchRequest(user_id="ana", query=TRIGGER, threshold=0))
    finally:
        frozen_service.close()
        service.close()
    assert switched_off.encoder == expected.encoder == "frozen:all-MiniLM-L6-v2"
    assert [(h.text, h.score) for h in switched_off.hits] == [(h.text, h.score) for h in expected.hits]
    assert default.encoder.startswith("associative:")
    assert [h.score for h in default.hits] != [h.score for h in switched_off.hits]
