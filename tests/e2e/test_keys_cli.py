"""`dcpm keys` as an operator runs it, without a daemon: create prints the key once, list never
shows it, revoke makes the daemon refuse it."""

from __future__ import annotations

import json
import re

import pytest

from dcpm.auth import authenticate
from dcpm.config import Settings
from dcpm.errors import Unauthorized
from dcpm.store.db import Database

from .daemon import cli_json, run_cli


def test_keys_are_created_listed_and_revoked_without_a_daemon(tmp_path):
    data_dir = tmp_path / "data"
    created = run_cli(data_dir, "keys", "create", "--user", "ana", "--label", "ana's assistant",
                      DCPM_API_TOKEN="admin-s3cret")
    key = created.stdout.strip()
    assert re.fullmatch(r"dcpm_[0-9a-f]{8}_[A-Za-z0-9_-]{43}", key)  # alone on stdout, for KEY=$(...)
    prefix = key.split("_")[1]

    listed = cli_json(data_dir, "keys", "list", "--user", "ana")
    assert [(k["prefix"], k["label"], k["revoked_at"]) for k in listed] == [(prefix, "ana's assistant", None)]
    assert key not in json.dumps(listed)
    assert prefix in run_cli(data_dir, "keys", "list").stdout

    settings = Settings(data_dir=data_dir)
    db = Database(settings.sqlalchemy_url)
    try:
        assert authenticate(f"Bearer {key}", settings, db).user_id == "ana"
        assert "revoked API key" in run_cli(data_dir, "keys", "revoke", prefix).stdout
        with pytest.raises(Unauthorized, match="revoked"):
            authenticate(f"Bearer {key}", settings, db)
    finally:
        db.close()
    assert cli_json(data_dir, "keys", "list")[0]["revoked_at"] is not None


def test_a_bad_user_or_an_unknown_key_is_an_error_with_its_exit_code(tmp_path):
    data_dir = tmp_path / "data"
    assert run_cli(data_dir, "keys", "create", "--user", "../etc", check=False).returncode == 2
    missing = run_cli(data_dir, "keys", "revoke", "0a1b2c3d", check=False)
    assert missing.returncode == 4 and "no API key" in missing.stderr
