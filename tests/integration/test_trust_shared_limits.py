"""Limits every tenant shares, which one key must not be able to use against the others: the
waiting slots for adds, compaction of the vector shard, and the brake on guessing credentials.
Ana's and Bob's assistants hold a key each; Mallory guesses from an address of her own."""

from __future__ import annotations

import httpx
from fastapi.testclient import TestClient
from pydantic import SecretStr

from dcpm.api.models import AddMemoryRequest
from dcpm.server.app import create_app

from .slow_llm import ana_waiting_on_a_slow_llm
from .test_canary_delete import shard_residue

ADMIN = "admin-s3cret"
SECRET = "Ana's locker code is quokka-4711"
UNKNOWN_ID = "00000000-0000-0000-0000-000000000000"


def bearer(credential: str) -> dict:
    return {"Authorization": f"Bearer {credential}"}


def remember(service, user: str, text: str) -> str:
    return service.add_memory(AddMemoryRequest(user_id=user, text=text, infer=False, session_id="s1")).raw_ids[0]


# --- waiting slots: one user's flood of adds leaves slots to the others ----------------------------

def test_while_ana_floods_the_daemon_with_adds_bob_still_gets_his_extraction_at_once(settings, embedder):
    # two slots, of which one user holds at most one (a quarter, at least one); Ana's first add holds hers
    with ana_waiting_on_a_slow_llm(settings, embedder, max_waiting_adds=2, slow_seconds=5.0) as (url, _, first):
        flood = httpx.post(f"{url}/v1/memories", json={"user_id": "ana", "text": "Ana sells honey"}, timeout=60)
        assert flood.status_code == 202 and flood.json()["status"] == "pending"  # stored, extracted later
        bob = httpx.post(f"{url}/v1/memories", json={"user_id": "bob", "text": "Bob plays the cello"}, timeout=60)
        assert bob.status_code == 201 and bob.json()["status"] == "done"
        assert first.result().status_code == 201 and first.result().json()["status"] == "done"


# --- compaction of the shared shard: the admin's to ask for ---------------------------------------

def test_an_api_key_cannot_make_the_daemon_compact_the_shard_every_user_shares(service, settings):
    service.settings.api_token = SecretStr(ADMIN)
    secret = remember(service, "ana", SECRET)
    bob = remember(service, "bob", "Bob plays the cello on Sundays")
    ana = bearer(service.keys.create_key("ana").key)
    with TestClient(create_app(service)) as api:
        for route in (f"/v1/items/{secret}", f"/v1/nodes/{UNKNOWN_ID}", "/v1/users/ana/sessions/s1", "/v1/users/ana"):
            refused = api.delete(route, params={"compact": "true"}, headers=ana)
            assert refused.status_code == 403, route
            assert "needs the admin token" in refused.json()["message"]
        assert api.get(f"/v1/items/{secret}", headers=ana).status_code == 200  # refused before anything went

        assert api.delete(f"/v1/items/{secret}", headers=ana).json()["deleted"] == [secret]
        assert shard_residue(settings.data_dir, [secret], (), ["quokka"]) != {}  # until the daemon compacts
        service.maintenance.compact_max_delay_seconds = 0.0  # as when compact_max_delay_seconds have passed
        service.maintenance.step()  # the daemon's upkeep loop, one round
        assert shard_residue(settings.data_dir, [secret], (), ["quokka"]) == {}

        assert api.delete(f"/v1/items/{bob}", params={"compact": "true"}, headers=bearer(ADMIN)).status_code == 200
        assert service.index.pending_purge() is None  # the admin's delete compacted before answering
        described = api.get("/openapi.json").json()["paths"]["/v1/items/{memory_id}"]["delete"]["parameters"]
        assert "Admin token only" in next(p for p in described if p["name"] == "compact")["description"]


# --- guessing credentials: an address that keeps failing is refused for a while -------------------

class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_an_address_that_sent_too_many_wrong_credentials_is_refused_until_its_window_passes(service):
    service.settings.api_token = SecretStr(ADMIN)
    key = service.keys.create_key("ana").key
    app = create_app(service)  # 20 wrong credentials per 60 s, the defaults
    clock = app.state.lockout.clock = Clock()
    bobs_key = service.keys.create_key("bob").key
    with (TestClient(app, client=("203.0.113.7", 5000)) as mallory,
          TestClient(app, client=("203.0.113.7", 5001)) as neighbour,  # same address (a NAT, loopback)
          TestClient(app, client=("198.51.100.2", 5000)) as assistant):
        assert neighbour.get("/v1/users", headers=bearer(bobs_key)).status_code == 200
        for _ in range(30):
            assert mallory.get("/v1/users").status_code == 401  # no credential is no guess: never counted
        for n in range(20):
            assert mallory.get("/v1/users", headers=bearer(f"guess-{n}")).status_code == 401
        for credential in ("guess-20", ADMIN, key):  # refused unchecked, a right credential too
            locked = mallory.get("/v1/users", headers=bearer(credential))
            assert locked.status_code == 429 and locked.headers["Retry-After"] == "60"
            assert locked.json()["error"] == "too_many_requests" and "60 s" in locked.json()["message"]
        # a credential that succeeded before the lockout still passes from the same address
        assert neighbour.get("/v1/users", headers=bearer(bobs_key)).status_code == 200
        assert neighbour.get("/v1/users", headers=bearer("guess-x")).status_code == 429
        health = mallory.get("/healthz", headers=bearer(ADMIN))
        assert health.status_code == 200 and set(health.json()["store"]) == {"ok"}  # the public view
        assert assistant.get("/v1/users", headers=bearer(key)).status_code == 200  # another address
        assert assistant.get("/v1/users", headers=bearer("wrong")).status_code == 401

        clock.now += 59
        assert mallory.get("/v1/users", headers=bearer(ADMIN)).headers["Retry-After"] == "1"
        clock.now += 1
        assert mallory.get("/v1/users", headers=bearer(ADMIN)).status_code == 200
        assert mallory.get("/v1/users", headers=bearer("guess-21")).status_code == 401  # a new window
