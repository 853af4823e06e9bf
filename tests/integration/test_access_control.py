"""Access control over HTTP: the admin token reaches everything, a user key reaches its own user
only. Ana's assistant holds a key for Ana; Bob's memories sit in the same store."""

from __future__ import annotations

import hashlib
import re
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from dcpm.api.client import Client
from dcpm.api.models import AddMemoryRequest
from dcpm.config import Settings
from dcpm.errors import Forbidden, Unauthorized
from dcpm.server.app import create_app
from dcpm.service import MemoryService
from dcpm.store.models import Node

from .served import served

pytestmark = pytest.mark.storage  # these run on SQLite and on PostgreSQL (tests/conftest.py)

ADMIN = "admin-s3cret"
UNKNOWN_ID = "00000000-0000-0000-0000-000000000000"

# Who may call each route: "open" needs no credential; "any" takes any valid credential (a key
# sees only its own user in listings); "user": the admin or a key of the user the request names;
# "owner": the admin or a key of the user owning the memory (or graph node) the path names;
# "admin": the admin token only.
SCOPES = {
    ("GET", "/healthz"): "open",
    ("GET", "/healthz/instance"): "open",  # the daemon's instance token (daemon.json), nothing of a user
    ("GET", "/admin"): "open",  # the page shell; its data calls carry a credential
    ("GET", "/openapi.json"): "open",
    ("GET", "/docs"): "open",
    ("POST", "/v1/memories"): "user",
    ("POST", "/v1/search"): "user",
    ("GET", "/v1/users"): "any",
    ("GET", "/v1/users/{user_id}/items"): "user",
    ("GET", "/v1/items/{memory_id}"): "owner",
    ("GET", "/v1/items/{memory_id}/history"): "owner",
    ("PATCH", "/v1/items/{memory_id}"): "owner",
    ("DELETE", "/v1/items/{memory_id}"): "owner",
    ("DELETE", "/v1/nodes/{node_id}"): "owner",
    ("GET", "/v1/nodes/{node_id}"): "owner",
    ("POST", "/v1/import"): "user",
    ("GET", "/v1/users/{user_id}/consent"): "user",
    ("PUT", "/v1/users/{user_id}/consent"): "user",
    ("GET", "/v1/users/{user_id}/graph"): "user",
    ("GET", "/v1/users/{user_id}/events"): "user",
    ("DELETE", "/v1/users/{user_id}/sessions/{session_id}"): "user",
    ("DELETE", "/v1/users/{user_id}"): "user",
    ("GET", "/v1/admin/users/{user_id}/export"): "user",
    ("POST", "/v1/admin/reindex"): "admin",
    ("POST", "/v1/admin/backfill"): "admin",
    ("POST", "/v1/admin/consolidate"): "admin",
    ("GET", "/v1/admin/consolidate/{job_id}"): "admin",
    ("GET", "/v1/admin/runs"): "admin",
    ("POST", "/v1/admin/restore"): "admin",
    ("POST", "/v1/admin/keys"): "admin",
    ("GET", "/v1/admin/keys"): "admin",
    ("DELETE", "/v1/admin/keys/{key_ref}"): "admin",
    ("GET", "/metrics"): "admin",
    ("GET", "/v1/ping/"): "any",
    ("POST", "/v3/memories/add/"): "user",
    ("POST", "/v3/memories/"): "user",
    ("POST", "/v3/memories/search/"): "user",
    ("GET", "/v1/memories/{memory_id}/"): "owner",
    ("PUT", "/v1/memories/{memory_id}/"): "owner",
    ("DELETE", "/v1/memories/{memory_id}/"): "owner",
    ("GET", "/v1/memories/{memory_id}/history/"): "owner",
    ("DELETE", "/v1/memories/"): "user",
    ("GET", "/v1/entities/"): "any",
    ("DELETE", "/v2/entities/{entity_type}/{name}/"): "user",
}
HIDDEN_FROM_SCHEMA = {("GET", "/admin"), ("GET", "/metrics"), ("GET", "/openapi.json"), ("GET", "/docs")}


@dataclass
class World:
    api: TestClient
    ana_key: str
    ana_raw: str
    bob_raw: str
    bob_node: str

    def as_ana(self) -> dict:
        return {"Authorization": f"Bearer {self.ana_key}"}


def remember(service, user: str, text: str) -> str:
    return service.add_memory(AddMemoryRequest(user_id=user, text=text, infer=False, session_id="s1")).raw_ids[0]


@contextmanager
def ana_and_bob(service) -> Iterator[World]:
    service.settings.api_token = SecretStr(ADMIN)
    ana_raw = remember(service, "ana", "Ana keeps bees on her allotment")
    bob_raw = remember(service, "bob", "Bob plays the cello on Sundays")
    with service.db.session() as session:
        node = Node(user_id="bob", kind="schema", domain="music", text="Bob practises music every weekend")
        session.add(node)
    ana_key = service.keys.create_key("ana", "ana's assistant").key
    with TestClient(create_app(service)) as api:
        yield World(api, ana_key, ana_raw, bob_raw, node.id)


@pytest.fixture
def world(service) -> Iterator[World]:
    """A fresh store per test, for tests that change it."""
    with ana_and_bob(service) as built:
        yield built


@pytest.fixture(scope="module")
def refusals(tmp_path_factory, embedder) -> Iterator[World]:
    """One store for the tests that only check refusals (a refusal changes nothing)."""
    service = MemoryService(Settings(data_dir=tmp_path_factory.mktemp("refusals")), embedder=embedder)
    try:
        with ana_and_bob(service) as built:
            yield built
    finally:
        service.close()


def cross_user_requests(w: World) -> dict[tuple[str, str], dict]:
    """For every route a key may not fully reach: a request by Ana's key aimed at Bob (his user id,
    his memory or node id) or at an admin operation."""
    bob = {"user_id": "bob"}
    return {
        ("POST", "/v1/memories"): {"url": "/v1/memories", "json": {**bob, "text": "hi", "infer": False}},
        ("POST", "/v1/search"): {"url": "/v1/search", "json": {**bob, "query": "cello"}},
        ("GET", "/v1/users/{user_id}/items"): {"url": "/v1/users/bob/items"},
        ("GET", "/v1/items/{memory_id}"): {"url": f"/v1/items/{w.bob_raw}"},
        ("GET", "/v1/items/{memory_id}/history"): {"url": f"/v1/items/{w.bob_raw}/history"},
        ("PATCH", "/v1/items/{memory_id}"): {"url": f"/v1/items/{w.bob_raw}", "json": {"text": "Bob quit"}},
        ("DELETE", "/v1/items/{memory_id}"): {"url": f"/v1/items/{w.bob_raw}"},
        ("GET", "/v1/nodes/{node_id}"): {"url": f"/v1/nodes/{w.bob_node}"},
        ("DELETE", "/v1/nodes/{node_id}"): {"url": f"/v1/nodes/{w.bob_node}"},
        ("POST", "/v1/import"): {"url": "/v1/import", "json": {**bob, "turns": []}},
        ("GET", "/v1/users/{user_id}/consent"): {"url": "/v1/users/bob/consent"},
        ("PUT", "/v1/users/{user_id}/consent"): {"url": "/v1/users/bob/consent", "json": {"schemas": False}},
        ("GET", "/v1/users/{user_id}/graph"): {"url": "/v1/users/bob/graph"},
        ("GET", "/v1/users/{user_id}/events"): {"url": "/v1/users/bob/events"},
        ("DELETE", "/v1/users/{user_id}/sessions/{session_id}"): {"url": "/v1/users/bob/sessions/s1"},
        ("DELETE", "/v1/users/{user_id}"): {"url": "/v1/users/bob"},
        ("GET", "/v1/admin/users/{user_id}/export"): {"url": "/v1/admin/users/bob/export"},
        ("POST", "/v1/admin/reindex"): {"url": "/v1/admin/reindex"},
        ("POST", "/v1/admin/backfill"): {"url": "/v1/admin/backfill"},
        ("POST", "/v1/admin/consolidate"): {"url": "/v1/admin/consolidate", "json": {"user_id": "ana"}},
        ("GET", "/v1/admin/consolidate/{job_id}"): {"url": f"/v1/admin/consolidate/{UNKNOWN_ID}"},
        ("GET", "/v1/admin/runs"): {"url": "/v1/admin/runs"},
        ("POST", "/v1/admin/restore"): {"url": "/v1/admin/restore", "content": b"{}"},
        ("POST", "/v1/admin/keys"): {"url": "/v1/admin/keys", "json": {"user_id": "ana"}},
        ("GET", "/v1/admin/keys"): {"url": "/v1/admin/keys"},
        ("DELETE", "/v1/admin/keys/{key_ref}"): {"url": f"/v1/admin/keys/{w.ana_key.split('_')[1]}"},
        ("GET", "/metrics"): {"url": "/metrics"},
        ("POST", "/v3/memories/add/"): {"url": "/v3/memories/add/",
                                        "json": {**bob, "messages": [{"role": "user", "content": "hi"}]}},
        ("POST", "/v3/memories/"): {"url": "/v3/memories/", "json": {"filters": bob}},
        ("POST", "/v3/memories/search/"): {"url": "/v3/memories/search/", "json": {"query": "cello", "filters": bob}},
        ("GET", "/v1/memories/{memory_id}/"): {"url": f"/v1/memories/{w.bob_raw}/"},
        ("PUT", "/v1/memories/{memory_id}/"): {"url": f"/v1/memories/{w.bob_raw}/", "json": {"text": "Bob quit"}},
        ("DELETE", "/v1/memories/{memory_id}/"): {"url": f"/v1/memories/{w.bob_raw}/"},
        ("GET", "/v1/memories/{memory_id}/history/"): {"url": f"/v1/memories/{w.bob_raw}/history/"},
        ("DELETE", "/v1/memories/"): {"url": "/v1/memories/", "params": bob},
        ("DELETE", "/v2/entities/{entity_type}/{name}/"): {"url": "/v2/entities/user/bob/"},
    }


def test_every_route_has_a_declared_scope(refusals):
    paths = refusals.api.get("/openapi.json").json()["paths"]
    documented = {(method.upper(), path) for path, operations in paths.items() for method in operations}
    assert documented | HIDDEN_FROM_SCHEMA == set(SCOPES)
    limited = {route for route, scope in SCOPES.items() if scope in ("user", "owner", "admin")}
    assert set(cross_user_requests(refusals)) == limited


@pytest.mark.parametrize("route", [route for route, scope in SCOPES.items() if scope in ("user", "owner", "admin")],
                         ids=lambda route: f"{route[0]} {route[1]}")
def test_a_user_key_cannot_reach_another_user_or_an_admin_operation(refusals, route):
    request = cross_user_requests(refusals)[route]
    response = refusals.api.request(route[0], **request, headers=refusals.as_ana())
    expected = 404 if SCOPES[route] == "owner" else 403
    assert response.status_code == expected, response.text
    assert response.json()["error"] == ("not_found" if expected == 404 else "forbidden")
    admin = {"Authorization": f"Bearer {ADMIN}"}
    assert refusals.api.get(f"/v1/items/{refusals.bob_raw}", headers=admin).status_code == 200  # Bob's is intact
    assert refusals.api.get("/v1/users/bob/graph", headers=admin).json()["nodes"]


def test_another_users_memory_reads_exactly_like_a_missing_one(refusals):
    theirs = refusals.api.get(f"/v1/items/{refusals.bob_raw}", headers=refusals.as_ana())
    missing = refusals.api.get(f"/v1/items/{UNKNOWN_ID}", headers=refusals.as_ana())
    assert theirs.status_code == missing.status_code == 404
    assert (theirs.json()["message"].replace(refusals.bob_raw, "ID")
            == missing.json()["message"].replace(UNKNOWN_ID, "ID"))


def test_a_key_is_refused_for_a_user_that_does_not_exist_yet_without_saying_so(refusals):
    response = refusals.api.post("/v1/search", json={"user_id": "zoe", "query": "bees"}, headers=refusals.as_ana())
    assert response.status_code == 403


def test_a_user_key_reads_and_writes_its_own_user(world):
    api, ana = world.api, world.as_ana()
    added = api.post("/v1/memories", json={"user_id": "ana", "text": "Ana's hives are by the pear tree",
                                           "infer": False}, headers=ana)
    assert added.status_code == 201
    hits = api.post("/v1/search", json={"user_id": "ana", "query": "bees hives"}, headers=ana).json()["hits"]
    assert {hit["text"] for hit in hits} >= {"Ana keeps bees on her allotment", "Ana's hives are by the pear tree"}
    assert api.get("/v1/users/ana/items", params={"kind": "raw"}, headers=ana).json()["total"] == 2
    assert api.get(f"/v1/items/{world.ana_raw}", headers=ana).json()["user_id"] == "ana"
    assert api.put("/v1/users/ana/consent", json={"core_schemas": True}, headers=ana).json()["core_schemas"] is True
    assert api.get("/v1/users/ana/graph", headers=ana).status_code == 200
    assert api.get("/v1/admin/users/ana/export", headers=ana).status_code == 200
    mem0_hits = api.post("/v3/memories/search/", json={"query": "bees", "filters": {"user_id": "ana"}}, headers=ana)
    assert mem0_hits.json()["results"]
    assert api.get(f"/v1/memories/{world.ana_raw}/", headers=ana).json()["user_id"] == "ana"
    assert api.delete(f"/v1/items/{world.ana_raw}", headers=ana).json()["deleted"] == [world.ana_raw]


def test_a_user_key_lists_only_its_own_user(refusals):
    assert [u["id"] for u in refusals.api.get("/v1/users", headers=refusals.as_ana()).json()] == ["ana"]
    entities = refusals.api.get("/v1/entities/", headers=refusals.as_ana()).json()["results"]
    assert [e["name"] for e in entities] == ["ana"]
    admin = {"Authorization": f"Token {ADMIN}"}
    assert [u["id"] for u in refusals.api.get("/v1/users", headers=admin).json()] == ["ana", "bob"]


@pytest.mark.parametrize("header", [None, "Bearer not-the-token", "Basic " + ADMIN, "Bearer",
                                    "Bearer dcpm_00000000_unknown", b"Bearer caf\xe9"])
def test_wrong_or_missing_credentials_are_refused_when_access_control_is_on(refusals, header):
    headers = {} if header is None else {"Authorization": header}
    response = refusals.api.get("/v1/users", headers=headers)
    assert response.status_code == 401
    assert response.json()["error"] == "unauthorized"


def test_open_routes_need_no_credential(refusals):
    assert refusals.api.get("/healthz").status_code == 200
    assert refusals.api.get("/admin").status_code == 200
    assert refusals.api.get("/openapi.json").status_code == 200


def test_a_revoked_key_is_refused(world, service):
    prefix = world.ana_key.split("_")[1]
    revoked = world.api.delete(f"/v1/admin/keys/{prefix}", headers={"Authorization": f"Bearer {ADMIN}"})
    assert revoked.status_code == 200 and revoked.json()["revoked_at"]
    response = world.api.get("/v1/users", headers=world.as_ana())
    assert response.status_code == 401
    assert "revoked" in response.json()["message"]


def test_the_first_key_turns_access_control_on_even_without_an_admin_token(service):
    remember(service, "ana", "Ana keeps bees on her allotment")
    with TestClient(create_app(service)) as api:
        assert api.get("/v1/users").status_code == 200  # no token, no key: open, as for one local operator
        key = service.keys.create_key("ana").key
        assert api.get("/v1/users").status_code == 401
        assert api.get("/v1/users", headers={"Authorization": f"Bearer {key}"}).json()[0]["id"] == "ana"
        assert api.post("/v1/admin/reindex", headers={"Authorization": f"Bearer {key}"}).status_code == 403
        service.keys.revoke_key(key)
        assert api.get("/v1/users").status_code == 401  # revoking the last key does not open the daemon


@pytest.mark.sqlite_only  # reads the SQLite file's bytes
def test_keys_are_stored_hashed(world, service, settings):
    made = service.keys.create_key("ana", "second device")
    listed = world.api.get("/v1/admin/keys", headers={"Authorization": f"Bearer {ADMIN}"}).json()
    assert all("key" not in entry for entry in listed) and made.prefix in {entry["prefix"] for entry in listed}
    stored = b"".join(path.read_bytes() for path in settings.data_dir.glob("dcpm.db*"))
    for key in (world.ana_key, made.key):
        secret = key.split("_", 2)[2]
        assert key.encode() not in stored and secret.encode() not in stored
        assert hashlib.sha256(key.encode()).hexdigest().encode() in stored  # the file read is the right one


def test_keys_are_managed_through_the_client_with_the_admin_token(world, service):
    with served(create_app(service)) as url:
        with Client(url, token=ADMIN) as admin:
            made = admin.create_key("bob", label="bob's assistant")
            assert re.fullmatch(r"dcpm_[0-9a-f]{8}_[A-Za-z0-9_-]{43}", made.key)
            assert [k.label for k in admin.api_keys("bob")] == ["bob's assistant"]
        with Client(url, token=made.key) as bob:
            assert [u.id for u in bob.users()] == ["bob"]
            with pytest.raises(Forbidden):
                bob.api_keys()
            with pytest.raises(Forbidden):
                bob.list_memories("ana")
        with Client(url, token=ADMIN) as admin:
            assert admin.api_keys("bob")[0].last_used_at is not None
            assert admin.revoke_key(made.id).revoked_at is not None
        with Client(url, token=made.key) as bob, pytest.raises(Unauthorized):
            bob.users()
