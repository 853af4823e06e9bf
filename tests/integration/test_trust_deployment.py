"""Several daemons on one database must share one vector index: a daemon that would keep a
private embedded shard beside a shared database refuses to start, saying what to set."""

from __future__ import annotations

import pytest

from dcpm.config import Settings
from dcpm.errors import Invalid
from dcpm.service import MemoryService


def test_a_daemon_on_a_shared_database_refuses_a_private_embedded_shard(tmp_path):
    shared = Settings(data_dir=tmp_path / "data", database_url="postgresql://dcpm:secret@127.0.0.1:1/dcpm")
    with pytest.raises(Invalid, match="DCPM_QDRANT_URL"):
        MemoryService(shared)  # refused before it even connects: port 1 has no database
    assert not (tmp_path / "data" / "vectors").exists()


def test_the_embedded_defaults_and_a_shared_index_are_accepted(tmp_path):
    Settings(data_dir=tmp_path / "a").check_shared_index()
    Settings(data_dir=tmp_path / "b", database_url="postgresql://db/dcpm", qdrant_url="http://qdrant:6333").check_shared_index()
