"""The store skips Alembic when the database is already at the newest migration (dcpm.store.db):
the newest id it reads from the migration scripts' text must be Alembic's own head."""

from __future__ import annotations

from alembic.config import Config
from alembic.script import ScriptDirectory

from dcpm.store.db import MIGRATIONS_DIR, head_revision


def test_the_head_read_from_the_scripts_is_alembics_head():
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    assert [head_revision()] == ScriptDirectory.from_config(config).get_heads()
