"""Restore against exports someone edited and re-checksummed: what the export's lines and rows
hold must be what dcpm itself writes, or the restore is refused (422) with nothing loaded, and
every user, the restored one included, goes on being served."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from dcpm.server.app import create_app

pytestmark = pytest.mark.storage  # these run on SQLite and on PostgreSQL (tests/conftest.py)

NDJSON = {"content-type": "application/x-ndjson"}


@pytest.fixture
def api(service):
    with TestClient(create_app(service)) as client:
        yield client


@pytest.mark.parametrize("manifest", ["1", "[]", '"dcpm-export/1"', "null", "true"])
def test_a_manifest_that_is_not_an_object_is_refused_not_a_server_error(api, manifest):
    response = api.post("/v1/admin/restore", content=f'{{"manifest": {manifest}}}\n'.encode(), headers=NDJSON)
    assert response.status_code == 422, response.text
    assert "not a dcpm export" in response.json()["message"]
