"""Trust boundaries over real HTTP: access control that stays on once it was switched on, Host and
Origin checks (DNS rebinding, cross-site requests), the body limit on chunked bodies, restore's
content type, a /healthz that costs nothing, waiting adds that cannot take every worker thread,
and failed inputs in /metrics. Ana's assistant holds a key for Ana."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Iterator

import httpx
import pytest
from alembic import command
from fastapi.testclient import TestClient
from pydantic import SecretStr
from sqlalchemy import delete, insert, update

from dcpm.api.client import Client
from dcpm.api.models import AddMemoryRequest
from dcpm.auth import ADMIN, authenticate
from dcpm.domain import RawStatus
from dcpm.errors import Unauthorized
from dcpm.server.app import create_app
from dcpm.service import MemoryService
from dcpm.store.db import Database, alembic_config, make_engine
from dcpm.store.models import ApiKey, RawInput
from dcpm.testing.scripted_llm import LLMServer

from .served import served
from .slow_llm import ana_waiting_on_a_slow_llm

TOKEN = "admin-s3cret"
BEES = "Ana keeps bees on her allotment"
LOOPBACK = "http://127.0.0.1:8420"


def bearer(credential: str, scheme: str = "Bearer") -> dict:
    return {"Authorization": f"{scheme} {credential}"}


def remember(service, user: str = "ana", text: str = BEES) -> str:
    return service.add_memory(AddMemoryRequest(user_id=user, text=text, infer=False)).raw_ids[0]


@pytest.fixture
def api(service) -> Iterator[TestClient]:
    with TestClient(create_app(service)) as client:
        yield client


@pytest.fixture
def bound(service) -> Iterator[TestClient]:
    """The app as `dcpm serve` builds it on 127.0.0.1:8420, the Host check included."""
    service.settings.allowed_hosts = ["memory.lan"]
    with TestClient(create_app(service, bound_host="127.0.0.1"), base_url=LOOPBACK) as client:
        yield client


# --- finding 1: access control, once on, stays on --------------------------------------------

def keys_only_daemon_where_ana_deletes_herself(api, delete) -> None:  # type: ignore[no-untyped-def]
    key = api.post("/v1/admin/keys", json={"user_id": "ana"}).json()["key"]  # open: the operator makes it
    assert api.post("/v1/memories", json={"user_id": "ana", "text": BEES, "infer": False},
                    headers=bearer(key)).status_code == 201
    assert delete(key).status_code == 200


def assert_closed(api, service) -> None:  # type: ignore[no-untyped-def]
    assert api.get("/v1/admin/keys").status_code == 401
    assert api.post("/v1/admin/keys", json={"user_id": "bob"}).status_code == 401
    assert api.get("/v1/users").status_code == 401
    assert service.keys.api_keys() == []  # the deleted user's keys went with it, and no key was minted


def test_deleting_the_last_key_holder_keeps_access_control_on(api, service):
    keys_only_daemon_where_ana_deletes_herself(api, lambda key: api.delete("/v1/users/ana", headers=bearer(key)))
    assert_closed(api, service)


@pytest.mark.parametrize("route", ["/v1/memories/?user_id=ana", "/v2/entities/user/ana/"],
                         ids=["delete_all", "delete_users"])
def test_deleting_the_last_key_holder_through_mem0_keeps_access_control_on(api, service, route):
    keys_only_daemon_where_ana_deletes_herself(api, lambda key: api.delete(route, headers=bearer(key, "Token")))
    assert_closed(api, service)


def test_revoking_the_last_key_keeps_access_control_on(api, service):
    key = service.keys.create_key("ana")
    service.keys.revoke_key(key.prefix)
    assert api.get("/v1/users").status_code == 401


def test_a_store_with_keys_from_before_the_flag_stays_closed_after_the_upgrade(settings):
    settings.data_dir.mkdir(parents=True)
    engine = make_engine(settings.sqlalchemy_url)
    config = alembic_config(engine)
    with engine.begin() as connection:  # a store as dcpm left it before the flag existed
        config.attributes["connection"] = connection
        command.upgrade(config, "0005")
        connection.execute(insert(ApiKey).values(id="k1", prefix="3f9a0c1e", hash="0" * 64, user_id="ana",
                                                 created_at=datetime(2026, 11, 1)))
    engine.dispose()
    db = Database(settings.sqlalchemy_url)  # upgrades to the head
    try:
        with db.session() as session:
            session.execute(delete(ApiKey))  # the key goes, as with a deleted user
        with pytest.raises(Unauthorized):
            authenticate(None, settings, db)
    finally:
        db.close()


# --- finding 2: exposure ----------------------------------------------------------------------

@pytest.mark.parametrize("host, token, key, allow, refused", [
    ("127.0.0.1", "", False, False, False),
    ("localhost", "", False, False, False),
    ("::1", "", False, False, False),
    ("0.0.0.0", "", False, False, True),
    ("192.168.1.20", "", False, False, True),
    ("memory.lan", "", False, False, True),
    ("0.0.0.0", TOKEN, False, False, False),
    ("0.0.0.0", "", True, False, False),
    ("0.0.0.0", "", False, True, False),
])
def test_a_network_address_with_no_credential_is_refused(service, host, token, key, allow, refused):
    from dcpm.server.exposure import exposure_refusal

    service.settings.api_token, service.settings.allow_open_network = SecretStr(token), allow
    if key:
        service.keys.create_key("ana")
    refusal = exposure_refusal(service.settings, host, service.db)
    assert (refusal is not None) == refused
    if refused:
        assert "--allow-open-network" in refusal and "DCPM_API_TOKEN" in refusal


@pytest.mark.parametrize("host", ["evil.example:8420", "evil.example", "127.0.0.1.evil.example:8420", ""])
def test_a_foreign_host_header_is_refused(bound, host):
    assert bound.get("/v1/users", headers={"Host": host}).status_code in (400, 421)


@pytest.mark.parametrize("host", ["127.0.0.1:8420", "localhost:8420", "[::1]:8420", "memory.lan:8420"])
def test_loopback_names_and_allowed_hosts_are_served(bound, host):
    assert bound.get("/v1/users", headers={"Host": host}).status_code == 200


@pytest.mark.parametrize("method, path, body", [
    ("POST", "/v1/memories", {"user_id": "ana", "text": BEES, "infer": False}),
    ("POST", "/v1/admin/reindex", None),
    ("POST", "/v1/admin/backfill", None),
    ("GET", "/v1/users", None),
])
@pytest.mark.parametrize("origin", ["http://evil.example:8420", "http://evil.example", "null",
                                    "http://127.0.0.1:9999", "https://127.0.0.1:8420.evil.example"])
def test_a_cross_site_request_is_refused(bound, service, method, path, body, origin):
    response = bound.request(method, path, json=body, headers={"Origin": origin})
    assert response.status_code == 403 and response.json()["error"] == "forbidden"
    assert service.users() == []


def test_same_origin_requests_and_requests_without_an_origin_are_served(bound, service):
    same = bound.post("/v1/memories", json={"user_id": "ana", "text": BEES, "infer": False},
                      headers={"Origin": LOOPBACK})
    assert same.status_code == 201
    other_name = bound.get("/v1/users", headers={"Origin": "http://localhost:8420", "Host": "localhost:8420"})
    assert other_name.status_code == 200
    assert bound.post("/v1/search", json={"user_id": "ana", "query": "bees"}).json()["hits"]


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
def test_restore_refuses_a_body_that_is_not_ndjson(api, service, tmp_path, content_type):
    remember(service)
    export = api.get("/v1/admin/users/ana/export").content
    api.delete("/v1/users/ana")
    headers = {"content-type": content_type} if content_type else {}
    response = api.post("/v1/admin/restore", content=export, headers=headers)
    assert response.status_code in (415, 422) and "application/x-ndjson" in response.json()["message"]
    assert service.users() == []


def test_a_transfer_is_staged_in_the_data_directory_and_a_refusal_names_no_path_of_it(api, service, settings):
    """Exports and restores were staged in the system's temp directory, where a crash mid-transfer
    left a copy of the user that no delete reaches, and a refused restore named that file."""
    remember(service)
    export = api.get("/v1/admin/users/ana/export").content
    api.delete("/v1/users/ana")
    damaged = export.replace(BEES.encode(), b"Ana keeps wasps on her allotment")
    response = api.post("/v1/admin/restore", content=damaged, headers={"content-type": "application/x-ndjson"})
    message = response.json()["message"]
    assert response.status_code == 422 and message.startswith("the export is damaged")
    assert "/" not in message and service.users() == []
    assert not [p for p in settings.data_dir.iterdir() if p.name.startswith(".transfer-")]  # nothing left behind


def test_the_client_restores_an_export_as_ndjson(service, settings, embedder, tmp_path):
    remember(service)
    other = MemoryService(settings.model_copy(update={"data_dir": tmp_path / "elsewhere"}), embedder=embedder)
    try:
        with served(create_app(service)) as source, served(create_app(other)) as target:
            with Client(source) as client:
                client.export_user("ana", tmp_path / "ana.jsonl")
            with Client(target) as client:
                assert client.restore(tmp_path / "ana.jsonl")["user_id"] == "ana"
        assert [u.id for u in other.users()] == ["ana"]
    finally:
        other.close()


def test_a_chunked_body_over_the_limit_is_refused_before_it_is_parsed(service):
    service.settings.max_body_bytes = 10_000

    def chunks() -> Iterator[bytes]:
        yield b'{"user_id": "ana", "infer": false, "text": "'
        for _ in range(20):
            yield b"x" * 1_000
        yield b'"}'

    with served(create_app(service)) as url:
        response = httpx.post(f"{url}/v1/memories", content=chunks(), headers={"content-type": "application/json"})
        assert response.status_code == 413 and response.json()["error"] == "too_large"
        small = httpx.post(f"{url}/v1/memories", content=iter([b'{"user_id": "ana", ', b'"text": "hi", "infer": false}']),
                           headers={"content-type": "application/json"})
        assert small.status_code == 201
    assert service.list_memories("ana", kind="raw").total == 1


def test_healthz_asks_the_llm_at_most_once_per_interval(settings, embedder):
    with LLMServer() as llm:
        probes: list[str] = []
        handler = llm._httpd.RequestHandlerClass
        answer = handler.do_GET
        handler.do_GET = lambda request: (probes.append(request.path), answer(request))  # type: ignore[method-assign]
        settings.llm_base_url, settings.llm_model = llm.url, "scripted"
        service = MemoryService(settings, embedder=embedder)
        try:
            with TestClient(create_app(service)) as api:
                reports = [api.get("/healthz").json() for _ in range(5)]
        finally:
            service.close()
    assert probes == ["/v1/models"]
    assert all(report["llm"]["ok"] for report in reports)


def test_healthz_tells_a_caller_without_the_admin_token_only_what_is_up(api, service):
    service.settings.api_token = SecretStr(TOKEN)
    key = service.keys.create_key("ana").key
    for headers in ({}, bearer(key), bearer("wrong")):
        public = api.get("/healthz", headers=headers)
        assert public.status_code == 200 and public.json()["status"] == "ok"
        assert public.json()["store"] == {"ok": True} and "dcpm.db" not in public.text
    admin = api.get("/healthz", headers=bearer(TOKEN)).json()
    assert "dcpm.db" in admin["store"]["url"] and admin["embedder"]["dim"] == 384


# --- finding 8: waiting adds cannot take every worker ------------------------------------------

def test_a_waiting_add_beyond_the_cap_is_answered_at_once_and_extracted_in_the_background(settings, embedder):
    with ana_waiting_on_a_slow_llm(settings, embedder, max_waiting_adds=1, slow_seconds=4.0) as (url, service, first):
        started = time.monotonic()
        second = httpx.post(f"{url}/v1/memories", json={"user_id": "bob", "text": "Bob plays the cello"}, timeout=60)
        assert second.status_code == 202 and time.monotonic() - started < 3
        assert second.json()["status"] == "pending" and "background" in second.json()["message"]
        assert first.result().status_code == 201 and first.result().json()["status"] == "done"
        deadline = time.monotonic() + 20
        while service.list_memories("bob", kind="raw").items[0].status != RawStatus.DONE:
            assert time.monotonic() < deadline, "bob's input was never extracted"
            time.sleep(0.1)


# --- failed inputs, visible --------------------------------------------------------------------

def test_metrics_count_failed_inputs_when_scraped(api, service):
    failed = remember(service)
    remember(service, text="Ana's hives are by the pear tree")
    assert 'dcpm_raw_inputs{status="failed"} 0.0' in api.get("/metrics").text
    with service.db.session() as session:
        session.execute(update(RawInput).where(RawInput.id == failed)
                        .values(status=RawStatus.FAILED, error="context_length_exceeded"))
    scraped = api.get("/metrics").text
    assert 'dcpm_raw_inputs{status="failed"} 1.0' in scraped
    assert 'dcpm_raw_inputs{status="raw"} 1.0' in scraped


def test_an_open_daemon_answers_as_the_admin(service):
    assert authenticate(None, service.settings, service.db) == ADMIN


@pytest.mark.parametrize("user_id", ["bob\n", "bob\r\n", "bob\t"])
def test_a_trailing_control_character_does_not_make_another_user(api, service, user_id):
    """"bob\\n" would list as "bob", miss bob's delete and get a key of its own."""
    remember(service, user="bob")
    added = api.post("/v1/memories", json={"user_id": user_id, "text": BEES, "infer": False})
    assert added.status_code == 422 and "user_id" in added.json()["message"]
    assert api.post("/v1/admin/keys", json={"user_id": user_id}).status_code == 422
    assert [u.id for u in service.users()] == ["bob"]
