"""`dcpm.Client`: typed Python client for a running dcpm daemon (the CLI uses it too)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from pydantic import TypeAdapter

from dcpm.api.models import (
    AddMemoryRequest,
    AddMemoryResponse,
    ApiKeyOut,
    ConsentOut,
    ConsentUpdate,
    ConsolidateRequest,
    CreateKeyRequest,
    DeleteResponse,
    DeleteUserResponse,
    GraphOut,
    HistoryEvent,
    HistoryResponse,
    ImportBatch,
    ImportBatchResult,
    ImportTurn,
    ItemOut,
    JobOut,
    ListResponse,
    MetadataFilter,
    NewApiKey,
    NodeOut,
    RawOut,
    RunOut,
    SearchRequest,
    SearchResponse,
    UpdateMemoryRequest,
    UserOut,
    metadata_filter_json,
)
from dcpm.api.protocol import Progress
from dcpm.domain import Turn
from dcpm.errors import Conflict, DcpmError, Invalid, Unavailable


def _error_classes(root: type[DcpmError]) -> dict[int, type[DcpmError]]:
    """HTTP status -> the error it stands for, read off the hierarchy (a subclass never shadows
    its base's status: 503 stays Unavailable, 507 is StorageFull)."""
    found: dict[int, type[DcpmError]] = {}
    for cls in root.__subclasses__():
        found.setdefault(cls.http_status, cls)
        for status, sub in _error_classes(cls).items():
            found.setdefault(status, sub)
    return found


_ERRORS = {**_error_classes(DcpmError), 400: Invalid, 413: Invalid}  # refused bodies and routes read as Invalid
_MEMORY = TypeAdapter(ItemOut | RawOut)
_USERS = TypeAdapter(list[UserOut])


def _id(segment: str, slashes: bool = False) -> str:
    """An id as one path segment: whatever it holds (a caller's or a model's text), it cannot
    reach another route or add query parameters (servers decode %2F back into a slash, so only a
    route's last parameter, read as a path, may hold one: `slashes`); an empty one would name the
    route above it, and so would '.' or '..', which HTTP clients resolve as dot segments
    (/v1/users/ana/sessions/.. is sent as /v1/users/ana)."""
    if not segment:
        raise Invalid("'' is not an id: it is empty")
    if "/" in segment and not slashes:
        raise Invalid(f"{segment!r} is not an id: it contains '/'")
    if segment in (".", ".."):
        raise Invalid(f"{segment!r} is not an id: a URL reads it as the route above")
    return quote(segment, safe="")


def _flags(**flags: bool) -> dict[str, str]:
    return {name: "true" for name, on in flags.items() if on}


class Client:
    def __init__(self, url: str = "http://127.0.0.1:8420", token: str | None = None, timeout: float = 120.0):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=url.rstrip("/"), headers=headers, timeout=timeout)

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """The response of a successful call; a refusal becomes the error it stands for."""
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise Unavailable(f"cannot reach the dcpm daemon at {self._http.base_url}: {exc}") from exc
        if response.status_code >= 400:
            try:
                message = response.json().get("message", response.text)
            except ValueError:
                message = response.text
            raise _ERRORS.get(response.status_code, DcpmError)(message)
        return response

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        return self._send(method, path, **kwargs).json()

    def add_memory(self, request: AddMemoryRequest | None = None, **fields: Any) -> AddMemoryResponse:
        request = request or AddMemoryRequest(**fields)
        body = request.model_dump(mode="json", exclude_none=True)
        return AddMemoryResponse.model_validate(self._call("POST", "/v1/memories", json=body))

    def search(self, request: SearchRequest | None = None, **fields: Any) -> SearchResponse:
        request = request or SearchRequest(**fields)
        body = request.model_dump(mode="json", exclude_none=True)
        return SearchResponse.model_validate(self._call("POST", "/v1/search", json=body))

    def list_memories(self, user_id: str, kind: str | None = None, limit: int = 50, offset: int = 0,
                      status: str | None = None, topic: str | None = None, since: datetime | None = None,
                      metadata: MetadataFilter | None = None) -> ListResponse:
        params: dict[str, Any] = {"limit": limit, "offset": offset}
        for key, value in (("kind", kind), ("status", status), ("topic", topic)):
            if value:
                params[key] = value
        if since:
            params["since"] = since.isoformat()
        if metadata:
            params["metadata"] = metadata_filter_json(metadata)
        return ListResponse.model_validate(self._call("GET", f"/v1/users/{_id(user_id)}/items", params=params))

    def get(self, memory_id: str) -> ItemOut | RawOut:
        return _MEMORY.validate_python(self._call("GET", f"/v1/items/{_id(memory_id)}"))

    def users(self, only: str | None = None) -> list[UserOut]:
        """Users the caller may see (an API key: its own user); `only` narrows to one of them."""
        found = _USERS.validate_python(self._call("GET", "/v1/users"))
        return [u for u in found if only is None or u.id == only]

    def import_turns(self, user_id: str, turns: list[Turn]) -> int:
        batch = ImportBatch(user_id=user_id, turns=[
            ImportTurn(id=t.id or "", text=t.text, role=t.role, speaker=t.speaker, session_id=t.session_id,
                       timestamp=t.timestamp, metadata=t.metadata) for t in turns])
        result = self._call("POST", "/v1/import", json=batch.model_dump(mode="json"))
        return ImportBatchResult.model_validate(result).imported

    def history(self, memory_id: str) -> HistoryResponse:
        return HistoryResponse.model_validate(self._call("GET", f"/v1/items/{_id(memory_id)}/history"))

    def delete_memory(self, memory_id: str, with_predecessors: bool = False, compact: bool = False) -> DeleteResponse:
        params = _flags(with_predecessors=with_predecessors, compact=compact)
        return DeleteResponse.model_validate(self._call("DELETE", f"/v1/items/{_id(memory_id)}", params=params))

    def update_memory(self, memory_id: str, text: str) -> ItemOut:
        body = UpdateMemoryRequest(text=text).model_dump(mode="json")
        return ItemOut.model_validate(self._call("PATCH", f"/v1/items/{_id(memory_id)}", json=body))

    def delete_chain(self, memory_id: str, compact: bool = False) -> DeleteResponse:
        params = _flags(chain=True, compact=compact)
        return DeleteResponse.model_validate(self._call("DELETE", f"/v1/items/{_id(memory_id)}", params=params))

    def node(self, node_id: str) -> NodeOut:
        return NodeOut.model_validate(self._call("GET", f"/v1/nodes/{_id(node_id)}"))

    def delete_node(self, node_id: str, compact: bool = False) -> DeleteResponse:
        return DeleteResponse.model_validate(self._call("DELETE", f"/v1/nodes/{_id(node_id)}",
                                                        params=_flags(compact=compact)))

    def delete_session(self, user_id: str, session_id: str, compact: bool = False) -> DeleteResponse:
        path = f"/v1/users/{_id(user_id)}/sessions/{_id(session_id, slashes=True)}"
        return DeleteResponse.model_validate(self._call("DELETE", path, params=_flags(compact=compact)))

    def events(self, user_id: str, limit: int = 200) -> list[HistoryEvent]:
        return TypeAdapter(list[HistoryEvent]).validate_python(
            self._call("GET", f"/v1/users/{_id(user_id)}/events", params={"limit": limit}))

    def delete_user(self, user_id: str, compact: bool = False) -> DeleteUserResponse:
        return DeleteUserResponse.model_validate(self._call("DELETE", f"/v1/users/{_id(user_id)}",
                                                            params=_flags(compact=compact)))

    def backfill(self, progress: Progress | None = None, retry_failed: bool = False) -> int:
        """The daemon answers when it is done; `progress` hears of it once, at the end."""
        params = {"retry_failed": "true"} if retry_failed else {}
        processed = int(self._call("POST", "/v1/admin/backfill", params=params)["processed"])
        if progress:
            progress(1, 1)
        return processed

    def consolidate(self, request: ConsolidateRequest) -> JobOut:
        return JobOut.model_validate(self._call("POST", "/v1/admin/consolidate", json=request.model_dump(mode="json")))

    def consolidation_job(self, job_id: str) -> JobOut:
        return JobOut.model_validate(self._call("GET", f"/v1/admin/consolidate/{_id(job_id)}"))

    def runs(self, user_id: str | None = None, limit: int = 50) -> list[RunOut]:
        params: dict[str, Any] = {"limit": limit, **({"user_id": user_id} if user_id else {})}
        return TypeAdapter(list[RunOut]).validate_python(self._call("GET", "/v1/admin/runs", params=params))

    def consent(self, user_id: str, update: ConsentUpdate | None = None) -> ConsentOut:
        if update is None:
            return ConsentOut.model_validate(self._call("GET", f"/v1/users/{_id(user_id)}/consent"))
        return ConsentOut.model_validate(self._call("PUT", f"/v1/users/{_id(user_id)}/consent",
                                                    json=update.model_dump(exclude_none=True)))

    def graph(self, user_id: str) -> GraphOut:
        return GraphOut.model_validate(self._call("GET", f"/v1/users/{_id(user_id)}/graph"))

    def export_user(self, user_id: str, path: Path) -> dict:
        from dcpm.store.datadir import replace_privately

        response = self._send("GET", f"/v1/admin/users/{_id(user_id)}/export")
        replace_privately(path, response.content)  # never half an export over the previous one
        return json.loads(response.content.split(b"\n", 1)[0])["manifest"]

    def restore(self, path: Path) -> dict:
        return self._call("POST", "/v1/admin/restore", content=path.read_bytes(),
                          headers={"content-type": "application/x-ndjson"})

    def reindex(self, progress: Progress | None = None) -> int:
        """The daemon answers when it is done; `progress` hears of it once, at the end."""
        points = int(self._call("POST", "/v1/admin/reindex")["points"])
        if progress:
            progress(points, points)
        return points

    # --- API keys (admin token only) ---------------------------------------------------------
    def create_key(self, user_id: str, label: str | None = None) -> NewApiKey:
        body = CreateKeyRequest(user_id=user_id, label=label).model_dump(mode="json")
        return NewApiKey.model_validate(self._call("POST", "/v1/admin/keys", json=body))

    def api_keys(self, user_id: str | None = None) -> list[ApiKeyOut]:
        params = {"user_id": user_id} if user_id else {}
        return TypeAdapter(list[ApiKeyOut]).validate_python(self._call("GET", "/v1/admin/keys", params=params))

    def revoke_key(self, key_ref: str) -> ApiKeyOut:
        return ApiKeyOut.model_validate(self._call("DELETE", f"/v1/admin/keys/{quote(key_ref, safe='')}"))

    def health(self) -> dict:
        return self._call("GET", "/healthz")

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()


def daemon_client(settings: Any) -> Client | None:
    """A client for the daemon that serves `settings.data_dir` right now, if one does (the
    embedded vector store belongs to one process, so everyone else goes through its API). Whoever
    answers at daemon.json's address must answer its instance token too: a daemon that has not
    bound its port yet (or lost it) must not send this data directory's commands to another one."""
    from dcpm.store.datadir import running_daemon

    info = running_daemon(settings.data_dir)
    if info is None:
        return None
    client = Client(str(info["url"]), token=settings.api_token.get_secret_value() or None)
    if "instance" in info:  # a daemon.json of an older dcpm has none
        try:
            answered = client._call("GET", "/healthz/instance").get("instance")
        except Unavailable as exc:
            client.close()
            raise Unavailable(f"the daemon serving {settings.data_dir} (pid {info.get('pid')}) does not answer at "
                              f"{info['url']}: {exc.message}") from None
        except DcpmError:
            answered = None
        if answered != info["instance"]:
            client.close()
            raise Conflict(f"{info['url']} answers for another data directory than {settings.data_dir}, whose "
                           f"daemon (pid {info.get('pid')}) is not serving there; nothing was sent. Try again "
                           "once it serves, or stop it")
    return client
