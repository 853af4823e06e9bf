"""`dcpm.Client`: typed Python client for a running dcpm daemon (the CLI uses it too)."""

from __future__ import annotations

from typing import Any

import httpx
from pydantic import TypeAdapter

from dcpm.errors import Conflict, DcpmError, Invalid, NotFound, Unauthorized, Unavailable
from dcpm.ingest import Turn
from dcpm.schemas import (
    AddMemoryRequest,
    AddMemoryResponse,
    HistoryResponse,
    ImportBatch,
    ImportBatchResult,
    ImportTurn,
    ItemOut,
    ListResponse,
    RawOut,
    SearchRequest,
    SearchResponse,
    UserOut,
)

_ERRORS: dict[int, type[DcpmError]] = {400: Invalid, 401: Unauthorized, 403: Unauthorized, 404: NotFound,
                                       409: Conflict, 413: Invalid, 422: Invalid, 503: Unavailable}
_MEMORY = TypeAdapter(ItemOut | RawOut)
_USERS = TypeAdapter(list[UserOut])


class Client:
    def __init__(self, url: str = "http://127.0.0.1:8420", token: str | None = None, timeout: float = 120.0):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=url.rstrip("/"), headers=headers, timeout=timeout)

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
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
        return response.json()

    def add_memory(self, request: AddMemoryRequest | None = None, **fields: Any) -> AddMemoryResponse:
        request = request or AddMemoryRequest(**fields)
        body = request.model_dump(mode="json", exclude_none=True)
        return AddMemoryResponse.model_validate(self._call("POST", "/v1/memories", json=body))

    def search(self, request: SearchRequest | None = None, **fields: Any) -> SearchResponse:
        request = request or SearchRequest(**fields)
        body = request.model_dump(mode="json", exclude_none=True)
        return SearchResponse.model_validate(self._call("POST", "/v1/search", json=body))

    def list_memories(self, user_id: str, kind: str | None = None, limit: int = 50, offset: int = 0) -> ListResponse:
        params: dict[str, Any] = {"limit": limit, "offset": offset}
        if kind:
            params["kind"] = kind
        return ListResponse.model_validate(self._call("GET", f"/v1/users/{user_id}/items", params=params))

    def get(self, memory_id: str) -> ItemOut | RawOut:
        return _MEMORY.validate_python(self._call("GET", f"/v1/items/{memory_id}"))

    def users(self) -> list[UserOut]:
        return _USERS.validate_python(self._call("GET", "/v1/users"))

    def import_turns(self, user_id: str, turns: list[Turn]) -> int:
        batch = ImportBatch(user_id=user_id, turns=[
            ImportTurn(id=t.id or "", text=t.text, role=t.role, speaker=t.speaker, session_id=t.session_id,
                       timestamp=t.timestamp, metadata=t.metadata) for t in turns])
        result = self._call("POST", "/v1/import", json=batch.model_dump(mode="json"))
        return ImportBatchResult.model_validate(result).imported

    def history(self, memory_id: str) -> HistoryResponse:
        return HistoryResponse.model_validate(self._call("GET", f"/v1/items/{memory_id}/history"))

    def backfill(self, progress=None) -> int:  # type: ignore[no-untyped-def]
        return int(self._call("POST", "/v1/admin/backfill")["processed"])

    def reindex(self) -> int:
        return int(self._call("POST", "/v1/admin/reindex")["points"])

    def health(self) -> dict:
        return self._call("GET", "/healthz")

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()
