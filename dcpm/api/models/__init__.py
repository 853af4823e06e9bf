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
from dcpm.api.models.filters import (
    METADATA_FILTER_HELP,
    MetadataFilter,
    MetadataOperators,
    metadata_conditions,
    metadata_filter_json,
    parse_metadata_filter,
)
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
    Provenance,
    SearchHit,
    SearchRequest,
    SearchResponse,
)

__all__ = [
    "METADATA_FILTER_HELP", "AddMemoryRequest", "AddMemoryResponse", "ApiKeyOut", "ChainLink", "ConsentOut",
    "ConsentUpdate", "ConsolidateRequest", "CreateKeyRequest", "DeleteResponse", "DeleteUserResponse",
    "EvidenceOut", "GraphEdgeOut", "GraphNodeOut", "GraphOut", "HistoryEvent", "HistoryResponse", "ImportBatch",
    "ImportBatchResult", "ImportTurn", "ItemOut", "JobOut", "ListResponse", "Message", "MetadataFilter",
    "MetadataOperators", "NewApiKey", "NodeHit", "NodeOut", "Operation", "Provenance", "RawOut", "RevisionOut",
    "RunOut", "SearchHit", "SearchRequest", "SearchResponse", "UpdateMemoryRequest", "UserOut",
    "metadata_conditions", "metadata_filter_json", "parse_metadata_filter"
]
