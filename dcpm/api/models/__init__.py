"""The wire contract shared by the HTTP server, the Python client, the CLI's --json output and
the MCP tools, one module per surface of the API. Everything is re-exported here, so callers
write `from dcpm.api.models import SearchRequest`."""

from dcpm.api.models.consolidation import (
    ConsentOut,
    ConsentUpdate,
    ConsolidateRequest,
    EvidenceOut,
    GraphEdgeOut,
    GraphNodeOut,
    GraphOut,
    JobOut,
    NodeOut,
    RunOut,
)
from dcpm.api.models.edits import DeleteResponse, DeleteUserResponse, UpdateMemoryRequest
from dcpm.api.models.inspection import (
    HistoryEvent,
    HistoryResponse,
    ItemOut,
    ListResponse,
    RawOut,
    RevisionOut,
    UserOut,
)
from dcpm.api.models.keys import ApiKeyOut, CreateKeyRequest, NewApiKey
from dcpm.api.models.memories import (
    AddMemoryRequest,
    AddMemoryResponse,
    ChainLink,
    ImportBatch,
    ImportBatchResult,
    ImportTurn,
    Message,
    NodeHit,
    Operation,
    SearchHit,
    SearchRequest,
    SearchResponse,
)

__all__ = [
    "AddMemoryRequest", "AddMemoryResponse", "ApiKeyOut", "ChainLink", "ConsentOut", "ConsentUpdate",
    "ConsolidateRequest", "CreateKeyRequest", "DeleteResponse", "DeleteUserResponse", "EvidenceOut",
    "GraphEdgeOut", "GraphNodeOut", "GraphOut", "HistoryEvent", "HistoryResponse", "ImportBatch",
    "ImportBatchResult", "ImportTurn", "ItemOut", "JobOut", "ListResponse", "Message", "NewApiKey", "NodeHit",
    "NodeOut", "Operation", "RawOut", "RevisionOut", "RunOut", "SearchHit", "SearchRequest", "SearchResponse",
    "UpdateMemoryRequest", "UserOut",
]
