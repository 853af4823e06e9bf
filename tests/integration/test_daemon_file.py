"""daemon.json tells a CLI command which daemon serves its data directory. A daemon killed with
-9 leaves it behind, and another data directory's daemon may then listen at the address it names:
a command must never act on that other store (an audit deleted a user of the wrong store so)."""

from __future__ import annotations

import json

import pytest

from dcpm.api.client import daemon_client
from dcpm.config import Settings
from dcpm.domain import Turn
from dcpm.errors import Conflict
from dcpm.server.app import create_app
from dcpm.service import MemoryService, open_memory
from dcpm.store.datadir import DAEMON_FILE, DataDirLock, write_daemon

from .served import served


@pytest.fixture
def other_store(tmp_path, embedder):
    """Store B, served at some address with its own instance token, holding ana's secret."""
    service = MemoryService(Settings(data_dir=tmp_path / "b"), embedder=embedder)
    service.import_turns("ana", [Turn(text="my bank PIN is 4321", speaker="ana")])
    try:
        with served(create_app(service, instance="b" * 32)) as address:
            yield service, address
    finally:
        service.close()


def test_a_dead_daemons_file_is_removed_by_whoever_takes_the_data_directory(tmp_path, other_store):
    _, address = other_store
    data_a = tmp_path / "a"
    data_a.mkdir()
    (data_a / DAEMON_FILE).write_text(json.dumps({"pid": 999999, "url": address, "instance": "a" * 32}))
    lock = DataDirLock(data_a)  # e.g. `dcpm mcp` or a long `dcpm import` on store A, daemon A dead
    lock.acquire()
    try:
        assert not (data_a / DAEMON_FILE).exists()
        with pytest.raises(Conflict, match="in use by another dcpm process"):
            with open_memory(Settings(data_dir=data_a)):
                pass
    finally:
        lock.release()


def test_a_command_refuses_a_daemon_that_answers_for_another_data_directory(tmp_path, other_store):
    service_b, address = other_store
    data_a = tmp_path / "a"
    lock = DataDirLock(data_a)  # daemon A holds its directory but does not serve at its address (yet)
    lock.acquire()
    try:
        write_daemon(data_a, address, "a" * 32)
        with pytest.raises(Conflict, match="answers for another data directory"):
            daemon_client(Settings(data_dir=data_a))
        with pytest.raises(Conflict, match="nothing was sent"):
            with open_memory(Settings(data_dir=data_a)) as memory:
                memory.delete_user("ana")
        assert service_b.list_memories("ana").total == 1  # store B untouched
        write_daemon(data_a, address, "b" * 32)  # the right token: that daemon is the one
        with daemon_client(Settings(data_dir=data_a)) as client:
            assert client.list_memories("ana").total == 1
    finally:
        lock.release()
