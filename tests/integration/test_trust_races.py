"""Two operations on one user or one memory at the same moment: whichever order they land in,
the store and the index agree afterwards. Slow moments are widened with Events, not sleeps."""

from __future__ import annotations

import threading

import pytest

from dcpm.index import Scope, projection
from dcpm.index.base import DENSE
from dcpm.store import leases
from dcpm.store.items import NewItem, supersede
from dcpm.store.models import Item

from .scenarios import ana_drinks_chain, at

pytestmark = pytest.mark.storage  # SQLite and PostgreSQL (tests/conftest.py)


def _current_ids(service, user_id: str = "ana") -> set[str]:
    vector = service.embedder.encode_documents(["what does Ana drink"]).dense[0]
    return {h.id for h in service.index.query(DENSE, vector, Scope(user_id=user_id, current_only=True), 20)}


def _paused_in(monkeypatch, module, name: str, thread_name: str) -> tuple[threading.Event, threading.Event]:
    """`module.name` waits in the thread called `thread_name` until released: (reached, release)."""
    reached, release = threading.Event(), threading.Event()
    original = getattr(module, name)

    def paused(*args, **kwargs):  # type: ignore[no-untyped-def]
        if threading.current_thread().name == thread_name:
            reached.set()
            assert release.wait(20)
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, paused)
    return reached, release


def test_a_delete_that_relinks_a_chain_does_not_reopen_a_revision_superseded_after_its_commit(service, monkeypatch):
    """Deleting the head makes the previous revision current again; if System 1 supersedes that
    revision before the delete has written the payload, the delete's late write must not mark it
    current in the index again (a current-only search would return two beliefs)."""
    coffee, black, green = ana_drinks_chain(service)
    reached, release = _paused_in(monkeypatch, projection, "refresh_validity", "deleter")
    deleter = threading.Thread(target=service.delete_memory, args=(green.id,), name="deleter")
    deleter.start()
    assert reached.wait(20)  # committed: black is the head again, its payload not yet written
    with leases.held(service.db, "write:ana", 60, 10):  # System 1's next write supersedes black
        with service.db.session() as session:
            rooibos = supersede(session, session.get(Item, black.id),
                                NewItem("identity", "Ana drinks rooibos now", valid_from=at(2025, 9, 1)))
        service.writer.index_rows(items=[rooibos])
        with service.db.session() as session:
            black_now = session.get(Item, black.id)
        projection.refresh_validity(service.db, service.index, [black_now])
    release.set()
    deleter.join(20)
    assert not deleter.is_alive()
    assert _current_ids(service) == {rooibos.id}
