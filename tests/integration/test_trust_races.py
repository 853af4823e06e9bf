"""Two operations on one user or one memory at the same moment: whichever order they land in,
the store and the index agree afterwards. Slow moments are widened with Events, not sleeps."""

from __future__ import annotations

import threading

import pytest

from dcpm.admin import delete as admin_delete
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


def _both(first, second):  # type: ignore[no-untyped-def]
    """Run two calls at the same moment; returns what each returned or raised."""
    barrier, outcome = threading.Barrier(2), [None, None]

    def run(n, call):  # type: ignore[no-untyped-def]
        barrier.wait(10)
        try:
            outcome[n] = call()
        except Exception as exc:  # noqa: BLE001 - the outcome is what the test looks at
            outcome[n] = exc

    threads = [threading.Thread(target=run, args=(n, call)) for n, call in enumerate((first, second))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(25)
    return outcome


def test_two_restores_of_one_user_at_once_load_it_once(service, tmp_path):
    from dcpm.errors import Conflict, DcpmError

    ana_drinks_chain(service)
    path = tmp_path / "ana.jsonl"
    service.export_user("ana", path)
    service.delete_user("ana")
    outcome = _both(lambda: service.restore(path), lambda: service.restore(path))
    assert sum(isinstance(o, dict) for o in outcome) == 1 and sum(isinstance(o, DcpmError) for o in outcome) == 1
    refused = next(o for o in outcome if isinstance(o, DcpmError))
    assert isinstance(refused, Conflict), refused  # the user is there: not "the file could not be restored"
    assert service.list_memories("ana").total == 3 and service.index.count("ana") == 3


def test_two_edits_of_one_item_at_once_leave_the_vector_of_the_text_that_won(service):
    import numpy as np

    coffee, black, green = ana_drinks_chain(service)
    _both(lambda: service.update_memory(green.id, "Ana drinks jasmine tea"),
          lambda: service.update_memory(green.id, "Ana drinks mint tea"))
    text = service.get(green.id).text
    assert text in ("Ana drinks jasmine tea", "Ana drinks mint tea")
    stored = service.index.dense_vectors([green.id])[green.id]
    assert np.allclose(stored, service.embedder.encode_documents([text]).dense[0], atol=1e-4)


def test_an_edit_and_a_delete_of_one_item_at_once_leave_no_row_or_vector_or_both(service):
    coffee, black, green = ana_drinks_chain(service)
    _both(lambda: service.update_memory(green.id, "Ana drinks mint tea"), lambda: service.delete_memory(green.id))
    assert service.list_memories("ana").total == 2 and not service.index.existing([green.id])
    assert _current_ids(service) == {black.id}


def test_a_user_restored_while_their_delete_finishes_keeps_their_vectors(service, tmp_path, monkeypatch):
    ana_drinks_chain(service)
    path = tmp_path / "ana.jsonl"
    service.export_user("ana", path)
    reached, release = _paused_in(monkeypatch, admin_delete, "_after_delete", "deleter")
    deleter = threading.Thread(target=service.delete_user, args=("ana",), name="deleter")
    deleter.start()
    assert reached.wait(20)  # committed; the second removal of the vectors is still to come
    service.restore(path)
    assert service.index.count("ana") == 3
    release.set()
    deleter.join(20)
    assert service.list_memories("ana").total == 3
    assert service.index.count("ana") == 3
